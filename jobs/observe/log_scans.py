"""Stored log scans of a Job's Workers: the Diagnosis tab and the Run check read these, not 200 logs.

Each Worker Pod has one :class:`jobs.models.PodLogScan`: the ``log_markers.ScanState`` of its log so far, the Pod
instance it belongs to (``<uid>:<restart count>``) and the runtime's read cursor. :func:`refresh` brings records
up to date: it reads each log *from the stored cursor* (``Runtime.read_log_from``: a byte offset on the local
runtime, a timestamp on Kubernetes; the base runtime re-reads the log and skips the lines it has seen), feeds only
the new text to the state, and writes all records back in one statement. Reads run concurrently (at most
``worker_logs.PARALLEL``), one runtime per cluster; a Pod that is gone is scanned once from its archived log.

:func:`job_scans` is what a page calls. It loads the job's records (one query) and

- scans synchronously the Pods that have no usable record (none yet, another Pod instance, another state
  version, or for the Run check patterns the record did not track from the log's start), so a page is never
  empty;
- leaves records younger than ``RLARK_LOG_SCAN_MAX_AGE`` seconds (default 10) as they are: no runtime call;
- has older ones refreshed in the background (:func:`request_refresh`: the Celery task
  ``jobs.tasks.refresh_log_scans``, at most one per job per max age through a cache lock; in eager mode, tests,
  right here), and reports how old what it shows is (``Scans.as_of``) and that a refresh is on its way.

A record whose Pod had ended and whose log was read to the end is ``final`` and never read again.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.core.cache import cache
from django.db import transaction
from django.db.models import Prefetch
from django.utils import timezone

from clusters.runtime.base import PodNotFound, Runtime, RuntimeFailure
from jobs.models import Pod, PodLogScan
from jobs.observe.log_markers import LINE_BREAKS, LogScan, ScanState
from jobs.observe.worker_logs import archived_log, cluster_runtime, map_concurrently

logger = logging.getLogger(__name__)

READ_LIMIT = 4 << 20  # bytes asked per read (as the sync's)
MAX_READS = 16  # reads per Pod and refresh (64 MiB); the rest of a longer log comes with the next refresh
ENDED = ("Succeeded", "Failed")
ARCHIVE = "archive"  # the cursor of a scan of the archived log


def max_age() -> float:
    """Seconds a stored scan is shown without reading the log again (``RLARK_LOG_SCAN_MAX_AGE``, default 10)."""
    return float(settings.RLARK_LOG_SCAN_MAX_AGE)


def instance_of(pod: Pod) -> str:
    """The Pod instance a scan belongs to: a new Pod (uid) or a restarted container starts a new log."""
    return f"{pod.uid}:{pod.restart_count}"


@dataclass
class Scans:
    """What :func:`job_scans` gives a page: Pod name -> scan, the time of the oldest scan shown (None: no Pod),
    and whether a background refresh was asked for (some scans are older than the max age)."""

    scans: dict[str, LogScan] = field(default_factory=dict)
    links: dict[str, dict[str, list[str]]] = field(default_factory=dict)  # Pod -> W&B / SwanLab links (run_links)
    as_of: datetime | None = None
    refreshing: bool = False

    def to_dict(self) -> dict[str, Any]:
        return {"asOf": self.as_of, "refreshing": self.refreshing}


def pods_with_scans() -> Prefetch:
    """Prefetch a Task's ``pods`` with their stored scans joined in (``task.pods.all()``; no query of its own)."""
    return Prefetch("pods", queryset=Pod.objects.select_related("log_scan"))


def job_tasks(job) -> list:
    """The job's Tasks in order, with their cluster and their Pods with the Pods' stored scans (two queries): what
    :func:`job_scans` and the pages that call it need."""
    return list(job.tasks.select_related("cluster").prefetch_related(pods_with_scans()).order_by("order"))


def _records(job, pairs: list[tuple[Any, Pod]]) -> dict[int, PodLogScan]:
    """The stored scans of ``pairs``' Pods: joined in when they were loaded with :func:`pods_with_scans`, else one
    query."""
    related = Pod.log_scan.related
    if all(related.is_cached(pod) for _, pod in pairs):
        return {pod.pk: record for _, pod in pairs if (record := related.get_cached_value(pod)) is not None}
    return {r.pod_id: r for r in PodLogScan.objects.filter(pod__task__job_id=job.pk)}


def _usable(record: PodLogScan | None, pod: Pod, patterns: list[str] | None) -> ScanState | None:
    if record is None or record.instance != instance_of(pod):
        return None
    state = ScanState.from_json(record.state)
    if state is None or (patterns is not None and not state.tracks(patterns)):
        return None
    return state


def _sort(
    pairs: list[tuple[Any, Pod]], records: dict[int, PodLogScan], patterns: list[str] | None, now: datetime
) -> tuple[dict[int, ScanState], list, list]:
    """The usable states by Pod id, the Pods without a usable record, and those whose record is older than the
    max age (and not final)."""
    states: dict[int, ScanState] = {}
    missing, stale = [], []
    limit = now - timedelta(seconds=max_age())
    for task, pod in pairs:
        record = records.get(pod.pk)
        state = _usable(record, pod, patterns)
        if state is None:
            missing.append((task, pod))
            continue
        states[pod.pk] = state
        if not record.final and record.updated_at <= limit:
            stale.append((task, pod))
    return states, missing, stale


def job_scans(job, tasks: list, patterns: dict[str, str] | None = None, now: datetime | None = None) -> Scans:
    """The stored scans of every Pod of ``tasks`` (the job's Tasks with ``cluster`` and ``pods`` loaded), brought
    up to date as the module docstring says. ``patterns``: name -> user regex the caller reads in
    ``pattern_hits`` (the Run check's); a record that did not track them is scanned again from the start.
    Queries: none to read the records when ``tasks`` were loaded with :func:`pods_with_scans` (else one), plus one
    write when any log was read."""
    now = now or timezone.now()
    wanted = list(patterns.values()) if patterns else None
    pairs = [(task, pod) for task in tasks for pod in task.pods.all()]
    records = _records(job, pairs) if pairs else {}
    states, missing, stale = _sort(pairs, records, wanted, now)
    refreshing = False
    eager = getattr(settings, "CELERY_TASK_ALWAYS_EAGER", False)
    todo = missing + (stale if eager else [])
    if todo:
        records.update(refresh(job, todo, records, wanted, now=now))
        for _, pod in todo:
            states[pod.pk] = ScanState.from_json(records[pod.pk].state) or ScanState(wanted or ())
    if stale and not eager:
        request_refresh(job)
        refreshing = True
    out = Scans(refreshing=refreshing)
    for _, pod in pairs:
        out.scans[pod.name] = states[pod.pk].scan(patterns)
        out.links[pod.name] = dict(states[pod.pk].links or {})
    times = [records[pod.pk].updated_at for _, pod in pairs if pod.pk in records]
    out.as_of = min(times) if times else None
    return out


def refresh(
    job,
    pairs: list[tuple[Any, Pod]],
    records: dict[int, PodLogScan] | None = None,
    patterns: list[str] | None = None,
    now: datetime | None = None,
) -> dict[int, PodLogScan]:
    """Read what each Pod of ``pairs`` ((Task with ``cluster``, Pod)) appended to its log since its record's
    cursor, feed it, and write every record back in one statement. ``records``: the stored ones by Pod id
    (loaded when None); ``patterns``: the user regexes to track (None: what each record tracks already; a record
    that does not track them starts over). Returns the records written, by Pod id. A log that cannot be read
    leaves its record as it was (its time updated, so it is retried after the max age, not at once)."""
    if not pairs:
        return {}
    now = now or timezone.now()
    if records is None:
        records = {r.pod_id: r for r in PodLogScan.objects.filter(pod__in=[p.pk for _, p in pairs])}
    runtimes: dict[int, Runtime | None] = {}
    work: list[tuple[Pod, Runtime | None, str, ScanState | None, str]] = []
    for task, pod in pairs:
        runtime = cluster_runtime(runtimes, task)
        record = records.get(pod.pk)
        state = _usable(record, pod, None)
        if state is not None and patterns is not None and not state.tracks(patterns):
            state = None
        cursor = record.cursor if state is not None and record is not None else ""
        work.append((pod, runtime, task.namespace, state, cursor))

    def read(item: tuple[Pod, Runtime | None, str, ScanState | None, str]) -> PodLogScan:
        pod, runtime, namespace, state, cursor = item
        tracked = patterns if patterns is not None else list(state.patterns) if state is not None else []
        fresh = state is None
        state = state or ScanState(tracked)
        final = False
        try:
            if runtime is None:
                raise RuntimeFailure("no runtime for the cluster", reason="unreachable")
            if cursor == ARCHIVE:
                final = True  # the archive does not grow
            else:
                for _ in range(MAX_READS):
                    chunk = runtime.read_log_from(namespace, pod.name, cursor, READ_LIMIT)
                    if chunk.reset:  # a shorter log: a new container or a rotated file
                        state = ScanState(tracked)
                    state.feed(chunk.text)
                    cursor = chunk.cursor
                    if len(chunk.text) < READ_LIMIT // 2:  # read to the end
                        final = pod.phase in ENDED
                        break
                if final:  # the log ends here: an unfinished last line is its last line, read it once
                    tail = runtime.read_log(namespace, pod.name, tail_lines=1)
                    if tail and tail[-1:] not in LINE_BREAKS:
                        state.feed(tail.splitlines()[-1])
        except (RuntimeFailure, OSError, NotImplementedError) as exc:
            if fresh or isinstance(exc, PodNotFound):
                archived = archived_log(job.name, pod.name)
                if archived is not None:
                    state, cursor, final = ScanState(tracked).feed(archived), ARCHIVE, True
            if fresh and cursor != ARCHIVE:
                logger.info("log of %s not readable: %s", pod.name, exc)
        return PodLogScan(
            pod=pod,
            instance=instance_of(pod),
            cursor=cursor[:128],
            lines=state.lines,
            state=state.to_json(),
            final=final,
            updated_at=now,
        )

    written = map_concurrently(read, work, "rlark-log-scan")
    PodLogScan.objects.bulk_create(
        written,
        update_conflicts=True,
        unique_fields=["pod"],
        update_fields=["instance", "cursor", "lines", "state", "final", "updated_at"],
    )
    return {r.pod_id: r for r in written}


def refresh_stale(job, patterns: dict[str, str] | None = None) -> int:
    """Refresh the job's records older than the max age, and scan its Pods that have none (or whose record does not
    track ``patterns``, the Run check's: scanned again from the start); the background task's body. Returns how
    many logs were read."""
    wanted = list(patterns.values()) if patterns else None
    tasks = job_tasks(job)
    pairs = [(task, pod) for task in tasks for pod in task.pods.all()]
    records = _records(job, pairs)
    _, missing, stale = _sort(pairs, records, wanted, timezone.now())
    todo = missing + stale
    refresh(job, todo, records, wanted)
    return len(todo)


# --- the background refresh ----------------------------------------------------------------------------------


def _no_queue(job_id: int) -> None:
    logger.info("no log-scan refresh hook installed; job %s is scanned on its next page view", job_id)


_enqueue: Callable[[int], None] = _no_queue


def use_refresh_hook(enqueue: Callable[[int], None]) -> None:
    """Install how :func:`request_refresh` reaches the task queue (``jobs.apps`` gives it the Celery task
    ``jobs.tasks.refresh_log_scans``; this module never imports Celery)."""
    global _enqueue
    _enqueue = enqueue


def lock_key(job_id: int) -> str:
    return f"rlark:log-scan-refresh:{job_id}"


def request_refresh(job) -> bool:
    """Ask for a background refresh of ``job``'s scans, at most once per max age (a cache lock that expires on
    its own: a lost task is asked for again later). Enqueued after the current transaction commits. Returns
    whether this call asked."""
    if not cache.add(lock_key(job.pk), 1, timeout=max(1, int(max_age()))):
        return False
    job_id = job.pk

    def enqueue() -> None:
        try:
            _enqueue(job_id)
        except Exception:  # noqa: BLE001 - broker down: the next page view after the lock expires asks again
            logger.exception("could not enqueue the log-scan refresh of job %s", job_id)

    transaction.on_commit(enqueue)
    return True
