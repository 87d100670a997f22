"""Browser: the top bar stays on one line from 1024 px up, in en and zh (an administrator sees every link: the
widest bar). At 1024-1280 px the en bar wrapped onto two lines (link labels broke, the user area overflowed).
Screenshots: ``topbar-<width>-<lang>.png``."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from tests.browser.test_wizard_browser import login
from tests.conftest import screenshot_dir

pytestmark = [pytest.mark.browser, pytest.mark.e2e]
LOG_OUT = {"en": "Log out", "zh-hans": "退出登录"}
FOLD = 1680  # below this width the user area is a menu (static/css/console.css)


def clip(width: int, height: int) -> dict:
    return {"x": 0, "y": 0, "width": width, "height": height}


MEASURE = """
() => {
  const bar = document.querySelector("header.topbar");
  const box = bar.getBoundingClientRect();
  const items = [...bar.querySelectorAll(".brand, .mainnav a, .topbar-right > *")]
    .filter((el) => el.getClientRects().length && getComputedStyle(el).display !== "none");
  const lines = (el) => {  // the most text lines one of the item's text nodes takes (a broken label: 2 or more)
    let most = 0;
    const walker = document.createTreeWalker(el, NodeFilter.SHOW_TEXT);
    while (walker.nextNode()) {
      const r = document.createRange(); r.selectNodeContents(walker.currentNode);
      const tops = new Set([...r.getClientRects()].filter((x) => x.width > 0).map((x) => Math.round(x.top)));
      most = Math.max(most, tops.size);
    }
    return most;
  };
  return {
    height: box.height,
    overflowX: bar.scrollWidth - bar.clientWidth,
    overflowY: bar.scrollHeight - bar.clientHeight,
    pageOverflowX: document.documentElement.scrollWidth - document.documentElement.clientWidth,
    items: items.map((el) => {
      const r = el.getBoundingClientRect();
      return { text: el.textContent.trim().replace(/\\s+/g, " "), top: r.top, bottom: r.bottom, left: r.left,
               right: r.right, lines: lines(el), title: el.getAttribute("title") || "" };
    }),
  };
}
"""


@pytest.mark.parametrize("lang", ["en", "zh-hans"])
@pytest.mark.parametrize("width", [1024, 1280, 1920])
def test_top_bar_is_one_line_from_1024_px(console_server, browser, lang, width):
    ctx = browser.new_context(viewport={"width": width, "height": 700})
    page = ctx.new_page()
    login(page, console_server, lang)
    page.goto(console_server.url + "/jobs/")
    m = page.evaluate(MEASURE)
    page.screenshot(path=str(screenshot_dir() / f"topbar-{width}-{lang}.png"), clip=clip(width, 120))
    assert m["height"] <= 56, m  # one row: the bar's own 52 px
    assert m["overflowX"] <= 0 and m["overflowY"] <= 0 and m["pageOverflowX"] <= 0, m
    for item in m["items"]:
        assert item["lines"] <= 1, item  # no label broken over two lines
        assert item["top"] >= 0 and item["bottom"] <= m["height"], item  # inside the bar
        assert item["right"] <= width, item
    # everything is still there: the links, the zone, the user, and the tokens and log-out (in the user menu when
    # the bar is narrow)
    bar = page.locator("header.topbar")
    for word in ["Jobs", "Network domains", "Admin"] if lang == "en" else ["任务", "网络域", "管理后台"]:
        expect(bar.locator(".mainnav a", has_text=word)).to_be_visible()
    expect(bar.locator("[data-testid=page-tz]")).to_contain_text("CST")
    tokens, logout = bar.locator("[data-testid=tokens-link]"), bar.locator("button", has_text=LOG_OUT[lang])
    toggle = bar.locator("[data-testid=usermenu-toggle]")
    if width < FOLD:
        expect(toggle).to_have_text("admin ▾")
        expect(tokens).to_be_hidden()
        toggle.click()
        expect(toggle).to_have_attribute("aria-expanded", "true")
        expect(tokens).to_be_visible()
        expect(logout).to_be_visible()
        expect(bar.locator("[data-testid=who] .badge")).to_have_text("Administrator" if lang == "en" else "管理员")
        menu = bar.locator(".usermenu-items").bounding_box()
        assert menu["x"] >= 0 and menu["x"] + menu["width"] <= width, menu  # the open menu stays on screen
        page.screenshot(path=str(screenshot_dir() / f"topbar-{width}-{lang}-menu.png"), clip=clip(width, 260))
        page.keyboard.press("Escape")
        expect(tokens).to_be_hidden()
        expect(toggle).to_have_attribute("aria-expanded", "false")
    else:
        expect(toggle).to_be_hidden()
        expect(tokens).to_be_visible()
        expect(logout).to_be_visible()
        expect(bar.locator("[data-testid=who]")).to_contain_text("admin")
    ctx.close()
