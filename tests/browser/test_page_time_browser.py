"""Browser: one time zone per page, also where the browser formats times itself. The browser runs in
New York while the page's zone (the server's TIME_ZONE, named in the header) is Asia/Shanghai: the Metrics charts'
time axis, its labels and tooltips, and the Logs tab's "updated at" and timestamps all follow the page's zone, with
its abbreviation or offset, never the browser's. Screenshots: ``page-time-*.png``."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest
from playwright.sync_api import expect

from tests.browser import test_diagnosis_browser
from tests.browser.test_diagnosis_browser import login, set_lang
from tests.conftest import screenshot_dir
from tests.terminal_support import DemoConsole, demo_login

seeded = test_diagnosis_browser.seeded  # the fixture

pytestmark = [pytest.mark.browser]

SHOTS = screenshot_dir()
PAGE_ZONE = ZoneInfo("Asia/Shanghai")
BROWSER_ZONE = "America/New_York"  # 13 hours behind the page's zone in December, 12 in summer


def _hours_around_now(zone) -> set[str]:
    now = datetime.now(UTC)
    return {(now + timedelta(minutes=m)).astimezone(zone).strftime("%H") for m in (-3, 0, 1)}


@pytest.fixture
def ny_page(browser):
    ctx = browser.new_context(timezone_id=BROWSER_ZONE, viewport={"width": 1440, "height": 900})
    page = ctx.new_page()
    yield page
    ctx.close()


@pytest.mark.django_db(transaction=True)
@pytest.mark.usefixtures("orm_beside_playwright")
@pytest.mark.parametrize("lang", ["zh-hans", "en"])
def test_metrics_chart_axes_and_tooltips_use_the_pages_zone(
    django_db_setup, live_server, client, admin_user, seeded, ny_page, lang
):
    page = ny_page
    login(page, live_server, client, admin_user)
    set_lang(page, live_server, lang)
    page.goto(f"{live_server.url}/jobs/demo/metrics/")
    expect(page.locator("[data-testid=page-tz]")).to_have_text("CST (UTC+08:00)")
    assert page.evaluate("() => new Date(Date.UTC(2026, 11, 1, 10, 30)).getHours()") == 5  # the browser: New York

    cpu = "echarts.getInstanceByDom(document.querySelector('[data-testid=usage-chart-cpu]'))"
    axis = page.evaluate(f"() => {cpu}.getOption().xAxis[0].name")
    assert axis == ("时间 (CST)" if lang == "zh-hans" else "Time (CST)"), axis
    label = f"(ms) => {cpu}.getOption().xAxis[0].axisLabel.formatter(ms)"
    assert page.evaluate(label, int(datetime(2026, 12, 1, 10, 30, tzinfo=UTC).timestamp() * 1000)) == "18:30"
    assert page.evaluate(label, int(datetime(2026, 11, 30, 16, 0, tzinfo=UTC).timestamp() * 1000)) == "12-01"

    box = page.locator("[data-testid=usage-chart-cpu]")
    box.scroll_into_view_if_needed()
    bb = box.bounding_box()
    page.mouse.move(bb["x"] + bb["width"] * 0.6, bb["y"] + bb["height"] * 0.5)
    tip = box.locator(":scope > div").filter(has_text="demo-header-0")
    expect(tip).to_be_visible()
    m = re.search(r"\d{4}-\d\d-\d\d (\d\d):\d\d:\d\d CST", tip.inner_text())
    assert m, tip.inner_text()
    assert m.group(1) in _hours_around_now(PAGE_ZONE), (m.group(0), _hours_around_now(PAGE_ZONE))
    page.screenshot(path=str(SHOTS / f"page-time-metrics-{lang}.png"), full_page=True)


@pytest.fixture(scope="module")
def demo(tmp_path_factory):
    console = DemoConsole(tmp_path_factory.mktemp("page-time"), interval=0.2).start()
    yield console
    console.stop()


@pytest.mark.parametrize("lang", ["zh-hans", "en"])
def test_logs_updated_at_and_timestamps_use_the_pages_zone(demo, ny_page, lang):
    page = ny_page
    demo_login(page, demo.url)
    page.context.add_cookies([{"name": "django_language", "value": lang, "url": demo.url}])
    page.goto(demo.url + "/terminal/jobs/demo/logs/?pod=demo-actor-0")
    page.select_option('[data-testid="logs-worker"]', "demo-actor-0")
    expect(page.locator('[data-testid="logs-view"]')).to_contain_text("Global Step", timeout=15_000)

    status = page.locator('[data-testid="logs-status"]')
    word = "更新于" if lang == "zh-hans" else "Updated"
    expect(status).to_contain_text(re.compile(word + r".*\d\d:\d\d:\d\d CST"), timeout=10_000)
    hour = re.search(r"(\d\d):\d\d:\d\d CST", status.inner_text()).group(1)
    assert hour in _hours_around_now(PAGE_ZONE), (status.inner_text(), _hours_around_now(PAGE_ZONE))

    # the timestamps' zone choice names the page's zone, not "local time" (which would be the browser's)
    expect(page.locator('[data-testid="logs-tz"] option').first).to_have_text("CST (UTC+08:00)")
    page.check('[data-testid="logs-timestamps"]')
    stamp = page.locator(".log-view .lts").last
    expect(stamp).to_have_text(re.compile(r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d{3} \+08:00 $"), timeout=10_000)
    assert stamp.inner_text()[11:13] in _hours_around_now(PAGE_ZONE)
    page.select_option('[data-testid="logs-tz"]', "utc")
    expect(stamp).to_have_text(re.compile(r" UTC $"))
    assert stamp.inner_text()[11:13] in _hours_around_now(UTC)
    page.screenshot(path=str(SHOTS / f"page-time-logs-{lang}.png"), full_page=True)


@pytest.mark.django_db(transaction=True)
@pytest.mark.usefixtures("orm_beside_playwright")
def test_a_time_gets_the_abbreviation_and_offset_of_its_own_side_of_a_dst_change(live_server, settings, browser):
    """The page's zone has daylight saving (America/New_York), the browser is elsewhere (Tokyo): a time in January
    is EST -05:00 and one in July EDT -04:00, whichever side of the change "now" is on (the script used the header's
    abbreviation, that of now, for every time)."""
    settings.TIME_ZONE = "America/New_York"
    ctx = browser.new_context(timezone_id="Asia/Tokyo")
    page = ctx.new_page()
    page.goto(live_server.url + "/login/")
    now_abbr = datetime.now(ZoneInfo("America/New_York")).tzname()
    assert page.locator("html").get_attribute("data-tz-abbr") == now_abbr  # the header's label: now
    fmt = "([ms, opts]) => RLarkTime.format(ms, opts)"
    jan = int(datetime(2026, 1, 15, 12, 0, tzinfo=UTC).timestamp() * 1000)
    jul = int(datetime(2026, 7, 15, 12, 0, tzinfo=UTC).timestamp() * 1000)
    assert page.evaluate(fmt, [jan, {"abbr": True}]) == "2026-01-15 07:00:00 EST"
    assert page.evaluate(fmt, [jul, {"abbr": True}]) == "2026-07-15 08:00:00 EDT"
    assert page.evaluate(fmt, [jan, {"offset": True}]) == "2026-01-15 07:00:00 -05:00"
    assert page.evaluate(fmt, [jul, {"offset": True}]) == "2026-07-15 08:00:00 -04:00"
    # the hour of the change itself: 2026-03-08 02:00 EST becomes 03:00 EDT (07:00 UTC)
    change = datetime(2026, 3, 8, 7, 0, tzinfo=UTC)
    before, after = (int((change + timedelta(minutes=m)).timestamp() * 1000) for m in (-1, 1))
    assert page.evaluate(fmt, [before, {"abbr": True, "date": False}]) == "01:59:00 EST"
    assert page.evaluate(fmt, [after, {"abbr": True, "date": False}]) == "03:01:00 EDT"
    assert page.evaluate("(ms) => RLarkTime.abbrAt(ms)", jul) == "EDT"
    ctx.close()
