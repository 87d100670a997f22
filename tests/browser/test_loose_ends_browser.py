"""Browser: a favicon and no 404 on any page (the admin pages included), the header shows the user
once, and help texts carry no internal references such as "(seed 03)"."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import expect

from tests.browser.test_wizard_browser import login
from tests.conftest import ARTIFACTS

pytestmark = [pytest.mark.browser, pytest.mark.e2e]
PAGES = [
    "/",
    "/jobs/",
    "/jobs/new/",
    "/clusters/",
    "/ssh-keys/",
    "/storage/",
    "/admin/",
    "/admin/clusters/cluster/add/",
]


@pytest.mark.parametrize("lang", ["en", "zh-hans"])
def test_no_404_favicon_user_once_no_internal_references(console_server, page, lang):
    login(page, console_server, lang)
    missing = []
    page.on("response", lambda r: missing.append(r.url) if r.status == 404 else None)
    for path in PAGES:
        page.goto(console_server.url + path)
        page.wait_for_load_state("networkidle")
        assert not re.search(r"\(seed \d+\)|（seed|seed 0\d", page.content()), path
    icon = page.request.get(console_server.url + "/favicon.ico")
    assert icon.ok and "svg" in icon.headers["content-type"]
    assert not missing, missing
    page.goto(console_server.url + "/jobs/")
    who = page.locator("[data-testid=who]")
    text = who.inner_text()
    assert text.split()[0] == "admin" and text.count("admin") == 1, text
    expect(who).to_contain_text("Administrator" if lang == "en" else "管理员")
    assert page.locator("link[rel=icon]").count() == 1
    page.screenshot(path=str(ARTIFACTS / f"header-{lang}.png"), clip={"x": 0, "y": 0, "width": 1440, "height": 120})
