"""A job submission (``jobs/api/views.py:JobListView.post``) and a status sync each
pass through the layers one way.

Every call between two project modules is recorded while the request (then the Celery entry point, then a
sync pass) runs (``sys.setprofile``; the caller is the nearest project frame on the stack). No call may go from
a lower layer to a higher one; the one exception is the "reconcile soon" hook the entry point installed in the
controller (``jobs.tasks._enqueue_reconcile``), which hands the job id to the broker and returns. Nor may a
module call back into a module that called it (functions passed in aside, :data:`INJECTED_HOOKS`). The layers
visited are printed (``pytest -s``); docs/architecture.md shows the traces.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import pytest
from django.test import TestCase
from rest_framework.test import APIClient

from clusters.runtime import registry
from jobs import tasks
from jobs.models import Job
from jobs.observe.sync import sync_all_clusters
from tests.fake_runtime import FakeRuntime
from tests.spec_fixtures import base_doc, seed_db
from tools.arch import graph

pytestmark = pytest.mark.django_db

PROJECT = graph.PACKAGES
# Functions passed in, called back by the module they were given to: the "reconcile soon" hook the entry point
# installs in the controller, and the row loader the sync hands to sync_fetch (it runs while the clusters answer).
INJECTED_HOOKS = {
    ("jobs.control.controller", "jobs.tasks", "_enqueue_reconcile"),
    ("jobs.observe.sync_fetch", "jobs.observe.sync", "load_rows"),
}


@contextmanager
def calls() -> Iterator[list[tuple[str, str, str]]]:
    """Record ``(caller module, callee module, callee function)`` of every call between project modules."""
    seen: list[tuple[str, str, str]] = []

    def project(name: str) -> bool:
        return name.split(".", 1)[0] in PROJECT

    def profile(frame, event, _arg) -> None:
        if event != "call" or frame.f_code.co_name == "<module>":  # imports are the static checks' business
            return
        callee = frame.f_globals.get("__name__", "")
        if not project(callee):
            return
        back = frame.f_back
        while back is not None and not project(back.f_globals.get("__name__", "")):
            back = back.f_back
        if back is not None:
            caller = back.f_globals["__name__"]
            if caller != callee:
                seen.append((caller, callee, frame.f_code.co_name))

    previous: Callable | None = sys.getprofile()
    sys.setprofile(profile)
    try:
        yield seen
    finally:
        sys.setprofile(previous)


def _layer(module: str) -> int | None:
    return graph.layer_of(module, graph.layers())


def _upward(seen: list[tuple[str, str, str]]) -> list[tuple[str, str, str]]:
    out = []
    for caller, callee, func in seen:
        lc, le = _layer(caller), _layer(callee)
        if lc is not None and le is not None and le < lc and (caller, callee, func) not in INJECTED_HOOKS:
            out.append((caller, callee, func))
    return out


def _returns(seen: list[tuple[str, str, str]]) -> list[tuple[str, str, str]]:
    """Calls back into a module that called the callee's module (A -> B and B -> A), hooks aside."""
    pairs = {(caller, callee) for caller, callee, func in seen if (caller, callee, func) not in INJECTED_HOOKS}
    return sorted({(c, e, f) for c, e, f in seen if (e, c) in pairs and (c, e, f) not in INJECTED_HOOKS})


def _layers_visited(seen: list[tuple[str, str, str]]) -> list[str]:
    names = [name for name, _ in graph.layers()]
    order: list[str] = []
    for _, callee, _ in seen:
        index = _layer(callee)
        if index is not None and names[index] not in order:
            order.append(names[index])
    return order


@pytest.fixture
def runtime(alice, settings, monkeypatch):
    settings.CELERY_TASK_ALWAYS_EAGER = False
    seed_db(alice)
    fake = FakeRuntime("local")
    monkeypatch.setattr(registry, "runtime_for", lambda cluster: fake)
    return fake


def test_submission_then_reconcile_then_sync_run_one_way(runtime, alice, monkeypatch):
    sent: list[int] = []
    monkeypatch.setattr(tasks.reconcile_job, "delay", lambda job_id: sent.append(job_id))
    client = APIClient()
    client.force_authenticate(alice)
    with calls() as submit, TestCase.captureOnCommitCallbacks(execute=True):
        created = client.post("/api/v1/jobs/", base_doc(), format="json")
    assert created.status_code == 201, created.json()
    job = Job.objects.get(name=created.json()["name"])
    assert sent == [job.pk]  # "reconcile soon" went through the hook, after commit
    with calls() as worker:  # the Celery worker runs the task the hook enqueued
        tasks.reconcile_job(job.pk)
    assert job.tasks.count() and runtime.pods
    with calls() as sync:  # the periodic status sync (Celery beat -> jobs.tasks.sync_all)
        sync_all_clusters(force=True)

    assert _upward(submit) == [] and _upward(worker) == [] and _upward(sync) == []
    assert _returns(submit) == [] and _returns(worker) == [] and _returns(sync) == []
    print("submission:", " -> ".join(_layers_visited(submit)))
    print("reconcile task:", " -> ".join(_layers_visited(worker)))
    print("status sync:", " -> ".join(_layers_visited(sync)))
    assert _layers_visited(submit)[:2] == ["interfaces", "control"]
    assert ("jobs.control.controller", "jobs.tasks", "_enqueue_reconcile") in submit
    assert {callee for _, callee, _ in worker} >= {"jobs.control.controller", "jobs.observe.sync"}
    assert "observe" in _layers_visited(sync)


def test_an_upward_call_and_a_call_back_are_reported():
    seen = [("jobs.observe.status", "jobs.explain.pending", "job_pending_reasons")]
    assert _upward(seen) == seen
    back = [
        ("jobs.observe.sync", "jobs.observe.status", "job_status"),
        ("jobs.observe.status", "jobs.observe.sync", "x"),
    ]
    assert _returns(back) == sorted(back)
