"""Browser: the back office's group permission picker (Django's filter_horizontal widget) is wholly in the page's
language - its headings and buttons from Django's JS catalog and every option from accounts.permission_labels
(fresh-clone trial: "half English"). Screenshots: ``backoffice-group-picker-{lang}.png``."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import expect

from tests.browser.test_fleet_backoffice_browser import _login
from tests.conftest import screenshot_dir

pytestmark = [pytest.mark.browser, pytest.mark.e2e]


@pytest.mark.parametrize("lang", ["zh-hans", "en"])
def test_group_permission_picker_is_in_one_language(console_server, page, lang):
    _login(page, console_server, lang)
    page.goto(console_server.url + "/admin/auth/group/add/")
    available = page.locator("#id_permissions_from option")
    expect(available.first).to_be_visible()
    texts = available.all_inner_texts()
    if lang == "zh-hans":
        expect(page.locator(".selector-available-title").first).to_contain_text("选中要添加的权限")
        expect(page.locator(".selector-chooseall").first).to_have_text("全选权限")
        widget = page.locator(".selector").first.inner_text()
        assert not re.search(r"Choose|Remove|by selecting", widget), widget
        assert not [t for t in texts if "Can " in t], [t for t in texts if "Can " in t][:5]
        assert "账号与审计 | API 令牌 | 可以添加API 令牌" in texts
    else:
        assert "Accounts and audit | API token | Can add API token" in texts
    page.screenshot(path=str(screenshot_dir() / f"backoffice-group-picker-{lang}.png"), full_page=True)
