"""Status sync: runtime Pods -> Pod rows -> Task phases -> Job phase and conditions.

Runs every ``settings.RLARK_SYNC_INTERVAL`` seconds for every cluster (Celery beat task
``jobs.tasks.sync_all``) and right after every action (``jobs.tasks.reconcile_job``).

The steps: this module plans one cycle and asks every cluster at once (``jobs.observe.sync_fetch``); the Pod rows
are compared and written by ``jobs.observe.sync_rows``; the phase rules of Tasks and Jobs (Workers' failures,
``Succeeded``, ``Running``, ``Pending`` and its reason, the conditions) are ``jobs.observe.phases``, each rule with
its source (seeds 01 and 05, upstream-rlark 4.8, 5.4 and 6.1, peers 2.1 and 3.3). Succeeded/Failed are terminal:
the Tasks are then scaled to 0 to free resources, the full log of every Worker is archived first so logs stay
readable. A cluster whose runtime fails is marked ``offline`` with the reason and retried with back-off (peers 3.5
M1); the others go on.

Cost: it must not grow with the number of jobs (peers 4.4: status lag p95 <= 5 s at 1000 jobs), and one hung
cluster must not slow the others (peers 3.5 M1): every cluster is asked concurrently, under one deadline
(``jobs.observe.sync_fetch``), with one Pod list per namespace; log signals are read from a per-Pod cursor (stored
with them) and only where a marker can appear; the differences with the stored rows are computed in memory and
only what changed is written, in bulk, under the row locks of the jobs concerned (``controller.try_lock_jobs``).
A steady cycle costs a constant number of queries. Watches (``jobs.observe.watcher``) sync the jobs whose Pods
changed at once; this periodic cycle is the safety net.
"""

from __future__ import annotations

import dataclasses
import logging
import threading
import time
from collections import defaultdict
from typing import Any

from django.conf import settings
from django.db import transaction
from django.db.models import F, Q
from django.utils import timezone

from clusters.models import Cluster, Node
from clusters.runtime import registry
from clusters.runtime.base import PodInfo, Runtime, RuntimeFailure
from clusters.services.node_sync import apply_node_infos
from jobs.control import controller
from jobs.models import Job, Phase, Pod, Task
from jobs.observe import domain_ips, job_events, metrics, sync_fetch
from jobs.observe.status import get_condition
from jobs.observe.sync_rows import Changes, diff, fingerprint, keep_rows, pod_values, rows_of, tasks_of, write
from rlark_console.id_sets import id_in

logger = logging.getLogger(__name__)

# --- sync entry points ------------------------------------------------------------------------

_sync_guard = threading.Lock()
_last_full_sync = 0.0
# Failing clusters: cluster id -> (consecutive failures, monotonic time of the next attempt).
_backoff: dict[int, tuple[int, float]] = {}
BACKOFF_BASE = 5.0
BACKOFF_MAX = 60.0


def sync_all_clusters(force: bool = False) -> dict[str, Any]:
    """One sync cycle over every cluster. Skips (returns ``{"skipped": True}``) when another cycle
    runs in this process or one finished less than half an interval ago (a backlog of beat
    messages after a worker restart then costs nothing), unless ``force`` (which also ignores the
    back-off of failing clusters and reads every running header's new log lines at once).

    Returns ``{"clusters": {name: "online"|"offline: <reason>"}, "jobs": n, "stats": {...}}``.
    """
    global _last_full_sync
    interval = float(settings.RLARK_SYNC_INTERVAL)
    if not _sync_guard.acquire(blocking=force):
        return {"skipped": True}
    try:
        if not force and time.monotonic() - _last_full_sync < interval / 2:
            return {"skipped": True}
        _retry_lagging_reconciles()
        result = _sync(list(Cluster.objects.all()), _jobs_to_watch(), node_sync=True, force=force)
        _last_full_sync = time.monotonic()
        return result
    finally:
        _sync_guard.release()


def sync_job(job: Job) -> dict[str, Any]:
    """Sync one job now (after an action): list its Pods on each of its clusters and aggregate."""
    return sync_jobs([job])


def sync_jobs(jobs: list[Job]) -> dict[str, Any]:
    """Sync just these jobs now (after an action, or when a watch saw their Pods or StatefulSets change):
    their clusters only, no node sync, every running header's new log lines read at once."""
    if not jobs:
        return {"clusters": {}, "jobs": 0}
    clusters = list(Cluster.objects.filter(tasks__job__in=[j.pk for j in jobs]).distinct())
    return _sync(clusters, jobs, node_sync=False, force=True)


def _retry_lagging_reconciles() -> None:
    """Re-run reconcile for jobs whose last requested change was never applied (lost task)."""
    for job in Job.objects.filter(observed_generation__lt=F("generation")):
        try:
            controller.reconcile(job)
        except Exception:  # noqa: BLE001 - never let one job stop the sync
            logger.exception("reconcile retry of job %s", job.name)


def _jobs_to_watch() -> list[Job]:
    """Jobs still running, plus stopped/finished jobs whose Pods have not been seen gone yet."""
    alive = Pod.objects.exclude(phase__in=["Succeeded", "Failed", "Stopped"]).values("task__job")
    return list(
        Job.objects.filter(
            Q(stopped=False, phase__in=[Phase.PENDING, Phase.RUNNING])
            | Q(pk__in=alive)
            | Q(tasks__applied_replicas__gt=0)
        ).distinct()
    )


# --- one cycle --------------------------------------------------------------------------------


@dataclasses.dataclass
class _Cycle:
    """One cycle's inputs and what it learns on the way: the ``jobs`` and their Tasks (``tasks``, by job in
    ``tasks_by_job``), the ids of jobs ``due`` a metrics sample, the ``report`` (cluster name -> ``online`` |
    ``offline: <reason>``), the clusters ``down`` (id -> reason), the full Pod ``rows`` (Task id -> Pod name -> row)
    and the ``light`` rows a periodic cycle reads first (Task id -> Pod name -> (fingerprint, phase))."""

    clusters: list[Cluster]
    jobs: list[Job]
    node_sync: bool
    force: bool
    job_by_id: dict[int, Job]
    tasks: list[Task]
    tasks_by_job: dict[int, list[Task]]
    due: set[int]
    report: dict[str, str] = dataclasses.field(default_factory=dict)
    down: dict[int, str] = dataclasses.field(default_factory=dict)
    rows: dict[int, dict[str, Pod]] = dataclasses.field(default_factory=dict)
    light: dict[int, dict[str, tuple[str, str]]] = dataclasses.field(default_factory=lambda: defaultdict(dict))

    @classmethod
    def start(cls, clusters: list[Cluster], jobs: list[Job], node_sync: bool, force: bool) -> _Cycle:
        """The cycle over ``clusters`` and ``jobs``: their Tasks (one query) and the jobs due a metrics sample."""
        job_by_id = {job.pk: job for job in jobs}
        tasks = tasks_of(list(job_by_id), {c.pk: c for c in clusters}) if jobs else []
        tasks_by_job: dict[int, list[Task]] = defaultdict(list)
        for task in tasks:
            tasks_by_job[task.job_id].append(task)
        return cls(clusters, jobs, node_sync, force, job_by_id, tasks, tasks_by_job, set(metrics.jobs_due(jobs)))


@dataclasses.dataclass
class _Answers:
    """What the clusters answered: ``observed`` (job id -> Task name -> reported Pods), log ``signals`` ((task id,
    Pod name) -> signals just read), ``pod_metrics`` (Pod name -> metric -> value) and ``stats`` (runtime
    ``calls``, ``log_reads``)."""

    observed: dict[int, dict[str, list[PodInfo]]] = dataclasses.field(default_factory=lambda: defaultdict(dict))
    signals: dict[tuple[int, str], dict[str, Any]] = dataclasses.field(default_factory=dict)
    pod_metrics: dict[str, dict[str, float]] = dataclasses.field(default_factory=dict)
    refusals: dict[int, str] = dataclasses.field(default_factory=dict)  # task id -> why its Pods are not created
    stats: dict[str, Any] = dataclasses.field(default_factory=lambda: {"calls": 0, "log_reads": 0})


def _sync(clusters: list[Cluster], jobs: list[Job], node_sync: bool, force: bool = False) -> dict[str, Any]:
    """One cycle: per-cluster runtime calls in parallel under a deadline (``sync_fetch``), then the
    differences with the stored rows of every job computed in memory, and only what changed written,
    in bulk, under the row locks of the jobs it concerns. Nothing changed: a constant number of queries
    (jobs, Tasks, Pods, clusters), whatever the number of jobs.

    Returns ``{"clusters": {name: "online"|"offline: <reason>"|"offline (retry in <n>s)"}, "jobs": n, "stats":
    {calls, log_reads, steady_jobs, changed_jobs, seconds}}``."""
    started = time.monotonic()
    cycle = _Cycle.start(clusters, jobs, node_sync, force)
    results = sync_fetch.fetch_all(_plans(cycle), _row_loader(cycle))
    answers = _take_answers(cycle, results)
    changing = jobs if force else _changing_jobs(cycle, answers)
    changed = observe_jobs(
        changing,
        answers.observed,
        cycle.down,
        answers.signals,
        tasks_by_job=cycle.tasks_by_job,
        rows=cycle.rows,
        refusals=answers.refusals,
    )
    stats = answers.stats
    stats["steady_jobs"] = len(jobs) - len(changing)
    if answers.pod_metrics:
        metrics.record_sync_samples(cycle.due, answers.pod_metrics)
    try:
        domain_ips.assign(jobs, full=node_sync)  # seed 04: virtual IPs of Workers in their job's domain
    except Exception:  # noqa: BLE001 - never let IP bookkeeping stop the sync
        logger.exception("domain IP allocation")
    stats.update(changed_jobs=changed, seconds=round(time.monotonic() - started, 4))
    return {"clusters": cycle.report, "jobs": len(jobs), "stats": stats}


def _plans(cycle: _Cycle) -> list[sync_fetch.ClusterPlan]:
    """One plan per cluster that is asked this cycle: a failing cluster waits out its back-off in a periodic
    cycle (peers 3.5 M1: a dead cluster is retried with back-off), one whose runtime cannot be built is offline."""
    plans: list[sync_fetch.ClusterPlan] = []
    now_m = time.monotonic()
    for cluster in cycle.clusters:
        failures, retry_at = _backoff.get(cluster.pk, (0, 0.0))
        if cycle.node_sync and failures and now_m < retry_at and not cycle.force:
            cycle.down[cluster.pk] = cluster.status_message or "offline"
            cycle.report[cluster.name] = f"offline (retry in {retry_at - now_m:.0f}s)"
            continue
        try:
            runtime = registry.runtime_for(cluster)
            runtime.prepare_for_thread()
        except Exception as exc:  # noqa: BLE001
            _cluster_failed(cluster, exc, cycle.node_sync, cycle.down, cycle.report)
            continue
        plans.append(_plan(cycle, cluster, runtime))
    return plans


def _plan(cycle: _Cycle, cluster: Cluster, runtime: Runtime) -> sync_fetch.ClusterPlan:
    """``cluster``'s plan: the namespaces and Tasks to list (``TaskSnap``; logs are read for jobs that do not keep
    their rows), and the jobs whose Pod metrics are due, by namespace."""
    plan = sync_fetch.ClusterPlan(
        cluster.pk,
        cluster.name,
        runtime,
        cycle.node_sync,
        {},
        {},
        per_job=not cycle.node_sync and len(cycle.jobs) <= sync_fetch.PER_JOB_LIMIT,
        probe_all=cycle.force,
    )
    for task in cycle.tasks:
        if task.cluster_id != cluster.pk:
            continue
        job = cycle.job_by_id[task.job_id]
        plan.namespaces.setdefault(task.namespace, {})[task.name] = sync_fetch.TaskSnap(
            task.pk,
            job.pk,
            job.name,
            task.head,
            not keep_rows(job),
            job.started_at,
            0 if job.stopped else task.replicas,
        )
        if job.pk in cycle.due:
            names = plan.metrics_jobs.setdefault(task.namespace, [])
            if job.name not in names:
                names.append(job.name)
    return plan


def _row_loader(cycle: _Cycle):
    """The row loader ``sync_fetch.fetch_all`` calls while the clusters answer: ``() -> {(task id, Pod name):
    RowSnap}``; it also fills ``cycle.rows`` (a forced sync) or ``cycle.light`` (a periodic one)."""

    def load_rows() -> dict[tuple[int, str], sync_fetch.RowSnap]:
        """While the clusters answer: a targeted (forced) sync reads the few jobs' rows in full; a periodic cycle
        reads only what the log plan and the steady check need, and the full rows of changed jobs afterwards."""
        if not cycle.jobs:
            return {}
        if cycle.force:
            cycle.rows.update(rows_of(list(cycle.job_by_id)))
            return {
                (task_id, name): sync_fetch.RowSnap(row.uid, (row.container_state or {}).get("signals") or {})
                for task_id, by_name in cycle.rows.items()
                for name, row in by_name.items()
            }
        snaps = {}
        fields = ("task_id", "name", "uid", "fingerprint", "phase", "container_state__signals")
        for task_id, name, uid, fp, phase, row_signals in (
            Pod.objects.filter(task__job_id__in=id_in(cycle.job_by_id)).order_by().values_list(*fields)
        ):
            snaps[(task_id, name)] = sync_fetch.RowSnap(uid, row_signals if isinstance(row_signals, dict) else {})
            cycle.light[task_id][name] = (fp, phase)
        return snaps

    return load_rows


def _take_answers(cycle: _Cycle, results: dict[int, sync_fetch.ClusterResult]) -> _Answers:
    """Fold every cluster's result: a failed one is offline (its jobs keep their last known state); an answering
    one is online again (its nodes applied on a node sync), and its Pods, signals and metrics are collected."""
    answers = _Answers()
    by_pk = {c.pk: c for c in cycle.clusters}
    task_by_id = {t.pk: t for t in cycle.tasks}
    for cluster_id, result in results.items():
        cluster = by_pk[cluster_id]
        answers.stats["calls"] += result.calls
        answers.stats["log_reads"] += result.log_reads
        if not result.ok:
            failure = RuntimeFailure(result.error, result.reason)
            _cluster_failed(cluster, failure, cycle.node_sync, cycle.down, cycle.report)
            continue
        if cycle.node_sync and result.nodes is not None:
            apply_node_infos(cluster, result.nodes)  # sets online/degraded and the heartbeat
        else:
            _mark_cluster(cluster, Cluster.Status.ONLINE, "")
        _backoff.pop(cluster_id, None)
        cycle.report[cluster.name] = "online"
        for task_id, infos in result.pods.items():
            task = task_by_id[task_id]
            answers.observed[task.job_id][task.name] = infos
        answers.signals.update(result.signals)
        answers.pod_metrics.update(result.metrics or {})
        answers.refusals.update(result.refusals)
    return answers


def _changing_jobs(cycle: _Cycle, answers: _Answers) -> list[Job]:
    """The jobs a periodic cycle must observe (not :func:`_steady`); their full rows are read into ``cycle.rows``."""
    changing = [
        job
        for job in cycle.jobs
        if not _steady(
            job,
            cycle.tasks_by_job.get(job.pk, []),
            answers.observed.get(job.pk, {}),
            cycle.light,
            answers.signals,
            cycle.down,
        )
    ]
    cycle.rows.update(rows_of([j.pk for j in changing]) if changing else {})
    return changing


def _steady(
    job: Job,
    tasks: list[Task],
    pods_by_task: dict[str, list[PodInfo]],
    light: dict[int, dict[str, tuple[str, str]]],
    signals: dict[tuple[int, str], dict[str, Any]],
    down: dict[int, str],
) -> bool:
    """True when observing ``job`` again cannot change anything, so its rows need not be read: it runs (phase
    Running, every stored Pod Running, its clusters reachable now and before), and every Pod the runtimes report
    is one stored with the same fingerprint, with no new log signals. Nothing in the status rules depends on time
    alone for such a job (the image-pull grace and pending reasons concern Pods that are not Running)."""
    if job.stopped or job.phase != Phase.RUNNING or not tasks:
        return False
    reachable = get_condition(job.conditions, "ClusterReachable")
    if reachable is not None and reachable.get("status") == "False":
        return False
    for task in tasks:
        infos = pods_by_task.get(task.name)
        stored = light.get(task.pk, {})
        if task.cluster_id in down or not infos or len(infos) != len(stored):
            return False
        for info in infos:
            row = stored.get(info.name)
            if row is None or row[1] != "Running" or (task.pk, info.name) in signals:
                return False
            if row[0] != fingerprint(pod_values(info)):
                return False
    return True


def _cluster_failed(cluster: Cluster, exc: Exception, node_sync: bool, down: dict[int, str], report) -> None:
    """Offline with the reason; its jobs keep their last known state; back-off for the periodic sync."""
    reason = exc.reason if isinstance(exc, RuntimeFailure) else type(exc).__name__
    message = f"{reason}: {exc}"[:1000]
    logger.warning("cluster %s sync failed: %s", cluster.name, message)
    down[cluster.pk] = message
    report[cluster.name] = f"offline: {message}"
    _mark_cluster(cluster, Cluster.Status.OFFLINE, message)
    if node_sync:
        failures, _ = _backoff.get(cluster.pk, (0, 0.0))
        _backoff[cluster.pk] = (failures + 1, time.monotonic() + min(BACKOFF_MAX, BACKOFF_BASE * 2**failures))


def _mark_cluster(cluster: Cluster, status: str, message: str) -> None:
    """Offline with the reason on failure; back online after a failure (never overrides ``degraded``)."""
    if status == Cluster.Status.ONLINE and cluster.status != Cluster.Status.OFFLINE:
        return
    if cluster.status != status or cluster.status_message != message:
        fields = {"status": status, "status_message": message}
        if status == Cluster.Status.ONLINE:
            fields["last_sync_at"] = timezone.now()
        Cluster.objects.filter(pk=cluster.pk).update(**fields)
        if status == Cluster.Status.OFFLINE and cluster.runtime != Cluster.Runtime.LOCAL:
            # A local cluster's virtual nodes are its own configuration (LocalRuntime reports them back as they
            # are stored): flipping them offline would keep it degraded after the supervisor answers again.

            Node.objects.filter(cluster=cluster, online=True).update(online=False)
        for key, value in fields.items():
            setattr(cluster, key, value)


# --- writing an observation -----------------------------------------------------------------


def observe_job(job: Job, pods_by_task: dict[str, list[PodInfo]], down: dict[int, str] | None = None) -> Job:
    """Fold one observation of ``job``'s Pods into the database and recompute its status.

    ``pods_by_task`` maps Task name -> the Pods its runtime reported; Tasks whose cluster id
    is in ``down`` (cluster id -> reason) keep their last known state. No log is read here."""
    observe_jobs([job], {job.pk: pods_by_task}, down or {}, {})
    return job


def observe_jobs(
    jobs: list[Job],
    observed: dict[int, dict[str, list[PodInfo]]],
    down: dict[int, str],
    signals: dict[tuple[int, str], dict[str, Any]],
    tasks_by_job: dict[int, list[Task]] | None = None,
    rows: dict[int, dict[str, Pod]] | None = None,
    refusals: dict[int, str] | None = None,
) -> int:
    """Fold one observation of many jobs into the database; returns how many jobs changed.

    ``observed``: job id -> Task name -> reported Pods; ``signals``: (task id, Pod name) -> log signals just
    read; ``refusals``: task id -> the cluster's message for refusing to create its Pods (``sync_fetch``). First
    the differences are computed against the rows already loaded (``tasks_by_job``/``rows``, else
    loaded here); only jobs with a difference are then locked (``SELECT ... FOR UPDATE SKIP LOCKED``: a job
    being reconciled elsewhere is left for its own sync), re-read and written in bulk in one transaction."""
    if not jobs:
        return 0
    now = timezone.now()
    if tasks_by_job is None:
        tasks_by_job = defaultdict(list)
        for task in tasks_of([j.pk for j in jobs]):
            tasks_by_job[task.job_id].append(task)
    if rows is None:
        rows = rows_of([j.pk for j in jobs])
    dirty = []
    for job in jobs:
        try:
            if diff(
                job, tasks_by_job.get(job.pk, []), rows, observed.get(job.pk, {}), down, signals, now, refusals=refusals
            ):
                dirty.append(job.pk)
        except Exception:  # noqa: BLE001
            logger.exception("status aggregation of job %s", job.name)
    if not dirty:
        return 0
    terminal: list[Job] = []
    written = 0
    with transaction.atomic(), controller.try_lock_jobs(dirty) as locked:
        if not locked:
            return 0
        ids = [j.pk for j in locked]
        fresh_tasks: dict[int, list[Task]] = defaultdict(list)
        known = {t.cluster_id: t.cluster for ts in tasks_by_job.values() for t in ts}
        for task in tasks_of(ids, known):
            fresh_tasks[task.job_id].append(task)
        fresh_rows = rows_of(ids)
        all_changes: list[Changes] = []
        for job in locked:
            try:
                job_tasks = fresh_tasks.get(job.pk, [])
                changes = diff(job, job_tasks, fresh_rows, observed.get(job.pk, {}), down, signals, now, True, refusals)
            except Exception:  # noqa: BLE001
                logger.exception("status aggregation of job %s", job.name)
                continue
            if changes:
                all_changes.append(changes)
        events = job_events.events_of(all_changes)  # before the write: the jobs' phases are still the old ones
        written = write(all_changes, fresh_tasks, now)
        job_events.announce(events)
        terminal = [c.job for c in all_changes if c.terminal_now]
    for job in terminal:
        try:
            controller.reconcile(job)  # finished: scale every Task to 0 (upstream-rlark 4.8, goes further)
        except Exception:  # noqa: BLE001
            logger.exception("scale-down of finished job %s", job.name)
    fresh_by_id = {j.pk: j for j in locked}
    for job in jobs:  # callers holding these objects see what was written
        fresh = fresh_by_id.get(job.pk)
        if fresh is not None and fresh is not job:
            for field in ("phase", "message", "conditions", "started_at", "finished_at", "updated_at"):
                setattr(job, field, getattr(fresh, field))
    return written
