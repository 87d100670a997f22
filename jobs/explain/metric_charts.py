"""Chart data of the Metrics tab, drawn in the browser by Apache ECharts (``static/js/metrics.js``).

Shapes (JSON, numbers only; every label is text the page sets with ``textContent`` or ECharts' escaped tooltip):

- ``{"usage": {"cpu": [series], "memory": [series]}, "scalars": [group], "runs": [run]}``
- usage ``series``: ``{"name": <pod>, "points": [[<epoch ms>, <value>], ...]}``; CPU in cores, memory in bytes.
- scalar ``group``: ``{"name": <group>, "charts": [{"tag": <tag>, "series": [{"run", "points": [[step, value,
  wall ms]]}]}]}``. Tags are grouped as TensorBoard groups them: by the part before the first ``/``
  (TensorBoard's default "category" of a tag); tags without ``/`` go to the group named like the tag.
- ``runs``: the run directories found under the TensorBoard directory (each directory holding event files is a
  run, named by its path relative to that directory; "." when the files are at its top). The runs of one job
  (its attempts, when the run script writes each attempt under its own sub-directory) are series of the same
  chart, so they can be compared.
"""

from __future__ import annotations

import math
import os
from typing import Any

from jobs.observe.metrics import tensorboard_source

MAX_POINTS = 500  # per series (downsampled evenly, the last point kept)
MAX_TAGS = 60
MAX_RUNS = 10


def _downsample(points: list, limit: int = MAX_POINTS) -> list:
    if len(points) <= limit:
        return points
    step = len(points) / limit
    return [points[int(i * step)] for i in range(limit - 1)] + [points[-1]]


def tag_group(tag: str) -> str:
    """TensorBoard's default category of a scalar tag: the part before the first ``/`` (``train/actor/loss`` ->
    ``train``)."""
    return tag.split("/", 1)[0] if "/" in tag else tag


def read_runs(log_dir: str) -> dict[str, dict[str, list[list[float]]]]:
    """``{run: {tag: [[step, value, wall ms], ...]}}`` for every run directory under ``log_dir`` (at most
    :data:`MAX_RUNS` runs and :data:`MAX_TAGS` tags); unreadable or half-written files are skipped; non-finite
    values are dropped (JSON has no NaN)."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    runs = sorted(root for root, _dirs, files in os.walk(log_dir) if any("tfevents" in f for f in files))
    out: dict[str, dict[str, list[list[float]]]] = {}
    tags: set[str] = set()
    for run in runs[:MAX_RUNS]:
        acc = EventAccumulator(run, size_guidance={"scalars": 0})
        try:
            acc.Reload()
        except Exception:  # noqa: BLE001 - a corrupt or half-written file must not break the page
            continue
        series: dict[str, list[list[float]]] = {}
        for tag in acc.Tags().get("scalars", []):
            if tag not in tags and len(tags) >= MAX_TAGS:
                continue
            tags.add(tag)
            events = sorted(acc.Scalars(tag), key=lambda e: e.step)
            points = [
                [int(e.step), float(e.value), round(e.wall_time * 1000)] for e in events if math.isfinite(e.value)
            ]
            series[tag] = _downsample(points)
        out[os.path.relpath(run, log_dir)] = series
    return out


def scalar_groups(runs: dict[str, dict[str, list[list[float]]]]) -> list[dict[str, Any]]:
    """The ``scalars`` part of :func:`chart_data`: groups sorted by name, tags sorted within a group, one series
    per run that has the tag."""
    by_tag: dict[str, list[dict[str, Any]]] = {}
    for run in sorted(runs):
        for tag, points in runs[run].items():
            if points:
                by_tag.setdefault(tag, []).append({"run": run, "points": points})
    groups: dict[str, list[dict[str, Any]]] = {}
    for tag in sorted(by_tag):
        groups.setdefault(tag_group(tag), []).append({"tag": tag, "series": by_tag[tag]})
    return [{"name": name, "charts": groups[name]} for name in sorted(groups)]


def usage_series(workers) -> dict[str, list[dict[str, Any]]]:
    """CPU (cores) and memory (bytes) per Worker over time from ``jobs.observe.metrics.WorkerMetrics`` rows."""
    from datetime import datetime

    def points(series: list[tuple[str, float]]) -> list[list[float]]:
        return [[round(datetime.fromisoformat(t).timestamp() * 1000), v] for t, v in series if math.isfinite(v)]

    return {
        "cpu": [{"name": w.pod, "points": points(w.cpu_series)} for w in workers if w.cpu_series],
        "memory": [{"name": w.pod, "points": points(w.memory_series)} for w in workers if w.memory_series],
    }


def chart_data(workers, tensorboard_dir: str | None) -> dict[str, Any]:
    """Everything ``static/js/metrics.js`` draws (module docstring). ``tensorboard_dir`` is the host directory
    the console can read (``jobs.observe.metrics.tensorboard_source(job).host_dir``) or None."""
    runs: dict[str, dict[str, list[list[float]]]] = {}
    if tensorboard_dir:
        try:
            runs = read_runs(tensorboard_dir)
        except ImportError:
            runs = {}
    return {"usage": usage_series(workers), "scalars": scalar_groups(runs), "runs": sorted(runs)}


def chart_strings() -> dict[str, str]:
    """UI strings of ``static/js/metrics.js`` (zh and en through the catalogue)."""
    from django.utils.translation import gettext as _

    return {
        "time": _("Time"),
        "timeLabel": _("Time:"),
        "step": _("Step"),
        "stepLabel": _("Step"),
        "value": _("Value"),
        "smoothedLabel": _("smoothed"),
        "cpuUnit": _("CPU (cores)"),
        "memoryUnit": _("Memory"),
        "zoom": _("Box zoom"),
        "zoomBack": _("Undo zoom"),
        "reset": _("Reset"),
    }


def metric_chart_context(job, data: dict[str, Any]) -> dict[str, Any]:
    """Template context of the Metrics tab's charts: ``chart_data`` (JSON via ``json_script``), ``chart_strings``
    and ``chart_runs``; ``data`` is ``jobs.observe.metrics.job_metrics(job)``."""
    host_dir = tensorboard_source(job).host_dir if data["tensorboard"]["readable"] else None
    charts = chart_data(data["workers"], host_dir)
    return {"chart_data": charts, "chart_strings": {"strings": chart_strings()}, "chart_runs": charts["runs"]}
