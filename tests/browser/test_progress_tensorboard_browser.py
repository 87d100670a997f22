"""Progress from TensorBoard scalars in Chromium (live server, in-memory runtime, the real status sync): a job
whose Header log shows no ``Global Step`` line but whose ``tensorBoardDir`` (a hostPath) holds a ``global_step``
scalar shows "step 12 / 100" with its bar on the job list (zh "第 12 / 100 步")."""

from __future__ import annotations

import pytest
from tensorboard.summary.writer.event_file_writer import EventFileWriter

from jobs.models import Job
from jobs.observe import progress_tensorboard
from jobs.observe.sync import sync_job
from tests.browser.test_job_pages_browser import HEAD_READY, fake, login  # noqa: F401 - the fixture
from tests.conftest import ARTIFACTS
from tests.jobs.test_progress_tensorboard import scalars, tb_job

pytestmark = [
    pytest.mark.browser,
    pytest.mark.django_db(transaction=True),
    pytest.mark.usefixtures("orm_beside_playwright"),
]


def test_the_job_list_shows_the_tensorboard_step(django_db_setup, live_server, page, fake, alice, tmp_path):  # noqa: F811
    progress_tensorboard.forget()
    job = tb_job(alice, tmp_path / "data")
    writer = EventFileWriter(str(tmp_path / "data" / "tb" / "run"))
    scalars(writer, 12, train__global_step=12, train__loss=0.2)
    fake.set_running()
    fake.log("demo-header-0", *HEAD_READY, "[INFO] training without a progress line")
    sync_job(job)
    ARTIFACTS.mkdir(exist_ok=True)
    for lang, text in (("en", "step 12 / 100"), ("zh-hans", "第 12 / 100 步")):
        login(page, live_server, lang)
        page.goto(live_server.url + "/jobs/")
        cell = page.locator("[data-testid=job-row-demo] [data-testid=job-progress]")
        assert cell.inner_text() == text
        assert cell.locator(".wbar i").get_attribute("style") == "width: 12%"
        page.screenshot(path=str(ARTIFACTS / f"progress-tensorboard-job-list-{lang}.png"), full_page=True)
    assert Job.objects.get(pk=job.pk).progress_step == 12
    progress_tensorboard.forget()
