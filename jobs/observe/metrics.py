"""Real runtime, restarts, Pod age, CPU/memory per Worker and TensorBoard scalars for the Metrics tab.

Rules (upstream-rlark 8.3/8.5 "goes further"; seed 02 notes that upstream's runtime and metrics are placeholders):

- Runtime = start of the current attempt -> finish (or now), in seconds (``jobs.observe.status.runtime_seconds``).
- CPU (cores) and memory (bytes) come only from ``Runtime.pod_metrics()`` (local: process-group accounting;
  Kubernetes: metrics API when present). A value the runtime did not give is ``None`` and shown as "not
  available", never as a made-up number. The status sync (or the page, when no recent sample exists) stores each
  reading as a :class:`~jobs.models_metrics.MetricSample`; the newest ``RING_SIZE`` samples per Pod are kept.
- TensorBoard scalars are read from the event files under the head template's ``tensorBoardDir`` with
  ``tensorboard.backend.event_processing`` (no TensorBoard server), when the console can read that directory
  (local runtime: through the role's hostPath mounts), and drawn as inline SVG sparklines (no chart CDN).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from html import escape
from typing import Any

from clusters.runtime import registry
from clusters.runtime.base import RuntimeFailure
from jobs.jobspec.mounts import host_path_for
from jobs.models import Pod
from jobs.models_metrics import MetricSample
from jobs.observe.headline import worker_phase
from jobs.observe.run_prefix import run_path
from jobs.observe.status import runtime_seconds as _runtime
from rlark_console.id_sets import id_in

RING_SIZE = 120  # samples kept per Pod
SAMPLE_MIN_INTERVAL = 5.0  # seconds; the page samples itself only when the newest sample is older than this
MAX_POINTS = 200  # points per chart
MAX_TAGS = 60


# --- runtime and samples -----------------------------------------------------------------------------------


def runtime_seconds(job, now: datetime | None = None) -> int | None:
    """Real run time of the current attempt in seconds; None before it started."""

    return _runtime(job, now)


def record_pod_metrics(job, metrics: dict[str, dict[str, float]] | None, now: datetime | None = None) -> int:
    """Store one reading per Pod of ``job`` from ``Runtime.pod_metrics()`` output
    (``{pod: {"cpu": cores, "memory": bytes}}``; missing keys stored as None). Pods not belonging to ``job`` are
    ignored. Trims each Pod's ring to ``RING_SIZE``. Returns the number of samples written. Same statements as
    the sync's :func:`record_sync_samples` (no SELECT per Pod)."""
    return record_sync_samples([job.pk], metrics or {}, now)


def sample_job(job, now: datetime | None = None) -> bool:
    """Ask each runtime of ``job`` for its Pods' usage and store it. Returns False when no runtime reports
    metrics (``pod_metrics()`` is None or fails): then the page shows "not available"."""
    seen: set[tuple[int, str]] = set()
    any_available = False
    for task in job.tasks.select_related("cluster"):
        key = (task.cluster_id, task.namespace)
        if key in seen:
            continue
        seen.add(key)
        try:
            metrics = registry.runtime_for(task.cluster).pod_metrics(task.namespace, job.name)
        except (RuntimeFailure, OSError, NotImplementedError):
            metrics = None
        if metrics is not None:
            any_available = True
            record_pod_metrics(job, metrics, now)
    return any_available


SYNC_SAMPLE_INTERVAL = 10.0  # seconds between two samples of one job taken by the status sync
_last_sync_sample: dict[int, float] = {}


def sample_during_sync(job) -> None:
    """Called by the status sync after each observation of ``job``: store a CPU/memory sample of its Workers
    at most every ``SYNC_SAMPLE_INTERVAL`` seconds while it runs. Never raises (metrics must not break the
    sync); writes nothing when the runtime reports no metrics."""
    import logging
    import time

    if job.phase not in ("Pending", "Running") or job.stopped:
        return
    now = time.monotonic()
    if now - _last_sync_sample.get(job.pk, -SYNC_SAMPLE_INTERVAL) < SYNC_SAMPLE_INTERVAL:
        return
    _last_sync_sample[job.pk] = now
    try:
        sample_job(job)
    except Exception:  # noqa: BLE001
        logging.getLogger(__name__).exception("metrics sample of job %s", job.name)


def jobs_due(jobs) -> list[int]:
    """Ids of the running ``jobs`` whose last sync sample is ``SYNC_SAMPLE_INTERVAL`` seconds old or more; they
    count as sampled from now on (the sync then asks each cluster once, ``Runtime.pod_metrics_all``)."""
    import time

    now = time.monotonic()
    due = []
    for job in jobs:
        if job.phase not in ("Pending", "Running") or job.stopped:
            continue
        if now - _last_sync_sample.get(job.pk, -SYNC_SAMPLE_INTERVAL) >= SYNC_SAMPLE_INTERVAL:
            _last_sync_sample[job.pk] = now
            due.append(job.pk)
    return due


def record_sync_samples(job_ids, metrics: dict[str, dict[str, float]], now: datetime | None = None) -> int:
    """Store one reading per Pod of the jobs ``job_ids`` from the merged per-cluster ``pod_metrics_all`` answers
    (``{pod name: {"cpu": cores, "memory": bytes}}``): one query for the Pod names, one bulk insert, one DELETE
    that trims every ring to ``RING_SIZE``, whatever the number of jobs and Pods. Returns the samples written."""
    from django.db.models import F, Window
    from django.db.models.functions import RowNumber
    from django.utils import timezone

    job_ids = list(job_ids)
    if not metrics or not job_ids:
        return 0
    now = now or timezone.now()
    owners = dict(Pod.objects.filter(task__job_id__in=id_in(job_ids)).order_by().values_list("name", "task__job_id"))
    rows = []
    for pod, values in metrics.items():
        if pod not in owners or not isinstance(values, dict):
            continue
        cpu, mem = values.get("cpu"), values.get("memory")
        rows.append(
            MetricSample(
                job_id=owners[pod],
                pod_name=pod,
                taken_at=now,
                cpu=float(cpu) if cpu is not None else None,
                memory=int(mem) if mem is not None else None,
            )
        )
    if not rows:
        return 0
    MetricSample.objects.bulk_create(rows)
    ranked = (
        MetricSample.objects.filter(job_id__in={r.job_id for r in rows})
        .annotate(
            rank=Window(
                RowNumber(), partition_by=[F("job_id"), F("pod_name")], order_by=[F("taken_at").desc(), F("pk").desc()]
            )
        )
        .filter(rank__gt=RING_SIZE)
        .values("pk")
    )
    # one DELETE ... WHERE id IN (ranked subquery) per cycle, not a SELECT of the old ids first
    MetricSample.objects.filter(pk__in=ranked).delete()
    return len(rows)


def maybe_sample(job, now: datetime | None = None) -> None:
    """Sample on page view when the sync has not stored a sample in the last ``SAMPLE_MIN_INTERVAL`` seconds and
    the job has live Workers."""
    from django.utils import timezone

    now = now or timezone.now()
    if job.phase not in ("Pending", "Running") or job.stopped:
        return
    recent = MetricSample.objects.filter(job=job, taken_at__gte=now - timedelta(seconds=SAMPLE_MIN_INTERVAL))
    if not recent.exists():
        sample_job(job, now)


@dataclass
class WorkerMetrics:
    """One Worker row of the Metrics tab. ``cpu``/``memory`` are the newest sample's values (None = not
    available); ``cpu_series``/``memory_series`` ``[(iso time, value)]`` oldest first."""

    pod: str
    role: str
    phase: str
    node: str
    restarts: int
    age_seconds: int | None
    cpu: float | None = None
    memory: int | None = None
    sampled_at: datetime | None = None
    cpu_series: list[tuple[str, float]] = field(default_factory=list)
    memory_series: list[tuple[str, float]] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {
            "pod": self.pod,
            "role": self.role,
            "phase": self.phase,
            "node": self.node,
            "restarts": self.restarts,
            "ageSeconds": self.age_seconds,
            "cpu": self.cpu,
            "memory": self.memory,
            "sampledAt": self.sampled_at.isoformat() if self.sampled_at else None,
            "cpuSeries": self.cpu_series,
            "memorySeries": self.memory_series,
        }


def worker_metrics(job, now: datetime | None = None) -> list[WorkerMetrics]:
    """Rows for every synced Pod of ``job`` with restarts, age and its stored samples."""
    from django.utils import timezone

    now = now or timezone.now()
    if job.finished_at is not None and job.finished_at < now:
        now = job.finished_at  # an ended job's Pod age stops at the end
    samples: dict[str, list[MetricSample]] = {}
    for s in MetricSample.objects.filter(job=job).order_by("taken_at", "pk"):
        samples.setdefault(s.pod_name, []).append(s)
    out = []
    for pod in Pod.objects.filter(task__job=job).select_related("task").order_by("task__order", "ordinal"):
        rows = samples.get(pod.name, [])
        latest = rows[-1] if rows else None
        created = pod.created_at or pod.started_at
        age = int((now - created).total_seconds()) if created else None
        out.append(
            WorkerMetrics(
                pod=pod.name,
                role=pod.task.display_role or pod.task.template_name,
                phase=worker_phase(job, pod.phase),
                node=pod.node,
                restarts=pod.restart_count,
                age_seconds=max(0, age) if age is not None else None,
                cpu=latest.cpu if latest else None,
                memory=latest.memory if latest else None,
                sampled_at=latest.taken_at if latest else None,
                cpu_series=[(s.taken_at.isoformat(), s.cpu) for s in rows if s.cpu is not None],
                memory_series=[(s.taken_at.isoformat(), float(s.memory)) for s in rows if s.memory is not None],
            )
        )
    return out


def format_bytes(value: float | None) -> str | None:
    """``1536`` -> ``1.5 KiB``; None stays None (the page prints "not available")."""
    if value is None:
        return None
    size = float(value)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(size) < 1024 or unit == "TiB":
            return f"{size:.0f} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    return f"{size:.1f} TiB"


# --- TensorBoard ----------------------------------------------------------------------------------------------


@dataclass
class TensorBoardSource:
    """Where the job's TensorBoard files are: ``container_dir`` (from ``tensorBoardDir``), ``host_dir`` when the
    console can read it, else ``reason`` (``unset`` | ``not_local`` | ``no_mount`` | ``missing``)."""

    container_dir: str = ""
    host_dir: str | None = None
    reason: str = ""


def tensorboard_source(job) -> TensorBoardSource:
    """Locate the head template's ``tensorBoardDir`` on this machine (local runtime, hostPath mounts)."""

    templates = [t for t in job.spec_section.get("tasks") or [] if isinstance(t, dict)]
    ordered = sorted(templates, key=lambda t: t.get("head") is not True)
    tb_dir = next((str(t.get("tensorBoardDir")) for t in ordered if t.get("tensorBoardDir")), "")
    if not tb_dir:
        return TensorBoardSource(reason="unset")
    head = job.tasks.select_related("cluster").filter(head=True).first() or job.tasks.select_related("cluster").first()
    if head is None or head.cluster.runtime != "local":
        return TensorBoardSource(tb_dir, reason="not_local")
    run_dir = run_path(job, tb_dir)  # only the current run's prefix
    if run_dir is None:
        return TensorBoardSource(tb_dir, reason="missing")
    host = next((h for t in ordered if (h := host_path_for(t, run_dir)) is not None), None)
    if host is None:
        return TensorBoardSource(run_dir, reason="no_mount")
    if not os.path.isdir(host):
        return TensorBoardSource(run_dir, reason="missing")
    return TensorBoardSource(run_dir, host)


def _downsample(points: list[tuple[int, float]], limit: int = MAX_POINTS) -> list[tuple[int, float]]:
    if len(points) <= limit:
        return points
    step = len(points) / limit
    out = [points[int(i * step)] for i in range(limit - 1)]
    out.append(points[-1])
    return out


def read_scalars(log_dir: str, limit: int = MAX_POINTS) -> dict[str, list[tuple[int, float]]]:
    """All scalar series under ``log_dir`` (searched recursively, one run per directory holding event files):
    ``{tag: [(step, value), ...]}`` sorted by step, downsampled to ``limit`` points. With several runs the tag is
    prefixed by the run's relative directory (``run1/train/loss``). Unreadable files are skipped."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    runs = []
    for root, _dirs, files in os.walk(log_dir):
        if any("tfevents" in f for f in files):
            runs.append(root)
    runs.sort()
    out: dict[str, list[tuple[int, float]]] = {}
    for run in runs:
        acc = EventAccumulator(run, size_guidance={"scalars": 0})
        try:
            acc.Reload()
        except Exception:  # noqa: BLE001 - a corrupt or half-written file must not break the page
            continue
        rel = os.path.relpath(run, log_dir)
        for tag in acc.Tags().get("scalars", []):
            points = sorted(((int(e.step), float(e.value)) for e in acc.Scalars(tag)), key=lambda p: p[0])
            name = tag if len(runs) == 1 or rel == "." else f"{rel}/{tag}"
            out[name] = _downsample(points, limit)
            if len(out) >= MAX_TAGS:
                return out
    return out


def sparkline_svg(values: list[float], width: int = 220, height: int = 48, label: str = "") -> str:
    """A small inline SVG polyline of ``values`` (numbers only; ``label`` is escaped into ``<title>``).
    Returns "" for no values."""
    import math

    vals = [v for v in values if v is not None and math.isfinite(v)]
    if not vals:
        return ""
    lo, hi = min(vals), max(vals)
    span = (hi - lo) or 1.0
    pad = 3
    n = len(vals)
    pts = []
    for i, v in enumerate(vals):
        x = pad + (width - 2 * pad) * (i / (n - 1) if n > 1 else 0.5)
        y = height - pad - (height - 2 * pad) * ((v - lo) / span if hi != lo else 0.5)
        pts.append(f"{x:.1f},{y:.1f}")
    last_x, last_y = pts[-1].split(",")
    return (
        f'<svg class="sparkline" xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}" role="img" aria-label="{escape(label)}">'
        f"<title>{escape(label)}</title>"
        f'<polyline fill="none" stroke="#2563eb" stroke-width="1.5" points="{" ".join(pts)}"/>'
        f'<circle cx="{last_x}" cy="{last_y}" r="2.2" fill="#2563eb"/></svg>'
    )


@dataclass
class ScalarChart:
    """One TensorBoard tag: last step/value, min/max and its sparkline SVG."""

    tag: str
    points: int
    last_step: int
    last_value: float
    minimum: float
    maximum: float
    svg: str

    def to_dict(self) -> dict[str, Any]:
        return {
            "tag": self.tag,
            "points": self.points,
            "lastStep": self.last_step,
            "lastValue": self.last_value,
            "min": self.minimum,
            "max": self.maximum,
        }


def scalar_charts(scalars: dict[str, list[tuple[int, float]]]) -> list[ScalarChart]:
    out = []
    for tag in sorted(scalars):
        points = scalars[tag]
        if not points:
            continue
        values = [v for _, v in points]
        out.append(
            ScalarChart(
                tag=tag,
                points=len(points),
                last_step=points[-1][0],
                last_value=values[-1],
                minimum=min(values),
                maximum=max(values),
                svg=sparkline_svg(values, label=tag),
            )
        )
    return out


def job_metrics(job, now: datetime | None = None, sample: bool = True) -> dict[str, Any]:
    """Everything the Metrics tab and ``GET /api/v1/jobs/<name>/metrics/`` show.

    ``{"runtimeSeconds", "startTime", "endTime", "attempt", "restarts" (sum), "metricsAvailable" (any sample
    stored), "workers": [WorkerMetrics], "tensorboard": {"dir", "readable", "reason", "charts": [ScalarChart]}}``.
    """
    from django.utils import timezone

    now = now or timezone.now()
    if sample:
        maybe_sample(job, now)
    workers = worker_metrics(job, now)
    source = tensorboard_source(job)
    charts: list[ScalarChart] = []
    reason = source.reason
    if source.host_dir:
        try:
            charts = scalar_charts(read_scalars(source.host_dir))
        except ImportError:
            reason = "no_reader"
        if not charts and not reason:
            reason = "empty"
    return {
        "runtimeSeconds": runtime_seconds(job, now),
        "startTime": job.started_at,
        "endTime": job.finished_at,
        "attempt": job.attempt,
        "restarts": sum(w.restarts for w in workers),
        "metricsAvailable": any(w.sampled_at is not None for w in workers),
        "workers": workers,
        "tensorboard": {
            "dir": source.container_dir,
            "readable": bool(source.host_dir),
            "reason": reason,
            "charts": charts,
        },
    }
