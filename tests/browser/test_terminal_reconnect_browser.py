"""Browser: a dropped WebTerminal connection reattaches to the same shell (a shell variable survives)
and says so; the page's Reconnect after the grace period says plainly that a new shell was started."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from tests.browser.test_terminal_browser import demo, login, type_line, wait_screen  # noqa: F401 (fixture)

pytestmark = [pytest.mark.browser]


def test_dropped_connection_gets_the_same_shell_back(demo, page):  # noqa: F811
    login(page, demo)
    page.goto(demo.url + "/terminal/?job=demo&worker=demo-actor-1&status=Running")
    status = page.locator('[data-testid="term-status"]')
    expect(status).to_have_text("已连接")
    wait_screen(page, r"demo-actor-1:~\$ $")
    type_line(page, "KEEP=still-here-7")
    page.evaluate("window.rlarkTerminalSocket().close()")  # the connection drops, no goodbye
    wait_screen(page, r"^已重新连接到同一个 Shell")
    type_line(page, "echo value=$KEEP")
    wait_screen(page, r"^value=still-here-7$")
    expect(page.locator('[data-testid="term-reconnect"]')).to_be_hidden()
