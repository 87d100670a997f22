"""A request that burns CPU is stopped at its budget with a clear, localized 503; the thread
is free for the next request; waiting (database, a cluster) is not CPU and is never cut."""

from __future__ import annotations

import threading
import time

import pytest

from rlark_console.cpu_budget import CPUWatchdog
from tests.console import cpu_urls

pytestmark = pytest.mark.django_db


@pytest.fixture
def budget(settings):
    settings.ROOT_URLCONF = "tests.console.cpu_urls"
    settings.RLARK_REQUEST_CPU_SECONDS = 0.5
    cpu_urls.OUTCOME.clear()
    return settings


def test_a_cpu_bound_request_is_stopped_with_a_localized_503_and_the_next_request_is_served(budget, client, alice):
    client.force_login(alice)
    t0 = time.monotonic()
    resp = client.get("/api/v1/burn/", HTTP_ACCEPT_LANGUAGE="en")
    assert resp.status_code == 503
    assert resp.json()["code"] == "request_too_expensive"
    assert "stopped after 0.5 s of CPU time" in resp.json()["detail"]
    assert cpu_urls.OUTCOME == {"finished": False}  # cut, not run to its 30 s end
    assert time.monotonic() - t0 < 25

    resp = client.get("/burn/", HTTP_ACCEPT_LANGUAGE="zh-hans")
    assert resp.status_code == 503 and "CPU" in resp.content.decode() and "请求" in resp.content.decode()

    # the same thread serves the next request normally: no exception is left pending for it
    resp = client.get("/api/v1/jobs/")
    assert resp.status_code == 200
    spin_until = time.monotonic() + 1.0
    while time.monotonic() < spin_until:  # 1 s of Python after the request: nothing is raised here
        pass


def test_waiting_is_not_cpu_and_is_not_cut(budget, client, alice):
    client.force_login(alice)
    resp = client.get("/wait/?s=1.5")  # 1.5 s of wall time against a 0.5 s CPU budget
    assert resp.status_code == 200 and resp.content == b"slept"


def test_no_budget_when_zero(budget, client, alice, monkeypatch):
    budget.RLARK_REQUEST_CPU_SECONDS = 0
    monkeypatch.setattr(cpu_urls.time, "monotonic", _fast_clock())
    client.force_login(alice)
    assert client.get("/burn/").status_code == 200 and cpu_urls.OUTCOME == {"finished": True}


def _fast_clock():
    """A clock that runs 30 s in about a million calls, so the burn view ends on its own quickly."""
    state = {"t": 0.0}

    def clock() -> float:
        state["t"] += 3e-5
        return state["t"]

    return clock


def test_the_watchdog_only_touches_registered_threads(settings):
    settings.RLARK_REQUEST_CPU_SECONDS = 0.2
    dog = CPUWatchdog(poll=0.02)
    caught: list[str] = []

    def request_thread():
        ident = dog.register("/x")
        try:
            try:
                end = time.monotonic() + 10
                while time.monotonic() < end:
                    pass
                caught.append("ran to the end")
            finally:
                dog.unregister(ident)
        except BaseException as exc:  # noqa: BLE001
            caught.append(type(exc).__name__)

    def bystander():
        end = time.monotonic() + 1.5  # burns CPU too, but is no request
        while time.monotonic() < end:
            pass
        caught.append("bystander done")

    threads = [threading.Thread(target=request_thread), threading.Thread(target=bystander)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(20)
    assert sorted(caught) == ["RequestCPUExceeded", "bystander done"]
