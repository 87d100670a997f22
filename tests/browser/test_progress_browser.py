"""Progress at a glance in Chromium (live server, in-memory runtime, the real status sync): the job list and the
Overview show "step 200 / 1,000 · 1 h 20 m left" (zh "第 200 / 1,000 步 · 剩余 1 小时 20 分"), a job without a
total its step and rate, and the list's own 10 s refresh brings the next step without a reload."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from jobs.control import controller
from jobs.models import Job
from jobs.observe.sync import sync_job
from tests.browser.test_job_pages_browser import HEAD_READY, fake, login  # noqa: F401 - the fixture
from tests.conftest import screenshot_dir
from tests.fake_runtime import job_document

pytestmark = [
    pytest.mark.browser,
    pytest.mark.django_db(transaction=True),
    pytest.mark.usefixtures("orm_beside_playwright"),
]

TEXT = {
    "en": ("step 200 / 1,000 · 1 h 20 m left", "step 16 · 3.0 steps/min", "Progress"),
    "zh-hans": ("第 200 / 1,000 步 · 剩余 1 小时 20 分", "第 16 步 · 3.0 步/分钟", "进度"),
}


def _steps(runtime, job: Job, first: str, second: str, minutes: float) -> None:
    """``runtime``'s Header prints ``first``, the sync sees it; ``minutes`` later ``second``, the sync sees it."""
    runtime.log(f"{job.name}-header-0", first)
    sync_job(job)
    then = timezone.now() - timedelta(minutes=minutes)
    Job.objects.filter(pk=job.pk).update(progress_updated_at=then, progress_base_at=then)
    runtime.log(f"{job.name}-header-0", second)
    sync_job(Job.objects.get(pk=job.pk))


def _running(runtime, name: str, owner) -> Job:
    job = Job.objects.create(name=name, owner=owner, spec=job_document(name))
    controller.request_reconcile(job)
    runtime.set_running()
    runtime.log(f"{name}-header-0", *HEAD_READY)
    sync_job(job)
    return Job.objects.get(pk=job.pk)


def test_job_list_and_overview_show_progress_in_both_languages(django_db_setup, live_server, page, fake, alice):  # noqa: F811
    timed = _running(fake, "timed", alice)
    _steps(fake, timed, "Global Step: 100/1000 | Progress: 10.0%", "Global Step: 200/1000 | Progress: 20.0%", 10)
    untimed = _running(fake, "untimed", alice)
    _steps(fake, untimed, "Global Step 10 | loss=0.2", "Global Step 16 | loss=0.1", 2)
    SHOTS = screenshot_dir()
    for lang, (with_total, without_total, column) in TEXT.items():
        login(page, live_server, lang)
        page.goto(live_server.url + "/jobs/")
        table = page.locator("[data-testid=job-table]")
        assert column in table.locator("thead").inner_text()
        assert page.locator("[data-testid=job-row-timed] [data-testid=job-progress]").inner_text() == with_total
        bar = page.locator("[data-testid=job-row-timed] [data-testid=job-progress] .wbar i")
        assert bar.get_attribute("style") == "width: 20%"
        cell = page.locator("[data-testid=job-row-untimed] [data-testid=job-progress]")
        assert cell.inner_text() == without_total and cell.locator(".wbar").count() == 0  # no total: no bar
        page.screenshot(path=str(SHOTS / f"progress-job-list-{lang}.png"), full_page=True)
        page.goto(live_server.url + "/")
        shown = [c.inner_text() for c in page.locator("[data-testid=overview-progress]").all()]
        assert sorted(shown) == sorted([with_total, without_total])
        page.screenshot(path=str(SHOTS / f"progress-overview-{lang}.png"), full_page=True)
        page.goto(live_server.url + "/jobs/timed/?tab=overview")
        assert page.locator("[data-testid=detail-progress]").inner_text() == with_total
        page.screenshot(path=str(SHOTS / f"progress-job-detail-{lang}.png"), full_page=True)

    # The list refreshes itself: the next step shows up without a reload.
    page.goto(live_server.url + "/jobs/")
    fake.log("timed-header-0", "Global Step: 300/1000 | Progress: 30.0%")
    sync_job(Job.objects.get(name="timed"))
    page.wait_for_function(
        "() => document.querySelector('[data-testid=job-row-timed] [data-testid=job-progress]')"
        ".innerText.startsWith('第 300 / 1,000 步')",
        timeout=20000,
    )
