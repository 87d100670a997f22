"""Browser: the Metrics tab's ECharts charts: axes with units, a tooltip with step, value and time,
zoom, smoothing of scalars, tags grouped as TensorBoard groups them and the runs (attempts) of one job compared in
one chart; zh and en screenshots. The job is the seeded one of test_diagnosis_browser (real TensorBoard event files
written with tensorboardX, real MetricSample rows)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from playwright.sync_api import expect

from jobs.observe import metrics as metrics_service
from tests.browser import test_diagnosis_browser
from tests.browser.test_diagnosis_browser import login, set_lang
from tests.conftest import screenshot_dir

seeded = test_diagnosis_browser.seeded  # the fixture

pytestmark = [
    pytest.mark.browser,
    pytest.mark.django_db(transaction=True),
    pytest.mark.usefixtures("orm_beside_playwright"),
]

SHOTS = screenshot_dir()


def chart_js(page, tag: str, expr: str):
    """Evaluate ``expr`` with ``c`` = the ECharts instance of the scalar chart of ``tag``."""
    return page.evaluate(
        f"(tag) => {{ const box = [...document.querySelectorAll('[data-testid=tb-chart]')]"
        f".find(b => b.dataset.tag === tag); const c = box._chart; return {expr}; }}",
        tag,
    )


def test_metrics_charts_axes_tooltip_zoom_smoothing_groups_and_attempts(page, live_server, client, admin_user, seeded):
    from tensorboardX import SummaryWriter

    host = metrics_service.tensorboard_source(seeded).host_dir
    writer = SummaryWriter(logdir=str(Path(host) / "attempt-2"))  # a second run of the same job
    for step in range(1, 31):
        writer.add_scalar("train/actor/loss", 0.5 / step, step)
    writer.close()
    login(page, live_server, client, admin_user)
    set_lang(page, live_server, "zh-hans")
    page.goto(f"{live_server.url}/jobs/demo/metrics/")

    # tags grouped as TensorBoard groups them (the part before the first "/"), one chart per tag
    groups = page.locator("[data-testid=tb-group]")
    expect(groups).to_have_count(3)
    assert groups.evaluate_all("els => els.map(e => e.dataset.group)") == ["env", "rollout", "train"]
    expect(page.locator("[data-testid=tb-chart]")).to_have_count(3)
    expect(page.locator("[data-testid=tb-group][data-group=train] [data-testid=tb-chart]")).to_have_attribute(
        "data-tag", "train/actor/loss"
    )
    # the job's two runs in one chart, one series each (plus the faded raw line behind each smoothed one)
    expect(page.locator("[data-testid=tb-runs]")).to_have_text("每张图对比 2 次运行")
    loss = "train/actor/loss"
    names = chart_js(page, loss, "c.getOption().series.filter(s => !s.silent).map(s => s.name)")
    assert names == ["attempt-2", "run"]
    expect(page.locator(f"[data-testid=tb-chart][data-tag='{loss}'] canvas").first).to_be_visible()
    # a group's only chart takes the whole row (it used to take one of two columns, half the width)
    widths = page.locator("[data-testid=tb-group][data-group=train]").evaluate(
        "g => [g.querySelector('.charts').clientWidth, g.querySelector('[data-testid=tb-chart]').offsetWidth]"
    )
    assert widths[1] >= widths[0] - 2, widths

    # axes with units
    assert chart_js(page, loss, "[c.getOption().xAxis[0].name, c.getOption().yAxis[0].name]") == ["步数", "值"]
    cpu = "document.querySelector('[data-testid=usage-chart-cpu]')"
    mem = "document.querySelector('[data-testid=usage-chart-memory]')"
    assert page.evaluate(f"() => echarts.getInstanceByDom({cpu}).getOption().yAxis[0].name") == "CPU（核）"
    assert page.evaluate(f"() => echarts.getInstanceByDom({cpu}).getOption().xAxis[0].type") == "time"
    assert page.evaluate(
        f"() => echarts.getInstanceByDom({mem}).getOption().yAxis[0].axisLabel.formatter(3 * 2**30)"
    ) == ("3.0 GiB")
    assert page.evaluate(f"() => echarts.getInstanceByDom({mem}).getOption().series.map(s => s.name)") == [
        "demo-header-0",
        "demo-rollout-0",
    ]

    # tooltip: step, raw value, smoothed value, wall time
    box = page.locator(f"[data-testid=tb-chart][data-tag='{loss}']")
    canvas = box.locator(".echart")
    canvas.scroll_into_view_if_needed()
    bb = canvas.bounding_box()
    page.mouse.move(bb["x"] + bb["width"] * 0.3, bb["y"] + bb["height"] * 0.5)
    tip = box.locator(".echart > div").filter(has_text="步数")
    expect(tip).to_be_visible()
    text = tip.inner_text()
    assert re.search(r"步数 \d+", text), text
    assert re.search(r"run: [\d.e-]+ \(平滑后 [\d.e-]+\) · \d{4}-\d\d-\d\d \d\d:\d\d:\d\d", text), text
    assert "attempt-2:" in text

    # smoothing: TensorBoard's debiased EMA at 0.6 by default; 0 shows the raw values only
    raw = chart_js(page, loss, "c.getOption().series.find(s => s.name === 'run' && !s.silent).data.map(d => d[2])")
    shown = chart_js(page, loss, "c.getOption().series.find(s => s.name === 'run' && !s.silent).data.map(d => d[1])")
    assert shown[0] == pytest.approx(raw[0]) and shown[5] != pytest.approx(raw[5])
    expected = page.evaluate("(r) => RLarkMetrics.smooth(r.map((v, i) => [i, v]), 0.6)", raw)
    assert shown == pytest.approx(expected)
    page.locator("[data-testid=tb-smoothing]").evaluate(
        "el => { el.value = '0'; el.dispatchEvent(new Event('input', {bubbles: true})); }"
    )
    expect(page.locator("[data-testid=tb-smoothing-value]")).to_have_text("0.00")
    assert chart_js(page, loss, "c.getOption().series.length") == 2  # no faded raw lines at 0
    shown = chart_js(page, loss, "c.getOption().series.find(s => s.name === 'run').data.map(d => d[1])")
    assert shown == pytest.approx(raw)

    # zoom: the mouse wheel over the chart narrows the step range
    assert chart_js(page, loss, "[c.getOption().dataZoom[0].start, c.getOption().dataZoom[0].end]") == [0, 100]
    page.mouse.move(bb["x"] + bb["width"] * 0.5, bb["y"] + bb["height"] * 0.5)
    page.mouse.wheel(0, -400)
    page.wait_for_function(
        "(tag) => { const b = [...document.querySelectorAll('[data-testid=tb-chart]')]"
        ".find(x => x.dataset.tag === tag); const z = b._chart.getOption().dataZoom[0];"
        " return z.end - z.start < 100; }",
        arg=loss,
        timeout=5_000,
    )
    page.mouse.move(0, 0)
    page.screenshot(path=str(SHOTS / "metrics-zh.png"), full_page=True)

    set_lang(page, live_server, "en")
    page.goto(f"{live_server.url}/jobs/demo/metrics/")
    expect(page.locator("[data-testid=tb-chart]")).to_have_count(3)
    assert chart_js(page, loss, "[c.getOption().xAxis[0].name, c.getOption().yAxis[0].name]") == ["Step", "Value"]
    expect(page.locator("[data-testid=tb-runs]")).to_have_text("2 runs compared in each chart")
    page.screenshot(path=str(SHOTS / "metrics-en.png"), full_page=True)
