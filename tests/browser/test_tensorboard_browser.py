"""Browser: Open in TensorBoard. A real TensorBoard (the PyPI package) is started on demand for the
job's TensorBoard directory, bound to 127.0.0.1 and served under /jobs/<job>/tensorboard/ behind the job's
permission; the owner sees TensorBoard's own page with the job's scalars, another user gets 404, and an idle
TensorBoard is stopped."""

from __future__ import annotations

import time

import pytest
from playwright.sync_api import expect

from jobs.explain import tensorboard_server
from tests.browser import test_diagnosis_browser
from tests.browser.test_diagnosis_browser import login, set_lang
from tests.conftest import screenshot_dir

seeded = test_diagnosis_browser.seeded  # the fixture: job "demo" with TensorBoard event files

pytestmark = [
    pytest.mark.browser,
    pytest.mark.django_db(transaction=True),
    pytest.mark.usefixtures("orm_beside_playwright"),
]

SHOTS = screenshot_dir()


@pytest.fixture
def job_uid(monkeypatch):
    """The uid range the job's Workers would have (a real subordinate slot when root; the fixture's job has no
    supervisor to ask): TensorBoard runs as it."""
    import os

    from clusters.runtime.local import idmap

    ids = idmap.slot_ids(idmap.ensure_range()[0], 7) if os.geteuid() == 0 else None
    monkeypatch.setattr(tensorboard_server, "_job_ids", lambda job: ids)
    return ids


def test_open_in_tensorboard_owner_sees_it_other_user_does_not_idle_stops(
    page, live_server, client, seeded, alice, bob, job_uid
):
    seeded.owner = alice
    seeded.save(update_fields=["owner"])
    try:
        login(page, live_server, client, alice)
        set_lang(page, live_server, "zh-hans")
        page.goto(f"{live_server.url}/jobs/demo/metrics/")
        link = page.locator("[data-testid=open-tensorboard]")
        expect(link).to_have_text("在 TensorBoard 中打开 ↗")
        assert link.get_attribute("href") == "/jobs/demo/tensorboard/"
        assert tensorboard_server.running() == {}  # nothing runs until someone opens it
        t0 = time.monotonic()
        failed: list[str] = []
        page.on("response", lambda r: failed.append(f"{r.status} {r.url}") if r.status >= 400 else None)
        resp = page.goto(f"{live_server.url}/jobs/demo/tensorboard/")
        assert resp.status == 200
        print(f"\nTensorBoard start + first page: {time.monotonic() - t0:.1f} s")
        expect(page).to_have_title("TensorBoard", timeout=30_000)
        # TensorBoard's own app, its assets and data all through the proxy: the job's scalar tags appear
        expect(page.get_by_text("/success_once").first).to_be_visible(timeout=60_000)  # TensorBoard's own card
        expect(page.get_by_role("button", name="Expand group").filter(has_text="train")).to_be_visible()
        fonts_loaded = page.evaluate("document.fonts.ready.then(() => [...document.fonts].map(f => f.status))")
        assert "loaded" in fonts_loaded and not failed, failed  # every asset, the inlined CSS's fonts too
        server = tensorboard_server.running()["demo"]
        assert server.prefix == "/jobs/demo/tensorboard" and server.alive()
        page.screenshot(path=f"{SHOTS}/tensorboard-zh.png", full_page=True)

        page.context.clear_cookies()
        login(page, live_server, client, bob)
        for path in ("/jobs/demo/tensorboard/", "/jobs/demo/tensorboard/data/runs"):
            r = page.request.get(live_server.url + path)
            assert r.status == 404 and "TensorBoard" not in r.text()
        assert (
            page.request.post(live_server.url + "/jobs/demo/tensorboard/data/plugin/scalars/scalars_multirun").status
            == 404
        )

        # idle: stopped once unused for RLARK_TENSORBOARD_IDLE seconds
        assert tensorboard_server.stop_idle(time.monotonic() + 1) == []
        assert tensorboard_server.stop_idle(time.monotonic() + tensorboard_server.idle_seconds() + 1) == ["demo"]
        assert server.proc.poll() is not None and tensorboard_server.running() == {}
    finally:
        tensorboard_server.stop_all()
