"""Browser: on step 2 "Next Role" opens each role's tab in turn (Header first); only the last role's "Next" goes
to step 3, so a 3-role job shows every role before it is submitted. In zh and en, with screenshots."""

from __future__ import annotations

import uuid

import pytest
from playwright.sync_api import Page, expect

from tests.browser.test_wizard_browser import IMAGE, at_step, login, settled, shot, step1

pytestmark = [pytest.mark.browser, pytest.mark.e2e]

LABELS = {"en": ("Next Role", "Next"), "zh-hans": ("下一个角色", "下一步")}
SELECTORS = ("pool=head", "kubernetes.io/hostname=local-gpu-1", "rlinf.io/node-group=franka")


def fill_role(page: Page, i: int) -> None:
    """Pin role ``i`` to the demo cluster and give it a selector matching one node and an image."""
    if page.locator(f"[data-testid=cluster-{i}]").input_value() != "local":
        # a new cluster re-renders the form: wait for that answer before typing (a user sees the form reload)
        with page.expect_response(lambda r: r.request.method == "POST" and r.url.endswith("/jobs/new/")):
            page.select_option(f"[data-testid=cluster-{i}]", "local")
        settled(page)
        expect(page.locator(f"[data-testid=cluster-{i}]")).to_have_value("local")
    page.fill(f"[data-testid=selector-{i}]", SELECTORS[i])
    if i:  # the Header's replicas are fixed at 1
        page.fill(f"[data-testid=replicas-{i}]", "1")
    page.fill(f"[data-testid=image-{i}]", IMAGE)
    if i == 2:
        page.click("[data-testid=add-dev-2]")
        expect(page.locator("[data-testid=dev-key-2-0]")).to_have_value("rlinf.io/device-franka")
    settled(page)


@pytest.mark.parametrize("lang", ["en", "zh-hans"])
def test_next_role_shows_every_role_tab_before_step_3(console_server, page, lang):
    more, last = LABELS[lang]
    login(page, console_server, lang)
    step1(page, console_server, f"nr-{uuid.uuid4().hex[:6]}")
    page.click("[data-testid=next]")
    at_step(page, 2)
    for i in range(3):
        expect(page.locator(f"[data-testid=role-tab-{i}]")).to_have_class("active")
        expect(page.locator(f"[data-testid=role-panel-{i}]")).to_be_visible()
        expect(page.locator("[data-testid=next]")).to_have_text(more if i < 2 else last)
        fill_role(page, i)
        if i == 1:
            shot(page, f"wizard-next-role-{lang}.png")
        page.click("[data-testid=next]")
        if i < 2:
            at_step(page, 2)
    at_step(page, 3)
