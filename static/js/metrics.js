/* RLark Console: the Metrics tab's charts, drawn with Apache ECharts (static/vendor/echarts.min.js).
 *
 * Data: <script type="application/json" id="metrics-charts"> from jobs.explain.metric_charts.chart_data:
 *   usage.cpu / usage.memory: [{name: pod, points: [[epoch ms, value]]}]   (cores, bytes)
 *   scalars: [{name: group, charts: [{tag, series: [{run, points: [[step, value, wall ms]]}]}]}]
 * Every chart: axes with units, a tooltip (step, value, time), zoom (mouse wheel / drag, the slider below, box zoom
 * in the toolbox). Scalars: TensorBoard's smoothing (debiased exponential moving average, default 0.6) with the raw
 * line faded behind; each run of the job (its attempts) is a series of the same chart.
 */
(function () {
  "use strict";
  const dataNode = document.getElementById("metrics-charts");
  if (!dataNode || !window.echarts) return;
  const data = JSON.parse(dataNode.textContent);
  const cfg = JSON.parse(document.getElementById("metrics-strings").textContent);
  const s = cfg.strings;
  const charts = [];
  const COLORS = ["#2563eb", "#dc6803", "#16a34a", "#9333ea", "#e11d48", "#0891b2", "#4d7c0f", "#a16207", "#475569", "#be185d"];

  function esc(t) {
    return String(t).replace(/[&<>"']/g, (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" }[c]));
  }
  // Times in the page's zone (the one the header names), never the browser's (static/js/pagetime.js)
  const T = window.RLarkTime;
  function when(ms) { return T.format(ms, { abbr: true }); }
  function axisTime(ms) {
    const p = T.parts(ms);
    if (p.hour === "00" && p.minute === "00" && p.second === "00") return p.month + "-" + p.day;
    return p.hour + ":" + p.minute + (p.second === "00" ? "" : ":" + p.second);
  }
  function bytes(v) {
    const units = ["B", "KiB", "MiB", "GiB", "TiB"];
    let i = 0;
    while (Math.abs(v) >= 1024 && i < units.length - 1) { v /= 1024; i++; }
    return (i ? v.toFixed(1) : v.toFixed(0)) + " " + units[i];
  }
  function num(v) {
    if (v === null || v === undefined || !isFinite(v)) return "—";
    const a = Math.abs(v);
    return a !== 0 && (a < 1e-3 || a >= 1e6) ? v.toExponential(3) : String(Number(v.toPrecision(5)));
  }

  // TensorBoard's scalar smoothing: an exponential moving average, debiased so the first points are not pulled to 0.
  function smooth(points, weight) {
    if (!weight) return points.map((p) => p[1]);
    let last = 0, n = 0;
    return points.map((p) => {
      last = last * weight + (1 - weight) * p[1];
      n++;
      return last / (1 - Math.pow(weight, n));
    });
  }

  function base(el, xAxis, yAxis, tooltip) {
    const chart = echarts.init(el, null, { renderer: "canvas" });
    chart.setOption({
      animation: false,
      color: COLORS,
      grid: { left: 64, right: 24, top: 56, bottom: 64 },
      legend: { type: "scroll", top: 0, left: 8, right: 80, textStyle: { fontSize: 11 } },
      toolbox: { right: 8, top: 0, feature: { dataZoom: { yAxisIndex: "none", title: { zoom: s.zoom, back: s.zoomBack } },
                                               restore: { title: s.reset } } },
      tooltip: Object.assign({ trigger: "axis", confine: true, axisPointer: { type: "line" } }, tooltip),
      dataZoom: [{ type: "inside", xAxisIndex: 0 }, { type: "slider", xAxisIndex: 0, height: 18, bottom: 8 }],
      xAxis, yAxis: Object.assign({ nameTextStyle: { align: "left", color: "#475467" }, nameGap: 12 }, yAxis),
    });
    charts.push(chart);
    return chart;
  }

  // the zone's abbreviations over the chart's time span: "EST/EDT" when it crosses a daylight-saving change
  function spanAbbr(series) {
    const names = [];
    for (const x of series) {
      for (const p of [x.points[0], x.points[x.points.length - 1]]) {
        const a = p ? T.abbrAt(p[0]) : "";
        if (a && !names.includes(a)) names.push(a);
      }
    }
    return names.join("/") || T.abbr;
  }

  function usageChart(el, series, unit, fmt) {
    return base(
      el,
      { type: "time", name: s.time + " (" + spanAbbr(series) + ")", nameLocation: "middle", nameGap: 26,
        axisLabel: { formatter: axisTime, hideOverlap: true } },
      { type: "value", name: unit, scale: true, axisLabel: { formatter: (v) => fmt(v) } },
      {
        formatter: (items) => {
          if (!items.length) return "";
          const rows = items.map((it) => it.marker + esc(it.seriesName) + ": <b>" + esc(fmt(it.value[1])) + "</b>");
          return esc(s.timeLabel) + " " + esc(when(items[0].value[0])) + "<br>" + rows.join("<br>");
        },
      },
    ).setOption({
      series: series.map((x) => ({ name: x.name, type: "line", showSymbol: x.points.length < 3, data: x.points })),
    });
  }

  const scalarCharts = [];
  function scalarOption(chart, weight) {
    const series = [];
    chart.spec.series.forEach((x, i) => {
      const color = COLORS[i % COLORS.length];
      const sm = smooth(x.points, weight);
      // [step, shown value, raw value, wall ms]: the tooltip reads the raw value and the time from here
      series.push({ name: x.run, type: "line", showSymbol: x.points.length < 3, color, z: 3,
                    data: x.points.map((p, k) => [p[0], sm[k], p[1], p[2]]) });
      if (weight) {
        series.push({ name: x.run, type: "line", showSymbol: false, color, z: 2, silent: true, tooltip: { show: false },
                      lineStyle: { opacity: 0.25 }, data: x.points.map((p) => [p[0], p[1]]) });
      }
    });
    return { series };
  }

  function scalarChart(el, spec) {
    const chart = base(
      el,
      { type: "value", name: s.step, nameLocation: "middle", nameGap: 26, scale: true, minInterval: 1 },
      { type: "value", name: s.value, scale: true, axisLabel: { formatter: num } },
      {
        formatter: (items) => {
          items = items.filter((it) => it.value && it.value.length === 4);
          if (!items.length) return "";
          const head = esc(s.stepLabel) + " <b>" + esc(items[0].value[0]) + "</b>";
          const rows = items.map((it) => {
            const v = it.value;
            let line = it.marker + esc(it.seriesName) + ": <b data-role=\"value\">" + esc(num(v[2])) + "</b>";
            if (v[1] !== v[2]) line += " (" + esc(s.smoothedLabel) + " " + esc(num(v[1])) + ")";
            return line + " · " + esc(when(v[3]));
          });
          return head + "<br>" + rows.join("<br>");
        },
      },
    );
    chart.spec = spec;
    chart.setOption(scalarOption(chart, weight()), { replaceMerge: ["series"] });
    scalarCharts.push(chart);
    return chart;
  }

  function weight() {
    const input = document.querySelector("[data-testid=tb-smoothing]");
    return input ? Number(input.value) : 0.6;
  }

  document.querySelectorAll("[data-usage-chart]").forEach((el) => {
    const kind = el.dataset.usageChart;
    const series = data.usage[kind] || [];
    if (!series.length) { el.hidden = true; return; }
    if (kind === "cpu") usageChart(el, series, s.cpuUnit, num);
    else usageChart(el, series, s.memoryUnit, bytes);
  });

  const groupsRoot = document.querySelector("[data-testid=tb-groups]");
  if (groupsRoot) {
    for (const g of data.scalars) {
      const section = document.createElement("details");
      section.open = true;
      section.className = "tb-group";
      section.dataset.testid = "tb-group";
      section.dataset.group = g.name;
      const summary = document.createElement("summary");
      summary.textContent = g.name + " (" + g.charts.length + ")";
      section.appendChild(summary);
      const grid = document.createElement("div");
      grid.className = "charts";
      section.appendChild(grid);
      groupsRoot.appendChild(section);
      for (const c of g.charts) {
        const box = document.createElement("div");
        box.className = "chart";
        box.dataset.testid = "tb-chart";
        box.dataset.tag = c.tag;
        box.dataset.runs = String(c.series.length);
        const title = document.createElement("div");
        title.className = "tag mono";
        title.textContent = c.tag;
        const canvas = document.createElement("div");
        canvas.className = "echart";
        box.append(title, canvas);
        grid.appendChild(box);
        box._chart = scalarChart(canvas, c);
      }
    }
    const input = document.querySelector("[data-testid=tb-smoothing]");
    const out = document.querySelector("[data-testid=tb-smoothing-value]");
    if (input) {
      input.addEventListener("input", () => {
        out.textContent = Number(input.value).toFixed(2);
        for (const c of scalarCharts) c.setOption(scalarOption(c, weight()), { replaceMerge: ["series"] });
      });
    }
  }
  window.addEventListener("resize", () => charts.forEach((c) => c.resize()));
  window.RLarkMetrics = { charts, scalarCharts, smooth };
})();
