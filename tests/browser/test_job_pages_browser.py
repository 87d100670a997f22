"""Job pages in Chromium (live server, in-memory runtime): the 10 s auto-refresh, the Workers
subtable before and after the first sync, the confirmation dialogs, both languages."""

from __future__ import annotations

import pytest

from jobs.control import controller
from jobs.models import Job
from jobs.observe.sync import sync_job
from tests.conftest import ARTIFACTS
from tests.fake_runtime import fake_clusters, job_document

pytestmark = [
    pytest.mark.browser,
    pytest.mark.django_db(transaction=True),
    pytest.mark.usefixtures("orm_beside_playwright"),
]

HEAD_READY = ["RLINF_NODE_RANK: 0", "Ray cluster is ready. Printing cluster information:", "Executing run script..."]


@pytest.fixture
def fake(monkeypatch, settings, tmp_path):
    return fake_clusters(monkeypatch, settings, tmp_path, {"alpha": "ns"})["alpha"]


def login(page, live_server, lang: str) -> None:
    page.context.clear_cookies()
    page.context.add_cookies([{"name": "django_language", "value": lang, "url": live_server.url}])
    page.goto(live_server.url + "/login/")
    page.fill("input[name=username]", "alice")
    page.fill("input[name=password]", "alice-pass-1")
    page.click("button[type=submit]")
    page.wait_for_load_state()


def test_list_refreshes_itself_and_detail_dialogs(django_db_setup, live_server, page, fake, alice):
    job = Job.objects.create(name="demo", owner=alice, display_name="CartPole", spec=job_document("demo"))
    controller.request_reconcile(job)
    login(page, live_server, "zh-hans")
    page.goto(live_server.url + "/jobs/")
    phase = page.locator("[data-testid=job-row-demo] [data-testid=job-phase]")
    assert phase.inner_text() == "等待中"
    # The Workers come up; the list shows it within one refresh period, without a reload.
    fake.set_running()
    fake.log("demo-header-0", *HEAD_READY)
    sync_job(job)
    page.wait_for_function(
        "() => document.querySelector('[data-testid=job-row-demo] [data-testid=job-phase]').innerText === '运行中'",
        timeout=15000,
    )
    assert page.locator("[data-testid=job-row-demo] [data-testid=job-workers]").inner_text() == "3/3"
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / "pages-job-list-zh-hans.png"))

    # Restart dialog (upstream 8.2 strings) and a restart from the page.
    page.goto(live_server.url + "/jobs/demo/")
    page.click("[data-testid=action-restart]")
    dialog = page.locator("#confirm-dialog")
    assert dialog.is_visible()
    text = dialog.inner_text()
    assert "重启方式" in text and "一键重启" in text and "编辑后重启" in text
    page.screenshot(path=str(ARTIFACTS / "pages-restart-dialog-zh-hans.png"))
    page.click("[data-testid=confirm-ok]")
    page.wait_for_load_state()
    job.refresh_from_db()
    assert job.attempt == 2
    # Delete dialog.
    page.click("[data-testid=action-delete]")
    assert "确认删除任务？" in page.locator("#confirm-dialog").inner_text()
    page.click("#confirm-dialog button[value=cancel]")
    assert Job.objects.filter(name="demo").exists()


def test_workers_subtable_before_and_after_sync(django_db_setup, live_server, page, fake, alice):
    job = Job.objects.create(name="fresh", owner=alice, spec=job_document("fresh"))
    controller.reconcile(job)  # Tasks exist; no sync yet
    for lang, empty in (("zh-hans", "暂无 Pod 详情，等待任务同步"), ("en", "No Pod details yet, waiting for sync")):
        login(page, live_server, lang)
        page.goto(live_server.url + "/jobs/fresh/?tab=workers")
        page.click("[data-testid=expand-fresh-rollout-0]")
        assert page.locator("[data-testid=pods-fresh-rollout-0]").inner_text().strip() == empty
        page.screenshot(path=str(ARTIFACTS / f"pages-workers-unsynced-{lang}.png"))
    # After a sync the expanded subtable (kept open across the 10 s refresh) shows the real Pod.
    fake.set_running()
    sync_job(job)
    page.wait_for_function(
        "() => document.querySelector('[data-testid=pods-fresh-rollout-0]').innerText.includes('127.0.0.1')",
        timeout=15000,
    )
    assert page.locator("[data-testid=pods-fresh-rollout-0]").is_visible()
    page.screenshot(path=str(ARTIFACTS / "pages-workers-synced-en.png"))
