"""Browser: a user logs in to the running console, switches zh <-> en and sees the demo cluster."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from tests.conftest import ARTIFACTS, E2E_ADMIN_PASSWORD

pytestmark = [pytest.mark.browser, pytest.mark.e2e]


def test_login_language_switch_and_overview(console_server, page):
    page.goto(console_server.url + "/?from=test")
    assert "/login/" in page.url  # anonymous -> login
    page.fill("input[name=username]", "admin")
    page.fill("input[name=password]", E2E_ADMIN_PASSWORD)
    page.click("button[type=submit]")
    page.wait_for_url("**/?from=test")
    page.goto(console_server.url + "/")
    nav = page.locator("nav.mainnav")
    expect(nav.get_by_text("概览")).to_be_visible()
    expect(nav.get_by_text("集群与节点")).to_be_visible()
    expect(page.locator('[data-testid="cluster-local"]')).to_be_visible()
    for node in ("local-gpu-0", "local-gpu-1", "local-robot-0"):
        expect(page.get_by_text(node, exact=True).first).to_be_visible()
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / "overview-zh.png"), full_page=True)

    page.select_option('[data-testid="language-select"]', "en")
    page.wait_for_load_state("load")
    expect(nav.get_by_text("Overview")).to_be_visible()
    expect(nav.get_by_text("Clusters & Nodes")).to_be_visible()
    page.screenshot(path=str(ARTIFACTS / "overview-en.png"), full_page=True)

    page.select_option('[data-testid="language-select"]', "zh-hans")
    page.wait_for_load_state("load")
    expect(nav.get_by_text("任务")).to_be_visible()


def test_wrong_password_shows_error_and_no_session(console_server, page):
    page.goto(console_server.url + "/login/")
    page.fill("input[name=username]", "admin")
    page.fill("input[name=password]", "definitely-wrong")
    page.click("button[type=submit]")
    expect(page.locator(".error-banner")).to_be_visible()
    page.goto(console_server.url + "/")
    assert "/login/" in page.url
