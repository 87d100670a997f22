"""Browser: what a user sees once a job has ended, in zh and en -- a failed job's page
(headline once, the stored failure message in the page's language, 0 ready, "Ran for"), a succeeded job's Workers
(Completed, not Stopped) and the jobs list (bar = counts). Screenshots go to test-artifacts/."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from tests.browser.test_wizard_browser import login
from tests.conftest import ARTIFACTS

pytestmark = [pytest.mark.browser, pytest.mark.e2e]
SHOTS = ARTIFACTS

SETUP = """
from datetime import timedelta
from django.utils import timezone
from django.contrib.auth import get_user_model
from clusters.models import Cluster
from jobs.models import Job, Pod, Task
admin = get_user_model().objects.get(username="admin")
cluster = Cluster.objects.get(name="local")
now = timezone.now()
wl = {"kind": "StatefulSet", "replicas": 1, "template": {"spec": {"containers": [{"name": "main", "image": "img"}]}}}
tpl = [{"name": n, "head": h, "cluster": "local", "kubernetes": {"workload": wl}} for n, h in (("header", True),
       ("rollout", False))]
doc = {"metadata": {"name": "x"}, "spec": {"tasks": tpl}}
for name, phase, message in [
    ("day-failed", "Failed", "Header day-failed-header-0 (role header): run script exited with code 3; first error: "
     "ValueError: bad config"),
    ("day-done", "Succeeded", "Run script exited with code 0"),
]:
    Job.objects.filter(name=name).delete()
    job = Job.objects.create(name=name, owner=admin, spec={**doc, "metadata": {"name": name}}, phase=phase,
                             message=message, started_at=now - timedelta(minutes=5),
                             finished_at=now - timedelta(minutes=3), stopped=False)
    for i, (tname, head) in enumerate([("header", True), ("rollout", False)]):
        task = Task.objects.create(job=job, template_name=tname, name=f"{name}-{tname}", cluster=cluster,
                                   namespace="rlark", head=head, display_role=tname, replicas=1, order=i,
                                   rank_start=i, phase="Failed" if (head and phase == "Failed") else "Stopped")
        Pod.objects.create(task=task, name=f"{name}-{tname}-0", ordinal=0, node="local-gpu-%d" % i,
                           phase=("Failed" if phase == "Failed" else "Succeeded") if head else "Stopped",
                           exit_code=3 if phase == "Failed" and head else 0,
                           created_at=now - timedelta(minutes=5), started_at=now - timedelta(minutes=5))
print("ok")
"""


@pytest.mark.parametrize("lang", ["zh-hans", "en"])
def test_failed_and_succeeded_jobs_after_the_end(console_server, page, lang):
    assert console_server.manage("shell", "--no-imports", "-c", SETUP).stdout.strip().endswith("ok")
    login(page, console_server, lang)
    page.goto(console_server.url + "/jobs/day-failed/?tab=overview")
    sentence = page.locator("[data-testid=status-sentence]")
    expect(sentence).to_have_text("Job failed" if lang == "en" else "任务失败")
    message = page.locator("[data-testid=job-message]")
    if lang == "en":
        expect(message).to_contain_text("the run script exited with code 3")
    else:
        expect(message).to_contain_text("运行脚本以退出码 3 结束")
    expect(message).to_contain_text("ValueError: bad config")  # the quoted log line stays as it is
    expect(page.locator("[data-testid=workers-ready]")).to_have_text("0/2")
    expect(page.locator("[data-testid=running-for-label]")).to_have_text("Ran for" if lang == "en" else "运行时长")
    expect(page.locator("[data-testid=running-for]")).to_have_text("2m 00s")
    # "Not configured" is words, not a path: only a configured TensorBoard directory is shown as code
    placeholder = page.locator("[data-testid=overview-tensorboard]")
    expect(placeholder).to_have_text("Not configured" if lang == "en" else "未配置")
    assert "monospace" not in placeholder.evaluate("e => getComputedStyle(e).fontFamily")
    page.screenshot(path=f"{SHOTS}/failed-job-overview-{lang}.png", full_page=True)
    page.goto(console_server.url + "/jobs/day-failed/?tab=workers")
    page.screenshot(path=f"{SHOTS}/failed-job-workers-{lang}.png", full_page=True)
    page.goto(console_server.url + "/jobs/day-done/?tab=workers")
    phases = page.locator("[data-testid=worker-phase]")
    expect(phases).to_have_count(2)
    assert [p.get_attribute("data-phase") for p in phases.all()] == ["Completed", "Completed"]  # one name
    expect(page.locator("[data-testid=workers-ready]")).to_have_text("2/2")
    page.screenshot(path=f"{SHOTS}/succeeded-job-workers-{lang}.png", full_page=True)
    page.goto(console_server.url + "/jobs/?q=day-")
    done = page.locator("[data-testid=job-row-day-done]")
    expect(done.locator("[data-testid=job-workers]")).to_have_text("2/2")
    assert "width: 100%" in done.locator(".wbar i").get_attribute("style")
    failed = page.locator("[data-testid=job-row-day-failed]")
    expect(failed.locator("[data-testid=job-workers]")).to_have_text("0/2")
    assert "width: 0%" in failed.locator(".wbar i").get_attribute("style")
    page.screenshot(path=f"{SHOTS}/jobs-list-{lang}.png", full_page=True)
    page.goto(console_server.url + "/jobs/day-failed/run-check/")
    page.screenshot(path=f"{SHOTS}/failed-job-runcheck-{lang}.png", full_page=True)
    page.goto(console_server.url + "/jobs/day-failed/diagnosis/")
    page.screenshot(path=f"{SHOTS}/failed-job-diagnosis-{lang}.png", full_page=True)


@pytest.mark.parametrize("lang", ["zh-hans", "en"])
def test_logs_tab_of_an_ended_job_says_the_stream_ended(console_server, page, lang):
    """Once the job Succeeded and its Workers are gone, the Logs tab's live toggle says the stream
    ended (not "Streaming"), in the page's language (a running job's tab streams: test_logs_live_browser)."""
    assert console_server.manage("shell", "--no-imports", "-c", SETUP).stdout.strip().endswith("ok")
    login(page, console_server, lang)
    page.goto(console_server.url + "/jobs/day-done/?tab=logs")
    toggle = page.locator("[data-testid=logs-live]")
    expect(toggle.locator("[data-testid=logs-live-label]")).to_have_text(
        "Stream ended" if lang == "en" else "日志流已结束"
    )
    expect(toggle).to_have_attribute("data-ended", "true")
    expect(toggle).to_have_attribute("aria-pressed", "false")
    expect(toggle).to_be_disabled()
    assert ("no new lines" if lang == "en" else "不会再有新的日志行") in (toggle.get_attribute("title") or "")
    page.screenshot(path=f"{SHOTS}/succeeded-job-logs-{lang}.png", full_page=True)
