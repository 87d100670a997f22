"""Browser: the container picker of the Logs tab and the WebTerminal. launcher.terminal_demo's demo-actor-1
runs a native sidecar (net-agent) and had an init container (prepare), each with its own log and shell (DirRuntime);
switching containers several times in one page keeps the terminal's input working."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from tests.browser.test_terminal_browser import type_line, wait_screen
from tests.conftest import screenshot_dir
from tests.terminal_support import DemoConsole, demo_login

pytestmark = [pytest.mark.browser]
SHOTS = screenshot_dir()


@pytest.fixture(scope="module")
def demo(tmp_path_factory):
    console = DemoConsole(tmp_path_factory.mktemp("containers")).start()
    yield console
    console.stop()


def test_logs_tab_container_picker(demo, page):
    demo_login(page, demo.url)
    page.goto(demo.url + "/terminal/jobs/demo/logs/")
    view = page.locator('[data-testid="logs-view"]')
    picker = page.locator('[data-testid="logs-container"]')
    page.select_option('[data-testid="logs-worker"]', "demo-actor-0")
    expect(view).to_contain_text("Ray cluster is ready")
    expect(picker).to_be_hidden()  # only main: no picker
    page.select_option('[data-testid="logs-worker"]', "demo-actor-1")
    expect(picker).to_be_visible()
    assert picker.locator("option").all_inner_texts() == ["main", "net-agent (边车)", "prepare (初始化容器)"]
    for _ in range(2):  # back and forth: each container shows its own log, never another's
        picker.select_option("net-agent")
        expect(view).to_contain_text("[net-agent] domain network up")
        expect(view).not_to_contain_text("Ray cluster is ready")
        picker.select_option("prepare")
        expect(view).to_contain_text("[prepare] workspace ready")
        expect(view).not_to_contain_text("domain network up")
        picker.select_option("main")
        expect(view).to_contain_text("Ray cluster is ready")
        expect(view).not_to_contain_text("[prepare]")
    picker.select_option("net-agent")
    download = page.locator('[data-testid="logs-download"]')
    assert "container=net-agent" in download.get_attribute("href")
    body = page.request.get(demo.url + download.get_attribute("href")).text()
    assert body == "[net-agent] domain network up (10.77.0.2/24)\n"
    expect(view).to_contain_text("[net-agent] domain network up")
    page.screenshot(path=f"{SHOTS}/logs-container-picker-zh.png", full_page=True)


def test_webterminal_container_picker_switching_keeps_input_working(demo, page):
    demo_login(page, demo.url)
    page.goto(demo.url + "/terminal/?job=demo&worker=demo-actor-1")
    page.select_option('[data-testid="language-select"]', "en")
    page.wait_for_load_state("load")
    picker = page.locator('[data-testid="term-container"]')
    expect(picker).to_be_visible()
    assert picker.locator("option").all_inner_texts() == ["main", "net-agent (sidecar)", "prepare (init container)"]
    wait_screen(page, r"demo-actor-1:~?.*\$ $")
    for i, name in enumerate(["net-agent", "main", "prepare", "net-agent", "main"]):
        picker.select_option(name)
        prompt = "demo-actor-1" if name == "main" else f"demo-actor-1/{name}"
        wait_screen(page, rf"^{prompt}:.*\$ $")
        type_line(page, f"echo in=$RLARK_CONTAINER round={i}")
        wait_screen(page, rf"^in={name} round={i}$")
        expect(page.locator('[data-testid="term-status"]')).to_have_text("Connected")
    page.screenshot(path=f"{SHOTS}/terminal-container-picker-en.png", full_page=True)
