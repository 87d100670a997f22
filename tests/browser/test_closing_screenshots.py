"""Browser: the pages of docs/screenshots, checked and photographed in zh and en -- the Logs tab of a
running job (streaming on open), the Metrics tab (charts of two runs) and a failed job's page (one headline, the
stored failure message in the page's language). ``RLARK_SHOTS_DIR=docs/screenshots`` writes the committed copies
(``logs-tab-<lang>.png``, ``metrics-tab-<lang>.png``, ``failed-job-<lang>.png``); each is kept under 400 KB
(256-colour PNG when the full-colour one is larger)."""

from __future__ import annotations

import io
import re
from pathlib import Path

import pytest
from PIL import Image
from playwright.sync_api import expect

from tests.browser import test_diagnosis_browser, test_ended_jobs_browser
from tests.browser.test_wizard_browser import login as console_login
from tests.conftest import screenshot_dir
from tests.terminal_support import DemoConsole, demo_login

seeded = test_diagnosis_browser.seeded  # the fixture: job "demo" with Workers, metrics, TensorBoard events

pytestmark = [pytest.mark.browser]
MAX_BYTES = 400 * 1024
LANGS = ["zh-hans", "en"]


FAILED_CONDITION = """
from jobs.jobspec.conditions import set_condition
job = Job.objects.get(name="day-failed")
job.conditions = set_condition([], "Failed", True, "RunScriptFailed", job.message, job.finished_at)
job.save(update_fields=["conditions"])
Job.objects.filter(pk=job.pk).update(created_at=job.started_at - timedelta(seconds=20))  # created before it started
print("ok")
"""


def save(page, name: str) -> Path:
    """A full-page screenshot as ``<name>.png`` in the screenshot folder, under :data:`MAX_BYTES`."""
    png = page.screenshot(full_page=True)
    path = screenshot_dir() / f"{name}.png"
    if len(png) > MAX_BYTES:
        out = io.BytesIO()
        Image.open(io.BytesIO(png)).convert("RGB").quantize(256).save(out, "PNG", optimize=True)
        png = out.getvalue()
    path.write_bytes(png)
    assert path.stat().st_size <= MAX_BYTES, (path, path.stat().st_size)
    return path


def short(lang: str) -> str:
    return "zh" if lang.startswith("zh") else "en"


@pytest.fixture(scope="module")
def demo(tmp_path_factory):
    console = DemoConsole(tmp_path_factory.mktemp("closing"), interval=0.3).start()
    yield console
    console.stop()


@pytest.mark.parametrize("lang", LANGS)
def test_logs_tab_streams_a_running_job(demo, browser, lang):
    ctx = browser.new_context(viewport={"width": 1440, "height": 900}, timezone_id="Asia/Shanghai")
    page = ctx.new_page()
    ctx.add_cookies([{"name": "django_language", "value": lang, "url": demo.url}])
    demo_login(page, demo.url)
    page.goto(demo.url + "/jobs/demo/?tab=logs")
    expect(page.locator("[data-testid=workers-ready]")).to_have_text("3/3")  # as the sync records a running job
    expect(page.locator("[data-testid=running-for]")).to_have_text(re.compile(r"^\d+m \d\ds$"))
    expect(page.locator("[data-testid=logs-live-label]")).to_have_text(
        "实时输出中" if lang == "zh-hans" else "Streaming"
    )
    view = page.locator("[data-testid=logs-view]")
    expect(view).to_contain_text("Global Step", timeout=15_000)  # the header Worker, preselected
    page.check("[data-testid=logs-timestamps]")
    expect(page.locator(".log-view .lts").first).to_contain_text("+08:00")
    save(page, f"logs-tab-{short(lang)}")
    ctx.close()


@pytest.mark.django_db(transaction=True)
@pytest.mark.usefixtures("orm_beside_playwright")
@pytest.mark.parametrize("lang", LANGS)
def test_metrics_tab_charts_two_runs(page, live_server, client, admin_user, seeded, lang):
    from tensorboardX import SummaryWriter

    from jobs.observe import metrics as metrics_service

    writer = SummaryWriter(logdir=str(Path(metrics_service.tensorboard_source(seeded).host_dir) / "attempt-2"))
    for step in range(1, 31):
        writer.add_scalar("train/actor/loss", 0.5 / step, step)
    writer.close()
    test_diagnosis_browser.login(page, live_server, client, admin_user)
    test_diagnosis_browser.set_lang(page, live_server, lang)
    page.goto(f"{live_server.url}/jobs/demo/metrics/")
    expect(page.locator("[data-testid=tb-chart]")).to_have_count(3)
    expect(page.locator("[data-testid=tb-runs]")).to_have_text(
        "每张图对比 2 次运行" if lang == "zh-hans" else "2 runs compared in each chart"
    )
    expect(page.locator("[data-testid=usage-chart-cpu] canvas").first).to_be_visible()
    page.wait_for_timeout(300)  # the charts' first paint
    save(page, f"metrics-tab-{short(lang)}")


@pytest.mark.e2e
@pytest.mark.parametrize("lang", LANGS)
def test_failed_job_page(console_server, page, lang):
    # the failure as the sync records it: the message and a Failed condition
    setup = test_ended_jobs_browser.SETUP.replace('print("ok")', FAILED_CONDITION)
    assert console_server.manage("shell", "--no-imports", "-c", setup).stdout.strip().endswith("ok")
    console_login(page, console_server, lang)
    page.goto(console_server.url + "/jobs/day-failed/?tab=overview")
    expect(page.locator("[data-testid=status-sentence]")).to_have_text(
        "任务失败" if lang == "zh-hans" else "Job failed"
    )
    message = page.locator("[data-testid=job-message]")
    expect(message).to_contain_text(
        "运行脚本以退出码 3 结束" if lang == "zh-hans" else "the run script exited with code 3"
    )
    expect(page.locator("[data-testid=workers-ready]")).to_have_text("0/2")
    expect(page.locator("[data-testid=conditions]")).to_contain_text("RunScriptFailed")
    save(page, f"failed-job-{short(lang)}")
