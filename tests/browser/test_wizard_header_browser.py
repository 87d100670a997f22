"""Browser: Set as Header on a multi-Worker role says at once that the Header has exactly 1 Worker
and offers to narrow the selector; step 2 opens on the Header role; until submit only the role being edited shows
its errors; default role names are template names as they are (``new-role``). Screenshots in zh and en."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import expect

from tests.browser.test_wizard_browser import at_step, login
from tests.conftest import ARTIFACTS

pytestmark = [pytest.mark.browser, pytest.mark.e2e]
SHOTS = ARTIFACTS


def _multi_worker_rollout(page, server) -> None:
    page.goto(server.url + "/jobs/new/")
    at_step(page, 1)
    page.click("[data-testid=next]")
    at_step(page, 2)
    page.click("[data-testid=role-tab-1]")
    if page.locator("[data-testid=cluster-1]").input_value() != "local":
        page.select_option("[data-testid=cluster-1]", "local")
        page.wait_for_load_state("networkidle")
    page.locator("[data-testid=chips-1] button", has_text="pool=rollout").click()
    expect(page.locator("[data-testid=replicas-1]")).to_have_value("2")
    page.click("[data-testid=step-1]")
    at_step(page, 1)
    expect(page.locator("[data-testid=role-row-1] td").nth(4)).to_have_text("2")


@pytest.mark.parametrize("lang", ["en", "zh-hans"])
def test_header_on_a_multi_worker_role_is_said_at_once_and_the_selector_narrowed(console_server, page, lang):
    login(page, console_server, lang)
    _multi_worker_rollout(page, console_server)
    page.click("[data-testid=make-header-1]")
    notice = page.locator("[data-testid=wizard-notice]")
    if lang == "en":
        expect(notice).to_contain_text("The Header has exactly 1 Worker")
        expect(notice).to_contain_text("instead of 2")
        expect(notice).to_contain_text("matches 2 nodes")
    else:
        expect(notice).to_contain_text("Header 只有 1 个 Worker")
    expect(page.locator("[data-testid=role-row-1] td").nth(4)).to_have_text("1")  # the count changes visibly here
    page.screenshot(path=f"{SHOTS}/wizard-header-notice-{lang}.png", full_page=True)
    page.click("[data-testid=narrow-selector]")
    at_step(page, 1)
    # step 2 opens on the Header role, whose selector now matches exactly one node
    page.click("[data-testid=next]")
    at_step(page, 2)
    expect(page.locator("[data-testid=role-tab-1]")).to_have_class("active")
    expect(page.locator("[data-testid=role-panel-1]")).to_be_visible()
    expect(page.locator("[data-testid=selector-1]")).to_have_value("pool=rollout,kubernetes.io/hostname=local-gpu-1")
    expect(page.locator("[data-testid=match-1]")).to_contain_text("local: 1")
    expect(page.locator("[data-testid=replicas-1]")).to_have_value("1")
    page.screenshot(path=f"{SHOTS}/wizard-step2-header-{lang}.png", full_page=True)


def test_only_the_edited_role_shows_errors_until_submit_and_default_names(console_server, page):
    login(page, console_server)
    page.goto(console_server.url + "/jobs/new/")
    page.click("[data-testid=add-role]")
    expect(page.locator("[data-testid=role-name-3]")).to_have_value("new-role")
    expect(page.locator("[data-testid=role-row-3] td").nth(3)).to_have_text("new-role")
    page.click("[data-testid=add-role]")
    expect(page.locator("[data-testid=role-name-4]")).to_have_value("new-role-2")
    page.fill("[data-testid=role-name-4]", "My Role")  # a typed name keeps upstream's encoding
    page.click("[data-testid=next]")
    at_step(page, 2)
    expect(page.locator("[data-testid=role-tab-4]")).to_contain_text("My Role")
    page.click("[data-testid=role-tab-2]")
    page.click("[data-testid=next]")  # no images anywhere: every role has problems
    at_step(page, 2)
    errors = page.locator("[data-testid=wizard-errors] code")
    expect(errors.first).to_be_visible()
    paths = errors.all_inner_texts()
    assert paths and all("tasks[2]" in p or "tasks" not in p for p in paths), paths
    expect(page.locator("[data-testid=role-tab-2]")).to_have_class("active has-error")
    for other in (0, 1, 3, 4):
        expect(page.locator(f"[data-testid=role-tab-{other}]")).not_to_have_class(re.compile("has-error"))
    page.screenshot(path=f"{SHOTS}/wizard-errors-one-role-en.png", full_page=True)
