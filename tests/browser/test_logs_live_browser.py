"""Browser: the Logs tab streams when it opens and stays usable on a 100,000-line log.
Served by launcher.terminal_demo (DirRuntime): demo-actor-0 writes a `Global Step` line every
0.1 s, demo-actor-1's log holds 100,000 history lines."""

from __future__ import annotations

import re
import time

import pytest
from playwright.sync_api import expect

from tests.conftest import screenshot_dir
from tests.terminal_support import DemoConsole, demo_login

pytestmark = [pytest.mark.browser]

SHOTS = screenshot_dir()


@pytest.fixture(scope="module")
def demo(tmp_path_factory):
    console = DemoConsole(tmp_path_factory.mktemp("logs-live"), interval=0.1, lines=100_000).start()
    yield console
    console.stop()


def login(page, demo, user="alice"):
    demo_login(page, demo.url, user)


def last_step(page) -> int:
    text = page.locator('[data-testid="logs-view"]').inner_text()
    return max([int(n) for n in re.findall(r"Global Step (\d+)", text)] or [0])


def at_bottom(page) -> bool:
    return page.evaluate(
        "() => { const v = document.querySelector('[data-testid=logs-view]');"
        " return v.scrollHeight - v.scrollTop - v.clientHeight < 36; }"
    )


def test_logs_stream_on_open_scroll_up_pauses_and_jump_to_latest_resumes(demo, page):
    login(page, demo)
    page.goto(demo.url + "/terminal/jobs/demo/logs/?pod=demo-actor-0")
    page.select_option('[data-testid="logs-worker"]', "demo-actor-0")
    live = page.locator('[data-testid="logs-live"]')
    expect(live).to_have_attribute("aria-pressed", "true")  # live by default, no click
    expect(live).to_have_text("实时输出中")
    expect(live.locator(".live-icon")).to_have_attribute("data-icon", "pause")
    view = page.locator('[data-testid="logs-view"]')
    expect(view).to_contain_text("Global Step", timeout=10_000)
    first = last_step(page)
    page.wait_for_function(  # the next refresh (5 s, seed 02) brings new lines without any click
        "(n) => [...document.querySelector('[data-testid=logs-view]').innerText.matchAll(/Global Step (\\d+)/g)]"
        ".some(m => Number(m[1]) > n)",
        arg=first,
        timeout=8_000,
    )
    assert at_bottom(page)
    latest = page.locator('[data-testid="logs-latest"]')
    expect(latest).to_be_hidden()

    # the user scrolls up to read: auto-scroll pauses, the newest lines keep arriving below
    view.hover()
    page.mouse.wheel(0, -600)
    expect(latest).to_be_visible()
    expect(page.locator('[data-testid="logs-status"]')).to_contain_text("自动滚动已暂停")
    top = page.evaluate("() => document.querySelector('[data-testid=logs-view]').scrollTop")
    count = page.evaluate("() => document.querySelector('.logs-panel')._rlarkLogs.lines.length")
    page.wait_for_function(
        "(c) => document.querySelector('.logs-panel')._rlarkLogs.lines.length > c", arg=count, timeout=8_000
    )
    assert page.evaluate("() => document.querySelector('[data-testid=logs-view]').scrollTop") == top
    assert not at_bottom(page)
    page.screenshot(path=f"{SHOTS}/logs-scrolled-up-zh.png", full_page=True)

    latest.click()  # resumes following: at the bottom now and after the next refresh
    expect(latest).to_be_hidden()
    assert at_bottom(page)
    count = page.evaluate("() => document.querySelector('.logs-panel')._rlarkLogs.lines.length")
    page.wait_for_function(
        "(c) => document.querySelector('.logs-panel')._rlarkLogs.lines.length > c", arg=count, timeout=8_000
    )
    page.wait_for_timeout(100)
    assert at_bottom(page)

    live.click()  # the toggle pauses streaming: play icon, "Paused", no new lines
    expect(live).to_have_attribute("aria-pressed", "false")
    expect(live).to_have_text("已暂停")
    expect(live.locator(".live-icon")).to_have_attribute("data-icon", "play")
    page.wait_for_timeout(1000)
    paused_at = page.evaluate("() => document.querySelector('.logs-panel')._rlarkLogs.lines.length")
    page.wait_for_timeout(6000)
    assert page.evaluate("() => document.querySelector('.logs-panel')._rlarkLogs.lines.length") == paused_at


def test_100k_line_log_first_line_fast_and_dom_capped(demo, page):
    """demo-actor-1's real log has 100,000 lines: the time from choosing the Worker to its first
    line on screen is measured (printed; the README performance section carries the figure)."""
    login(page, demo)
    page.goto(demo.url + "/terminal/jobs/demo/logs/")
    page.select_option('[data-testid="language-select"]', "en")
    page.wait_for_load_state("load")
    view = page.locator('[data-testid="logs-view"]')
    expect(view).to_contain_text("[demo-rollout-0]", timeout=10_000)
    t0 = time.monotonic()
    page.select_option('[data-testid="logs-worker"]', "demo-actor-1")
    expect(view).to_contain_text("[history] line 99999 of the earlier run", timeout=10_000)
    first_line_ms = (time.monotonic() - t0) * 1000
    print(f"\n100k-line log: time to first line {first_line_ms:.0f} ms")
    assert page.locator(".log-view .ll").count() < 200  # only the visible rows are in the DOM
    # the page stays responsive: a filter over the loaded lines answers at once
    t0 = time.monotonic()
    page.fill('[data-testid="logs-filter"]', "line 99990")
    expect(page.locator('[data-testid="logs-matches"]')).to_have_text(re.compile(r"^1 matching"))
    assert time.monotonic() - t0 < 3
    page.fill('[data-testid="logs-filter"]', "")
    assert first_line_ms < 5000, first_line_ms
    # "load older": the 5000 lines above the tail, the line being read stays in place, the DOM stays capped
    panel = "document.querySelector('.logs-panel')._rlarkLogs"
    held = page.evaluate(f"() => {panel}.lines.length")
    assert 1000 <= held <= 1100  # the tail (seed 02) plus a live refresh at most
    older = page.locator('[data-testid="logs-older"]')
    expect(older).to_contain_text("Load older lines")
    page.evaluate("() => { const v = document.querySelector('[data-testid=logs-view]'); v.scrollTop -= 300; }")
    page.wait_for_timeout(200)
    top_text = page.locator(".log-view .ll").nth(40).inner_text()
    older.click()
    page.wait_for_function(f"(h) => {panel}.lines.length >= h + 5000", arg=held, timeout=10_000)
    older.click()
    page.wait_for_function(f"(h) => {panel}.lines.length >= h + 10000", arg=held, timeout=10_000)
    assert page.locator(".log-view .ll").nth(40).inner_text() == top_text
    assert page.locator(".log-view .ll").count() < 200
    texts = page.evaluate(f"() => {panel}.lines.slice(0, 3).map(l => l.t)")
    first_n = int(re.search(r"line (\d+) ", texts[0]).group(1))
    assert texts == [f"[history] line {first_n + i} of the earlier run" for i in range(3)]
    page.screenshot(path=f"{SHOTS}/logs-100k-older-en.png", full_page=True)


def test_plain_text_links_clean_and_raw_timestamps_local_or_utc_and_rotation_marked(demo, browser):
    """The per-Worker plain-text links (clean and raw), local time / UTC timestamps, and a
    log that rotates under the live stream is marked, in zh and en."""
    ctx = browser.new_context(locale="zh-CN", timezone_id="Asia/Shanghai", viewport={"width": 1440, "height": 900})
    page = ctx.new_page()
    try:
        login(page, demo)
        page.goto(demo.url + "/jobs/demo/?tab=logs")
        page.select_option('[data-testid="language-select"]', "zh-hans")  # an earlier test chose en
        page.wait_for_load_state("load")
        links = page.locator('[data-testid="logs-plain-demo-actor-0"]')
        clean = page.request.get(demo.url + links.locator('[data-testid="logs-plain-clean"]').get_attribute("href"))
        raw = page.request.get(demo.url + links.locator('[data-testid="logs-plain-raw"]').get_attribute("href"))
        assert clean.status == raw.status == 200
        assert clean.headers["content-type"].startswith("text/plain")
        assert "Ray cluster is ready (3/3 nodes)" in clean.text() and "\x1b" not in clean.text()
        assert "\x1b[1;32mRay cluster is ready\x1b[0m" in raw.text()

        page.select_option('[data-testid="logs-worker"]', "demo-actor-0")
        view = page.locator('[data-testid="logs-view"]')
        page.check('[data-testid="logs-timestamps"]')
        stamp = page.locator(".log-view .lts").last  # live lines carry the time they were received
        expect(stamp).to_have_text(re.compile(r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d{3} \+08:00 $"), timeout=10_000)
        local = stamp.inner_text()
        page.select_option('[data-testid="logs-tz"]', "utc")
        expect(stamp).to_have_text(re.compile(r" UTC $"))
        hours = int(local[11:13]), int(stamp.inner_text()[11:13])
        assert (hours[0] - hours[1]) % 24 == 8, (local, stamp.inner_text())

        # the log file rotates under the live stream: a marker, never the two files glued together
        (demo.runtime_root / "rlark-jobs" / "demo-actor-0" / "log.0").write_bytes(b"after rotation\n")
        marker = page.locator('[data-testid="logs-rotated"]')
        expect(marker).to_have_text("── 日志已轮转；本实例更早的日志已不可用 ──", timeout=12_000)
        expect(view).to_contain_text("after rotation")
        marker.scroll_into_view_if_needed()
        page.screenshot(path=f"{SHOTS}/logs-rotated-utc-zh.png", full_page=True)
        page.select_option('[data-testid="language-select"]', "en")
        page.wait_for_load_state("load")
        page.select_option('[data-testid="logs-worker"]', "demo-actor-0")
        expect(view).to_contain_text("Global Step", timeout=10_000)
        (demo.runtime_root / "rlark-jobs" / "demo-actor-0" / "log.0").write_bytes(b"second rotation\n")
        expect(marker).to_have_text(
            "── log rotated; earlier lines of this instance are no longer available ──", timeout=12_000
        )
        page.check('[data-testid="logs-timestamps"]')
        marker.scroll_into_view_if_needed()
        page.screenshot(path=f"{SHOTS}/logs-rotated-en.png", full_page=True)
    finally:
        ctx.close()
