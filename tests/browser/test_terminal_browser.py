"""Browser: the WebTerminal page (served by launcher.terminal_demo with a DirRuntime whose exec is a real
PTY bash in the Worker's directory): rank and directory, resize -> `tput cols`, upload and download
byte-identical, CJK, `exit` shows the close reason; zh and en screenshots."""

from __future__ import annotations

import os
import re

import pytest
from playwright.sync_api import expect

from launcher.terminal_demo import PASSWORD
from tests.conftest import ARTIFACTS
from tests.terminal_support import DemoConsole

pytestmark = [pytest.mark.browser]

READ_BUFFER = """() => {
  const b = window.rlarkTerminal.buffer.active; const out = [];
  for (let i = 0; i < b.length; i++) out.push(b.getLine(i).translateToString(true));
  return out.join('\\n');
}"""


@pytest.fixture(scope="module")
def demo(tmp_path_factory):
    console = DemoConsole(tmp_path_factory.mktemp("term-demo")).start()
    yield console
    console.stop()


def login(page, demo):
    page.goto(demo.url + "/login/")
    page.fill("input[name=username]", "alice")
    page.fill("input[name=password]", PASSWORD)
    page.click("button[type=submit]")
    page.wait_for_load_state("load")


def screen(page) -> str:
    return page.evaluate(READ_BUFFER)


def type_line(page, text: str) -> None:
    page.locator(".xterm-helper-textarea").focus()
    page.keyboard.type(text)
    page.keyboard.press("Enter")


def wait_screen(page, pattern: str, timeout: float = 10_000) -> re.Match:
    page.wait_for_function("(p) => new RegExp(p, 'm').test((" + READ_BUFFER + ")())", arg=pattern, timeout=timeout)
    return re.search(pattern, screen(page), re.M)


def test_webterminal_session(demo, page, tmp_path):
    login(page, demo)
    page.goto(demo.url + "/terminal/?job=demo&worker=demo-actor-1&status=Running")
    expect(page.locator('[data-testid="term-status"]')).to_have_text("已连接")
    expect(page.locator('[data-testid="term-reconnect"]')).to_be_hidden()
    wait_screen(page, r"demo-actor-1:~\$ $")
    workdir = str(demo.runtime_root / "rlark-jobs" / "demo-actor-1" / "work")
    type_line(page, "echo rank=$RLINF_NODE_RANK; pwd")
    wait_screen(page, r"^rank=1$")
    wait_screen(page, "^" + re.escape(workdir) + "$")
    type_line(page, "echo 你好，世界")
    wait_screen(page, r"^你好，世界$")
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / "terminal-zh.png"), full_page=True)

    cols = page.evaluate("window.rlarkTerminal.cols")
    type_line(page, "echo cols=$(tput cols)")
    wait_screen(page, rf"^cols={cols}$")
    page.set_viewport_size({"width": 900, "height": 700})
    page.wait_for_function(f"window.rlarkTerminal.cols < {cols}")
    new_cols = page.evaluate("window.rlarkTerminal.cols")
    type_line(page, "echo cols2=$(tput cols)")
    wait_screen(page, rf"^cols2={new_cols}$")
    page.set_viewport_size({"width": 1440, "height": 900})

    payload = os.urandom(70_000) + "中文\n".encode()
    src = tmp_path / "payload.bin"
    src.write_bytes(payload)
    page.set_input_files('[data-testid="term-upload"]', str(src))
    wait_screen(page, r"^文件传输完成。$")
    assert (demo.runtime_root / "rlark-jobs" / "demo-actor-1" / "work" / "payload.bin").read_bytes() == payload
    page.fill('[data-testid="term-download-path"]', "./payload.bin")
    with page.expect_download() as info:
        page.click('[data-testid="term-download"]')
    download = info.value
    assert download.suggested_filename == "payload.bin"
    assert open(download.path(), "rb").read() == payload
    page.fill('[data-testid="term-download-path"]', "../../etc/passwd")
    page.click('[data-testid="term-download"]')
    expect(page.locator('[data-testid="term-status"]')).to_contain_text("文件传输失败：传输路径中不允许出现“..”")

    type_line(page, "exit 0")
    status = page.locator('[data-testid="term-status"]')
    expect(status).to_have_text("会话已结束（退出码 0）。")  # printed once, no English repeat
    wait_screen(page, r"会话已结束（退出码 0）。")
    text = screen(page)
    assert text.count("退出码 0") == 1 and "exited with code" not in text
    expect(page.locator('[data-testid="term-reconnect"]')).to_be_visible()
    page.screenshot(path=str(ARTIFACTS / "terminal-exit-zh.png"), full_page=True)
    page.click('[data-testid="term-reconnect"]')
    expect(status).to_have_text("已连接")


def test_webterminal_english_and_missing_worker(demo, page):
    login(page, demo)
    page.goto(demo.url + "/terminal/?job=demo")
    expect(page.locator('[data-testid="terminal-error"]')).to_have_text("缺少 Worker 参数，无法连接终端。")
    page.select_option('[data-testid="language-select"]', "en")
    page.wait_for_load_state("load")
    expect(page.locator('[data-testid="terminal-error"]')).to_have_text(
        "The Worker parameter is missing; cannot connect the terminal."
    )
    page.goto(demo.url + "/terminal/?job=demo&worker=demo-actor-0")
    expect(page.locator('[data-testid="term-status"]')).to_have_text("Connected")
    wait_screen(page, r"demo-actor-0:~\$ $")
    type_line(page, "echo rank=$RLINF_NODE_RANK && ls -la --color=always /")
    wait_screen(page, r"^rank=0$")
    page.screenshot(path=str(ARTIFACTS / "terminal-en.png"), full_page=True)
    page.goto(demo.url + "/terminal/?job=demo&worker=no-such-pod")
    expect(page.locator('[data-testid="term-status"]')).to_contain_text(
        "Disconnected: pod no-such-pod not found (it may have been deleted)"
    )
    page.screenshot(path=str(ARTIFACTS / "terminal-gone-en.png"), full_page=True)


def test_output_flood_keeps_the_page_responsive(demo, page):
    login(page, demo)
    page.goto(demo.url + "/terminal/?job=demo&worker=demo-actor-0")
    wait_screen(page, r"demo-actor-0:~\$ $")
    # measure the longest gap between animation frames while ~6 MB of `yes` output arrives
    page.evaluate(
        """() => { window.maxGap = 0; let last = performance.now();
           const tick = (t) => { window.maxGap = Math.max(window.maxGap, t - last); last = t;
                                 if (!window.stopGap) requestAnimationFrame(tick); };
           requestAnimationFrame(tick); }"""
    )
    type_line(page, "yes flood-line-0123456789 | head -n 300000; echo FLOOD-$((40 + 2))")
    wait_screen(page, r"^FLOOD-42$", 90_000)
    page.evaluate("window.stopGap = true")
    max_gap = page.evaluate("window.maxGap")
    print(f"longest frame gap during the flood: {max_gap:.0f} ms")
    assert max_gap < 1500, f"the page froze for {max_gap:.0f} ms"
    type_line(page, "echo still-$((2 * 21))")  # the connection survived and still answers
    wait_screen(page, r"^still-42$")
    expect(page.locator('[data-testid="term-status"]')).to_have_text("已连接")
