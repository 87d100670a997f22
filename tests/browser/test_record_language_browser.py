"""Browser: the Markdown run record follows the page's language. In English everything is English (title, the
eight labels, the table header, check names, results and notes: not one Chinese character); in Chinese it is the
seed 02 template ("运行检查记录模板") as is. Screenshots: ``record-runcheck-{lang}.png``."""

from __future__ import annotations

import re

import pytest

from tests.browser import test_diagnosis_browser
from tests.browser.test_diagnosis_browser import login, set_lang
from tests.conftest import screenshot_dir
from tests.jobs.test_runcheck import SEED_TEMPLATE_LINES

seeded = test_diagnosis_browser.seeded  # job "demo": three Running Workers, rollout-1 never joined Ray

pytestmark = [
    pytest.mark.browser,
    pytest.mark.django_db(transaction=True),
    pytest.mark.usefixtures("orm_beside_playwright"),
]

CJK = re.compile(r"[\u3000-\u303f\u4e00-\u9fff\uff00-\uffef]")
EN_LINES = [
    "# Job run check record",
    "",
    "- Run ID: demo#1 (",
    "- Code version, image address and version; actual digest (if recorded): ",
    "- Hydra config and command source: RLinf config attached",
    "- RLinf `cluster.num_nodes` and execution mode: 3; execution mode to confirm",
    "- Target cluster, nodes and resources: local (local-gpu-0, local-gpu-1)",
    "- Job name: demo",
    "- Submitted YAML record: RLark Console /jobs/demo/",
    "- Recorder: root",
    "",
    "| Check | Result (Met / Not met / To confirm) | Checked at | Record location | Notes/contact |",
    "| --- | --- | --- | --- | --- |",
    "| 1. Job created and configuration matches | Met |",
    "| 2. Pod count and nodes correct | Not met |",
    "| 3. Ray started as expected | Not met |",
    "| 4. Application and configuration versions match |",
    "| 5. Workload progressing and output persisted |",
    "| 6. Result saved and next steps decided | To confirm |",
]


def _record(page, live_server) -> str:
    page.goto(f"{live_server.url}/jobs/demo/run-check/")
    with page.expect_download() as info:
        page.click("[data-testid=export-record]")
    return open(info.value.path(), encoding="utf-8").read()


def test_record_in_english_is_english(page, live_server, client, admin_user, seeded):
    login(page, live_server, client, admin_user)
    set_lang(page, live_server, "en")
    text = _record(page, live_server)
    page.screenshot(path=str(screenshot_dir() / "record-runcheck-en.png"), full_page=True)
    assert CJK.search(text) is None, CJK.findall(text)
    lines = text.splitlines()
    assert len(lines) == len(EN_LINES)
    for got, want in zip(lines, EN_LINES, strict=True):
        assert got.startswith(want), (got, want)


def test_record_in_chinese_is_the_seed_template(page, live_server, client, admin_user, seeded):
    login(page, live_server, client, admin_user)
    set_lang(page, live_server, "zh-hans")
    text = _record(page, live_server)
    page.screenshot(path=str(screenshot_dir() / "record-runcheck-zh-hans.png"), full_page=True)
    lines = text.splitlines()
    assert len(lines) == len(SEED_TEMPLATE_LINES)
    for got, want in zip(lines, SEED_TEMPLATE_LINES, strict=True):
        assert got.startswith(want), (got, want)
    assert "| 3. Ray 已按预期启动 | 未符合 |" in text
    assert "- Job 名称：demo" in lines and "- 记录人：root" in lines
