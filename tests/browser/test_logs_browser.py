"""Browser: the Logs tab (served by launcher.terminal_demo with a DirRuntime whose demo-actor-0 writes a
`Global Step` line every second): header marker, Live within 6 s, filter with count, safe ANSI,
timestamps, download, export, 100k lines, empty states, zh and en screenshots."""

from __future__ import annotations

import re
import time

import pytest
from playwright.sync_api import expect

from launcher.terminal_demo import PASSWORD
from tests.conftest import ARTIFACTS
from tests.terminal_support import DemoConsole

pytestmark = [pytest.mark.browser]


@pytest.fixture(scope="module")
def demo(tmp_path_factory):
    console = DemoConsole(tmp_path_factory.mktemp("logs-demo")).start()
    yield console
    console.stop()


def login(page, demo, user="alice"):
    page.goto(demo.url + "/login/")
    page.fill("input[name=username]", user)
    page.fill("input[name=password]", PASSWORD)
    page.click("button[type=submit]")
    page.wait_for_load_state("load")


def steps(page) -> list[int]:
    text = page.locator('[data-testid="logs-view"]').inner_text()
    return [int(n) for n in re.findall(r"Global Step (\d+)", text)]


def test_logs_tab_live_filter_download_export(demo, page, tmp_path):
    dialogs = []
    page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
    login(page, demo)
    page.goto(demo.url + "/terminal/jobs/demo/logs/")
    view = page.locator('[data-testid="logs-view"]')
    expect(view).to_contain_text("Ray cluster is ready", timeout=10_000)  # merged view of all Workers
    expect(view).to_contain_text("[demo-rollout-0]")
    expect(view).to_contain_text("<script>alert('xss')</script>")  # shown as text, never run
    expect(page.locator('[data-testid="logs-live"]')).to_have_attribute("aria-pressed", "true")  # live on open
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / "logs-merged-zh.png"), full_page=True)

    page.select_option('[data-testid="logs-worker"]', "demo-actor-0")
    expect(view).to_contain_text("Ray cluster is ready")
    expect(view).not_to_contain_text("[demo-actor-0]")  # single Worker: no prefix
    coloured = page.locator(".log-view .ansi-bold.ansi-fg-2", has_text="Ray cluster is ready")
    expect(coloured).to_be_visible()
    before = max(steps(page) or [0])
    expect(page.locator('[data-testid="logs-live"]')).to_contain_text("实时输出中")  # no click needed
    t0 = time.monotonic()
    expect(view).to_contain_text(f"Global Step {before + 1} ", timeout=6_000)
    assert time.monotonic() - t0 <= 6.0
    page.wait_for_timeout(5500)  # one more refresh: lines keep coming, none twice, none missing
    seen = steps(page)
    assert seen == list(range(seen[0], seen[-1] + 1)) and seen[-1] >= before + 2, seen

    page.click('[data-testid="logs-timestamps"]')
    expect(page.locator(".log-view .lts").first).to_be_visible()
    page.fill('[data-testid="logs-filter"]', "global step")
    expect(page.locator('[data-testid="logs-matches"]')).to_have_text(re.compile(r"^\d+ 行匹配$"))
    count = int(page.locator('[data-testid="logs-matches"]').inner_text().split()[0])
    rows = page.locator(".log-view .ll")
    assert count == rows.count() and all("Global Step" in t for t in rows.all_inner_texts())
    expect(page.locator(".log-view mark").first).to_have_text("Global Step")
    page.screenshot(path=str(ARTIFACTS / "logs-live-filter-zh.png"), full_page=True)

    with page.expect_download() as info:
        page.click('[data-testid="logs-export"]')
    csv = info.value
    assert csv.suggested_filename == "demo-logs.csv"
    csv_text = open(csv.path(), encoding="utf-8").read().splitlines()
    assert csv_text[0] == "worker,role,message" and csv_text[1].startswith('"demo-actor-0","actor","Global Step')

    with page.expect_download() as info:
        page.click('[data-testid="logs-download"]')
    full = info.value
    assert re.fullmatch(r"demo-actor-demo-actor-0-\d{8}T\d{6}Z\.log", full.suggested_filename)
    body = open(full.path(), "rb").read()
    assert b"Ray cluster is ready" in body and b"\x1b[1;32m" in body  # the raw log, complete
    assert not dialogs

    page.fill('[data-testid="logs-filter"]', "no such text anywhere")
    expect(page.locator('[data-testid="logs-empty"]')).to_have_text("未找到匹配的日志。")


def test_logs_tab_english_states_and_100k_lines(demo, page):
    login(page, demo)
    page.goto(demo.url + "/terminal/jobs/demo/logs/")
    page.select_option('[data-testid="language-select"]', "en")
    page.wait_for_load_state("load")
    expect(page.locator('[data-testid="logs-live"]')).to_contain_text("Streaming")
    view = page.locator('[data-testid="logs-view"]')
    expect(view).to_contain_text("Ray cluster is ready", timeout=10_000)
    page.screenshot(path=str(ARTIFACTS / "logs-merged-en.png"), full_page=True)
    # role selector: the merged view of one role, each line prefixed by its Worker
    page.select_option('[data-testid="logs-role"]', "rollout")
    options = page.locator('[data-testid="logs-worker"] option').all_inner_texts()
    assert options == ["All Workers (merged)", "demo-rollout-0"]
    expect(view).to_contain_text("[demo-rollout-0] [rlark] worker joined the Ray cluster")
    expect(view).not_to_contain_text("[demo-actor-")
    page.select_option('[data-testid="logs-role"]', "")
    page.select_option('[data-testid="logs-worker"]', "demo-actor-1")
    expect(page.locator('[data-testid="logs-previous"]')).to_be_disabled()  # no restart yet
    expect(view).to_contain_text("--address=127.0.0.1:6379")  # demo-actor-1's own log is loaded
    # 100k lines through the page's own message handler: the DOM holds only the visible rows
    took = page.evaluate(
        """() => {
        const panel = document.querySelector('.logs-panel')._rlarkLogs;
        const st = panel.pods['demo-actor-1'];
        const lines = [];
        for (let i = 0; i < 100000; i++) lines.push({n: st.next + i, t: 'bulk line ' + i});
        const t0 = performance.now();
        panel.onLines({type: 'lines', pod: 'demo-actor-1', id: st.id, reset: false, first: st.next,
                       lines, cursor: st.cursor, more: false});
        return performance.now() - t0;
    }"""
    )
    assert took < 2000, took
    expect(view).to_contain_text("bulk line 99999")
    assert page.locator(".log-view .ll").count() < 200
    t0 = time.monotonic()
    page.fill('[data-testid="logs-filter"]', "line 4242")
    expect(page.locator('[data-testid="logs-matches"]')).to_have_text("11 matching lines")  # 4242, 42420..42429
    assert time.monotonic() - t0 < 3
    page.fill('[data-testid="logs-filter"]', "")
    expect(page.locator('[data-testid="logs-matches"]')).to_have_text("")
    expect(view).to_contain_text("bulk line 99999")
    page.screenshot(path=str(ARTIFACTS / "logs-100k-en.png"), full_page=True)


def test_logs_tab_empty_and_gone_states(demo, page):
    import shutil

    login(page, demo)
    page.goto(demo.url + "/terminal/jobs/demo/logs/")
    # an empty Worker log: delete demo-rollout-0's directory (the Pod is gone from the runtime view)
    shutil.rmtree(demo.runtime_root / "rlark-jobs" / "demo-rollout-0")
    page.reload()  # the page lists the Workers it resolved when it opened
    page.wait_for_load_state("load")
    page.select_option('[data-testid="logs-worker"]', "demo-rollout-0")
    expect(page.locator('[data-testid="logs-empty"]')).to_contain_text("demo-rollout-0")
    page.screenshot(path=str(ARTIFACTS / "logs-empty-zh.png"), full_page=True)


def test_other_user_cannot_open_the_logs_tab(demo, page):
    login(page, demo, "bob")
    resp = page.goto(demo.url + "/terminal/jobs/demo/logs/")
    assert resp.status == 404
