"""Browser: the Checkpoints tab of a job with a complete checkpoint, a cut-off one and an earlier run's; the
disabled button of the incomplete one, the resume dialog with its editable run script, and the resume itself;
zh and en screenshots."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from jobs.control import controller
from jobs.models import Job
from tests.browser.test_diagnosis_browser import login, set_lang
from tests.conftest import ARTIFACTS
from tests.jobs.test_checkpoints import RUN, ckjob  # noqa: F401 - the fixture
from tests.jobs.test_metrics import job  # noqa: F401 - the fixture ckjob builds on

pytestmark = [
    pytest.mark.browser,
    pytest.mark.django_db(transaction=True),
    pytest.mark.usefixtures("orm_beside_playwright"),
]


def test_checkpoints_tab_and_resume_dialog(page, live_server, client, admin_user, ckjob, monkeypatch):  # noqa: F811
    monkeypatch.setattr(controller, "request_reconcile", lambda _job: None)  # no Workers run in this test
    ARTIFACTS.mkdir(exist_ok=True)
    login(page, live_server, client, admin_user)
    langs = (("zh-hans", "不完整", "保存被中断"), ("en", "incomplete", "the save was cut off"))
    for lang, incomplete, cut_off in langs:
        set_lang(page, live_server, lang)
        page.goto(f"{live_server.url}/jobs/job/")
        page.click("[data-testid=tab-checkpoints]")
        rows = page.locator("[data-testid=checkpoint]")
        expect(rows).to_have_count(3)
        cut = page.locator("[data-testid=checkpoint][data-step='2']")
        expect(cut.locator("[data-testid=checkpoint-state]")).to_have_text(incomplete)
        expect(cut).to_contain_text(cut_off)
        expect(cut.locator("[data-testid=resume-from]")).to_be_disabled()
        expect(page.locator("[data-testid=checkpoint][data-step='1'] [data-testid=checkpoint-latest]")).to_be_visible()
        page.screenshot(path=str(ARTIFACTS / f"checkpoints-{lang}.png"), full_page=True)
        page.click("[data-testid=checkpoint][data-step='1'] [data-testid=resume-from]")
        dialog = page.locator("[data-testid=resume-dialog]")
        expect(dialog).to_be_visible()
        script = dialog.locator("[data-testid=resume-run-script]")
        expect(script).to_have_value(
            f"cd /opt/rlinf\npython -u examples/embodiment/train_embodied_agent.py --config-name maniskill "
            f"runner.resume_dir=/data/{RUN}/checkpoints/global_step_1 2>&1 | tee /data/l\n"
        )
        page.screenshot(path=str(ARTIFACTS / f"checkpoints-resume-{lang}.png"), full_page=True)
    script.fill(script.input_value() + "echo edited\n")
    page.click("[data-testid=resume-confirm]")
    page.wait_for_url(f"{live_server.url}/jobs/job/")
    expect(page.locator("body")).to_contain_text(f"is resuming from /data/{RUN}/checkpoints/global_step_1")
    job = Job.objects.get(name="job")  # noqa: F811
    assert job.attempt == 3 and job.resume["runScript"].endswith("echo edited\n")
