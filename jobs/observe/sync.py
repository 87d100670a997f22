"""Status sync: runtime Pods -> Pod rows -> Task phases -> Job phase and conditions.

Runs every ``settings.RLARK_SYNC_INTERVAL`` seconds for every cluster (Celery beat task
``jobs.tasks.sync_all``) and right after every action (``jobs.tasks.reconcile_job``).

Rules (seed 01-job-role-worker-task, upstream-rlark 4.8 and 6.1, with the "RLark Console goes
further" lines of 4.8, 5.4 and 6.2, peers 2.1/3.3, issue 7):

- Task: ``Stopped`` when the job is stopped; ``Failed`` when one of its Workers failed (below);
  ``Running`` when ready Pods >= replicas; else ``Pending`` with the first blocking reason.
- Worker failures (the Job fails and names the role, Worker and first error line):
  the header's log shows ``Run script exited with code N`` with N != 0 (``RunScriptFailed``),
  or the header exits non-zero before its run script ends (``HeaderExited``, with the last
  wrapper stage reached) or restarts (``HeaderRestarted``: a new Ray head loses the cluster);
  a Worker logs ``Ray worker process exited with code N`` with N != 0 or exits non-zero
  (``WorkerExited``); restarts reach ``RLARK_CRASHLOOP_LIMIT`` (``CrashLoop``); an image
  cannot be pulled for ``RLARK_IMAGE_PULL_GRACE`` seconds (``ImagePull``; shown as a
  condition from the first sync that sees it).
- Job: ``Succeeded`` when the header's log shows ``Run script exited with code 0``; ``Failed``
  on any failure above; ``Running`` when every Task is Running and the header logged
  ``Ray cluster is ready``; else ``Pending``. Succeeded/Failed are terminal: the Tasks are
  scaled to 0 to free resources, the full log of every Worker is archived first so
  logs stay readable.
- A cluster whose runtime fails is marked ``offline`` with the reason; the others go on.

Cost (issue 11: it must not grow with the number of jobs; issue 16: one hung cluster must not slow the others):
every cluster is asked concurrently, under one deadline (``jobs.observe.sync_fetch``), with one Pod list per
namespace; log signals are read from a per-Pod cursor (stored with them) and only where a marker can appear;
the differences with the stored rows are computed in memory and only what changed is written, in bulk, under
the row locks of the jobs concerned (``controller.try_lock_jobs``). A steady cycle costs a constant number of
queries. Watches (``jobs.observe.watcher``) sync the jobs whose Pods changed at once; this periodic cycle is
the safety net.
"""

from __future__ import annotations

import dataclasses
import hashlib
import logging
import threading
import time
from collections import defaultdict
from datetime import datetime
from typing import Any

from django.conf import settings
from django.db import transaction
from django.db.models import F, Q
from django.utils import timezone

from clusters.models import Cluster, Node
from clusters.runtime import registry
from clusters.runtime.base import IMAGE_PULL_REASONS, ContainerState, PodInfo, RuntimeFailure
from clusters.services.node_sync import apply_node_infos
from jobs.control import controller
from jobs.models import Job, Phase, Pod, Task
from jobs.observe import bulk, domain_ips, metrics, runtime_restart, sync_fetch
from jobs.observe.log_markers import CHECK_FAILED
from jobs.observe.status import get_condition, set_condition
from jobs.observe.sync_fetch import stale
from rlark_console.id_sets import id_in

logger = logging.getLogger(__name__)

CRASHLOOP_LIMIT = int(settings.RLARK_CRASHLOOP_LIMIT)
IMAGE_PULL_GRACE = float(settings.RLARK_IMAGE_PULL_GRACE)

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


def _keep_rows(job: Job) -> bool:
    """Stopped or finished: Pods that went away stay as rows (phase Stopped), logs are not read."""
    return job.stopped or job.phase in (Phase.STOPPED, *controller.TERMINAL)


def _sync(clusters: list[Cluster], jobs: list[Job], node_sync: bool, force: bool = False) -> dict[str, Any]:
    """One cycle: per-cluster runtime calls in parallel under a deadline (``sync_fetch``), then the
    differences with the stored rows of every job computed in memory, and only what changed written,
    in bulk, under the row locks of the jobs it concerns. Nothing changed: a constant number of queries
    (jobs, Tasks, Pods, clusters), whatever the number of jobs."""

    started = time.monotonic()
    job_by_id = {job.pk: job for job in jobs}
    tasks = _tasks_of(list(job_by_id), {c.pk: c for c in clusters}) if jobs else []
    rows: dict[int, dict[str, Pod]] = {}
    tasks_by_job: dict[int, list[Task]] = defaultdict(list)
    for task in tasks:
        tasks_by_job[task.job_id].append(task)
    due = set(metrics.jobs_due(jobs))

    plans: list[sync_fetch.ClusterPlan] = []
    report: dict[str, str] = {}
    down: dict[int, str] = {}
    by_pk = {c.pk: c for c in clusters}
    now_m = time.monotonic()
    for cluster in clusters:
        failures, retry_at = _backoff.get(cluster.pk, (0, 0.0))
        # peers M1: a dead cluster is retried with back-off
        if node_sync and failures and now_m < retry_at and not force:
            down[cluster.pk] = cluster.status_message or "offline"
            report[cluster.name] = f"offline (retry in {retry_at - now_m:.0f}s)"
            continue
        try:
            runtime = registry.runtime_for(cluster)
            runtime.prepare_for_thread()
        except Exception as exc:  # noqa: BLE001
            _cluster_failed(cluster, exc, node_sync, down, report)
            continue
        plan = sync_fetch.ClusterPlan(
            cluster.pk,
            cluster.name,
            runtime,
            node_sync,
            {},
            {},
            per_job=not node_sync and len(jobs) <= sync_fetch.PER_JOB_LIMIT,
            probe_all=force,
        )
        for task in tasks:
            if task.cluster_id != cluster.pk:
                continue
            job = job_by_id[task.job_id]
            plan.namespaces.setdefault(task.namespace, {})[task.name] = sync_fetch.TaskSnap(
                task.pk, job.pk, job.name, task.head, not _keep_rows(job), job.started_at
            )
            if job.pk in due:
                names = plan.metrics_jobs.setdefault(task.namespace, [])
                if job.name not in names:
                    names.append(job.name)
        plans.append(plan)

    light: dict[int, dict[str, tuple[str, str]]] = defaultdict(dict)  # task id -> Pod name -> (fingerprint, phase)

    def load_rows() -> dict[tuple[int, str], sync_fetch.RowSnap]:
        """While the clusters answer: a targeted (forced) sync reads the few jobs' rows in full; a periodic cycle
        reads only what the log plan and the steady check need, and the full rows of changed jobs afterwards."""
        if not jobs:
            return {}
        if force:
            rows.update(_rows_of(list(job_by_id)))
            return {
                (task_id, name): sync_fetch.RowSnap(row.uid, (row.container_state or {}).get("signals") or {})
                for task_id, by_name in rows.items()
                for name, row in by_name.items()
            }
        snaps = {}
        fields = ("task_id", "name", "uid", "fingerprint", "phase", "container_state__signals")
        for task_id, name, uid, fp, phase, row_signals in (
            Pod.objects.filter(task__job_id__in=id_in(job_by_id)).order_by().values_list(*fields)
        ):
            snaps[(task_id, name)] = sync_fetch.RowSnap(uid, row_signals if isinstance(row_signals, dict) else {})
            light[task_id][name] = (fp, phase)
        return snaps

    results = sync_fetch.fetch_all(plans, load_rows)
    observed: dict[int, dict[str, list[PodInfo]]] = defaultdict(dict)
    signals: dict[tuple[int, str], dict[str, Any]] = {}
    pod_metrics: dict[str, dict[str, float]] = {}
    stats = {"calls": 0, "log_reads": 0}
    task_by_id = {t.pk: t for t in tasks}
    for cluster_id, result in results.items():
        cluster = by_pk[cluster_id]
        stats["calls"] += result.calls
        stats["log_reads"] += result.log_reads
        if not result.ok:
            _cluster_failed(cluster, RuntimeFailure(result.error, result.reason), node_sync, down, report)
            continue
        if node_sync and result.nodes is not None:
            apply_node_infos(cluster, result.nodes)  # sets online/degraded and the heartbeat
        else:
            _mark_cluster(cluster, Cluster.Status.ONLINE, "")
        _backoff.pop(cluster_id, None)
        report[cluster.name] = "online"
        for task_id, infos in result.pods.items():
            task = task_by_id[task_id]
            observed[task.job_id][task.name] = infos
        signals.update(result.signals)
        pod_metrics.update(result.metrics or {})

    changing = jobs
    if not force:
        changing = [
            job
            for job in jobs
            if not _steady(job, tasks_by_job.get(job.pk, []), observed.get(job.pk, {}), light, signals, down)
        ]
        rows.update(_rows_of([j.pk for j in changing]) if changing else {})
    changed = observe_jobs(changing, observed, down, signals, tasks_by_job=tasks_by_job, rows=rows)
    stats["steady_jobs"] = len(jobs) - len(changing)
    if pod_metrics:
        metrics.record_sync_samples(due, pod_metrics)
    try:
        domain_ips.assign(jobs, full=node_sync)  # seed 04: virtual IPs of Workers in their job's domain
    except Exception:  # noqa: BLE001 - never let IP bookkeeping stop the sync
        logger.exception("domain IP allocation")
    stats.update(changed_jobs=changed, seconds=round(time.monotonic() - started, 4))
    return {"clusters": report, "jobs": len(jobs), "stats": stats}


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
            if row[0] != fingerprint(_pod_values(info)):
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


def _tasks_of(job_ids: list[int], clusters: dict[int, Cluster] | None = None) -> list[Task]:
    """The Tasks of these jobs (one query), each with its cluster attached from ``clusters`` (else one query for
    the few clusters): a join would decrypt the cluster's kubeconfig once per Task."""
    tasks = list(Task.objects.filter(job_id__in=id_in(job_ids)))
    clusters = dict(clusters or {})
    missing = {t.cluster_id for t in tasks} - set(clusters)
    if missing:
        clusters.update(Cluster.objects.in_bulk(missing))
    for task in tasks:
        task.cluster = clusters[task.cluster_id]
    return tasks


def _rows_of(job_ids: list[int]) -> dict[int, dict[str, Pod]]:
    """Task id -> Pod name -> row, for all these jobs in one query."""
    rows: dict[int, dict[str, Pod]] = defaultdict(dict)
    for pod in Pod.objects.filter(task__job_id__in=id_in(job_ids)).order_by("task_id", "ordinal"):
        rows[pod.task_id][pod.name] = pod
    return rows


# --- aggregation ------------------------------------------------------------------------------


def _iso(value: datetime | None) -> str | None:
    return value.isoformat() if value else None


_STATE_FIELDS = tuple(f.name for f in dataclasses.fields(ContainerState))


def _pod_values(info: PodInfo) -> dict[str, Any]:
    c = info.container
    state = {name: getattr(c, name) for name in _STATE_FIELDS}  # flat: much cheaper than dataclasses.asdict
    for key in ("started_at", "finished_at"):
        state[key] = _iso(state[key])
    exit_code = c.exit_code if c.exit_code is not None else c.last_exit_code
    if info.revision:
        state["revision"] = info.revision
    return {
        "ordinal": info.ordinal,
        "uid": info.uid,
        "node": info.node,
        "ip": info.ip,
        "phase": info.phase,
        "reason": info.reason[:128],
        "message": info.message,
        "container_state": state,
        "restart_count": c.restart_count,
        "exit_code": exit_code,
        "events": [
            {"type": e.type, "reason": e.reason, "message": e.message, "lastTime": _iso(e.last_time), "count": e.count}
            for e in info.events
        ],
        "created_at": info.created_at,
        "started_at": info.started_at or c.started_at,
        "finished_at": info.finished_at or c.finished_at,
    }


def fingerprint(values: dict[str, Any]) -> str:
    """32 hex chars identifying one report of a Pod (``_pod_values`` of it, before log signals are merged in)."""
    return hashlib.blake2b(repr(values).encode(), digest_size=16).hexdigest()


@dataclasses.dataclass
class _Failure:
    reason: str
    message: str
    task: str
    pod: str
    head: bool


@dataclasses.dataclass
class _Changes:
    """What one observation changes for one job (nothing written yet)."""

    job: Job
    creates: list[Pod] = dataclasses.field(default_factory=list)
    updates: dict[int, tuple[Pod, set[str]]] = dataclasses.field(default_factory=dict)
    deletes: list[int] = dataclasses.field(default_factory=list)
    tasks: dict[int, dict[str, Any]] = dataclasses.field(default_factory=dict)
    job_fields: dict[str, Any] = dataclasses.field(default_factory=dict)
    terminal_now: bool = False
    runtime_restarted: bool = False  # the runtime restarted Workers in place: a new attempt (runtime_restart)

    def __bool__(self) -> bool:
        return bool(
            self.creates or self.updates or self.deletes or self.tasks or self.job_fields or self.runtime_restarted
        )


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
) -> int:
    """Fold one observation of many jobs into the database; returns how many jobs changed.

    ``observed``: job id -> Task name -> reported Pods; ``signals``: (task id, Pod name) -> log signals just
    read. First the differences are computed against the rows already loaded (``tasks_by_job``/``rows``, else
    loaded here); only jobs with a difference are then locked (``SELECT ... FOR UPDATE SKIP LOCKED``: a job
    being reconciled elsewhere is left for its own sync), re-read and written in bulk in one transaction."""
    if not jobs:
        return 0
    now = timezone.now()
    if tasks_by_job is None:
        tasks_by_job = defaultdict(list)
        for task in _tasks_of([j.pk for j in jobs]):
            tasks_by_job[task.job_id].append(task)
    if rows is None:
        rows = _rows_of([j.pk for j in jobs])
    dirty = []
    for job in jobs:
        try:
            if _diff(job, tasks_by_job.get(job.pk, []), rows, observed.get(job.pk, {}), down, signals, now):
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
        for task in _tasks_of(ids, known):
            fresh_tasks[task.job_id].append(task)
        fresh_rows = _rows_of(ids)
        all_changes: list[_Changes] = []
        for job in locked:
            try:
                job_tasks = fresh_tasks.get(job.pk, [])
                changes = _diff(job, job_tasks, fresh_rows, observed.get(job.pk, {}), down, signals, now, locked=True)
            except Exception:  # noqa: BLE001
                logger.exception("status aggregation of job %s", job.name)
                continue
            if changes:
                all_changes.append(changes)
        written = _write(all_changes, fresh_tasks, now)
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


def _diff(
    job: Job,
    tasks: list[Task],
    rows: dict[int, dict[str, Pod]],
    pods_by_task: dict[str, list[PodInfo]],
    down: dict[int, str],
    signals: dict[tuple[int, str], dict[str, Any]],
    now: datetime,
    locked: bool = False,
) -> _Changes:
    """The Pod rows, Task and Job fields that ``pods_by_task`` changes (row objects are updated in place).

    ``locked``: the job's row is locked for writing, so a runtime restart is recorded on it at once
    (``runtime_restart.new_attempt``); otherwise it only marks the job as changed."""
    out = _Changes(job)
    keep_rows = _keep_rows(job)
    for task in tasks:
        if task.cluster_id in down:
            continue
        task_rows = rows.setdefault(task.pk, {})
        seen = set()
        for info in pods_by_task.get(task.name, []):
            seen.add(info.name)
            values = _pod_values(info)
            values["fingerprint"] = fingerprint(values)
            row = task_rows.get(info.name)
            new_signals = signals.get((task.pk, info.name))
            if new_signals is not None and not str(new_signals.get("key", "")).startswith(f"{info.uid}:"):
                new_signals = None
            if row is None:
                if new_signals is not None:
                    values["container_state"]["signals"] = new_signals
                row = Pod(task=task, name=info.name, **values)
                out.creates.append(row)
                task_rows[info.name] = row
                continue
            out.runtime_restarted = out.runtime_restarted or runtime_restart.restarted(row, info)
            old_signals = (row.container_state or {}).get("signals") if row.uid == info.uid else None
            if new_signals is not None or old_signals:
                values["container_state"]["signals"] = new_signals if new_signals is not None else old_signals
            replaced = (row.container_state or {}).get("replaced")
            same_revision = (row.container_state or {}).get("revision", "") == (info.revision or "")
            if replaced is None and row.uid and info.uid != row.uid and same_revision and _lost(job, task, row):
                replaced = {"uid": row.uid}
            if replaced is not None:  # kept for the rest of this attempt (a new attempt deletes the rows)
                values["container_state"]["replaced"] = replaced
            for key, value in values.items():
                if getattr(row, key) != value:
                    setattr(row, key, value)
                    if row.pk:
                        out.updates.setdefault(row.pk, (row, set()))[1].add(key)
        for name, row in list(task_rows.items()):
            if name in seen:
                continue
            if keep_rows:
                if row.phase not in ("Succeeded", "Failed", "Stopped"):
                    row.phase = "Stopped"
                    if row.pk:
                        out.updates.setdefault(row.pk, (row, set()))[1].add("phase")
            elif row.pk and _lost(job, task, row) and not _rolling(pods_by_task.get(task.name, []), row):
                # Gone between two syncs while the job ran (deleted, evicted, or Failed and replaced by its
                # StatefulSet before we looked): the Worker's Ray node is lost; keep the row to say so.
                row.phase, row.reason = "Failed", "PodDeleted"
                row.message = "the Pod disappeared while the job was running"
                row.container_state = {**(row.container_state or {}), "replaced": {"uid": row.uid}}
                out.updates.setdefault(row.pk, (row, set()))[1].update(
                    {"phase", "reason", "message", "container_state"}
                )
            else:
                if row.pk:
                    out.deletes.append(row.pk)
                else:
                    out.creates = [c for c in out.creates if c is not row]
                del task_rows[name]
    if out.runtime_restarted and not keep_rows:
        if not locked:
            return out  # recorded when the job is written (under its lock)
        runtime_restart.new_attempt(job, now)
        out.runtime_restarted = False
    out.tasks, out.job_fields, out.terminal_now = _aggregate(job, tasks, rows, down, now)
    return out


def _write(all_changes: list[_Changes], tasks_by_job: dict[int, list[Task]], now: datetime) -> int:
    """Write every job's changes in bulk: one DELETE, one INSERT and one UPDATE per table at most."""
    deletes = [pk for c in all_changes for pk in c.deletes]
    creates = [row for c in all_changes for row in c.creates]
    updates = [u for c in all_changes for u in c.updates.values()]
    if deletes:
        Pod.objects.filter(pk__in=deletes).delete()
    if creates:
        Pod.objects.bulk_create(creates)
    if updates:
        fields = sorted(set().union(*(f for _, f in updates)))
        bulk.bulk_update(Pod, [r for r, _ in updates], fields)
    task_rows, task_fields = [], set()
    for c in all_changes:
        for task in tasks_by_job.get(c.job.pk, []):
            if task.pk in c.tasks:
                for key, value in c.tasks[task.pk].items():
                    setattr(task, key, value)
                task_rows.append(task)
                task_fields.update(c.tasks[task.pk])
    if task_rows:
        bulk.bulk_update(Task, task_rows, sorted(task_fields))
    job_rows, job_fields = [], set()
    for c in all_changes:
        if c.job_fields:
            for key, value in c.job_fields.items():
                setattr(c.job, key, value)
            c.job.updated_at = now
            job_rows.append(c.job)
            job_fields.update(c.job_fields)
    if job_rows:
        bulk.bulk_update(Job, job_rows, sorted(job_fields | {"updated_at"}))
    return len(all_changes)


def _rolling(infos: list[PodInfo], row: Pod) -> bool:
    """The Task's other Pods come from a newer revision than ``row``: its StatefulSet is rolling an edit out."""
    old = (row.container_state or {}).get("revision", "")
    return any(i.revision and i.revision != old for i in infos)


def _lost(job: Job, task: Task, row: Pod) -> bool:
    """A Worker that was running in a running job (so a missing or new Pod means its Ray node died).

    Not lost: a Pod of an earlier attempt, or one an edit of its Task's Pod template replaces (its revision was
    rolled out, ``Task.rolled_revisions``; without revisions: created before ``Task.rolled_at``). With one
    replica no newer Pod shows that rollout: a sync between the delete and the create sees no Pod at all."""
    revision = (row.container_state or {}).get("revision")
    if revision:
        rolled = revision in (task.rolled_revisions or [])
    else:
        rolled = task.rolled_at is not None and row.created_at is not None and row.created_at <= task.rolled_at
    return (
        job.phase == Phase.RUNNING
        and row.phase == "Running"
        and not job.stopped
        and not _stale(job, row)
        and not rolled
    )


def _stale(job: Job, pod: Pod) -> bool:
    """A Pod created before the current attempt started (still terminating after a restart)."""

    return stale(job.started_at, pod.created_at)


def _signals(row: Pod) -> dict[str, Any]:
    return (row.container_state or {}).get("signals") or {}


def _worker_failures(job: Job, task: Task, row: Pod, now: datetime) -> list[_Failure]:
    """Failure rules for one Worker (module docstring)."""
    if _stale(job, row):
        return []
    out = []
    sig = _signals(row)
    state = row.container_state or {}
    who = f"{'Header' if task.head else 'Worker'} {row.name} (role {task.display_role or task.template_name})"
    detail = ""
    if sig.get("firstError"):
        detail = f"; first error: {sig['firstError']}"
    stage = f" after stage '{sig['lastStage']}'" if sig.get("lastStage") else ""
    if task.head:
        if sig.get("runExit") not in (None, 0):
            out.append(
                _Failure(
                    "RunScriptFailed",
                    f"{who}: run script exited with code {sig['runExit']}{detail}",
                    task.name,
                    row.name,
                    True,
                )
            )
        elif sig.get("runExit") is None and row.exit_code not in (None, 0):
            out.append(
                _Failure(
                    "HeaderExited", f"{who} exited with code {row.exit_code}{stage}{detail}", task.name, row.name, True
                )
            )
        elif sig.get("runExit") is None and state.get("replaced"):
            out.append(
                _Failure(
                    "HeaderReplaced",
                    f"{who} was replaced by a new Pod (the previous one was deleted or evicted): a new Ray head"
                    f" loses the cluster{stage}{detail}",
                    task.name,
                    row.name,
                    True,
                )
            )
        elif sig.get("runExit") is None and row.restart_count > 0 and not runtime_restart.by_runtime(row):
            out.append(
                _Failure(
                    "HeaderRestarted",
                    f"{who} restarted ({row.restart_count}x): a new Ray head loses the cluster{stage}{detail}",
                    task.name,
                    row.name,
                    True,
                )
            )
    else:
        if sig.get("rayExit") not in (None, 0):
            out.append(
                _Failure(
                    "WorkerExited",
                    f"{who}: Ray worker process exited with code {sig['rayExit']}{detail}",
                    task.name,
                    row.name,
                    False,
                )
            )
        elif state.get("replaced"):
            out.append(
                _Failure(
                    "WorkerReplaced",
                    f"{who} was replaced by a new Pod (the previous one failed, was deleted or evicted): its Ray"
                    f" node left the cluster{stage}{detail}",
                    task.name,
                    row.name,
                    False,
                )
            )
        elif row.exit_code not in (None, 0):
            restarts = f" (restarted {row.restart_count} times)" if row.restart_count else ""
            out.append(
                _Failure(
                    "WorkerExited",
                    f"{who} exited with code {row.exit_code}{restarts}{stage}{detail}",
                    task.name,
                    row.name,
                    False,
                )
            )
    if row.restart_count >= CRASHLOOP_LIMIT and not out:
        reason = state.get("reason") or state.get("last_reason") or "restarting"
        out.append(
            _Failure(
                "CrashLoop",
                f"{who}: container main restarted {row.restart_count} times ({reason}){detail}",
                task.name,
                row.name,
                task.head,
            )
        )
    return out


def _image_pull_problem(row: Pod) -> str | None:
    state = row.container_state or {}
    if state.get("state") == "waiting" and state.get("reason") in IMAGE_PULL_REASONS:
        return f"{row.name}: {state.get('reason')}: {state.get('message') or ''}".strip().rstrip(":")
    return None


def _pending_reason(task: Task, pods: list[Pod]) -> str:
    """The first thing blocking a Task's Workers (pending reasons, issue 7)."""
    by_ordinal = {p.ordinal: p for p in pods}
    for ordinal in range(task.replicas):
        pod = by_ordinal.get(ordinal)
        if pod is None:
            return f"Waiting for Pod {task.name}-{ordinal} to be created"
        if pod.phase == "Running" and (pod.container_state or {}).get("state") == "running":
            continue
        state = pod.container_state or {}
        if state.get("reason"):
            return f"{pod.name}: {state['reason']}{': ' + state['message'] if state.get('message') else ''}"
        if pod.reason or pod.message:
            return f"{pod.name}: {pod.reason}{': ' + pod.message if pod.message else ''}"
        warnings = [e for e in pod.events or [] if e.get("type") == "Warning"]
        if warnings:
            return f"{pod.name}: {warnings[-1].get('reason')}: {warnings[-1].get('message')}"
        return f"{pod.name}: {pod.phase}"
    return ""


def _aggregate(
    job: Job, tasks: list[Task], rows, down: dict[int, str], now: datetime
) -> tuple[dict[int, dict[str, Any]], dict[str, Any], bool]:
    """Recompute Task and Job status from the Pod rows (nothing is written).

    Returns ``(task id -> changed fields, changed Job fields, terminal_now)``; ``terminal_now`` is True when
    the job just reached Succeeded/Failed (the caller then archives logs and scales it down)."""
    conditions = list(job.conditions or [])
    failures: list[_Failure] = []
    succeeded = False
    ray_ready = None
    check_failed = False
    image_problems: list[str] = []
    ready_total = desired_total = 0
    task_values: dict[int, dict[str, Any]] = {}
    for task in tasks:
        pods = [p for p in rows.get(task.pk, {}).values() if not _stale(job, p)]  # none yet: cluster down
        ready = sum(1 for p in pods if _ready(p))
        nodes = sorted({p.node for p in pods if p.node})
        task_failures = []
        for pod in pods:
            task_failures += _worker_failures(job, task, pod, now)
            sig = _signals(pod)
            if task.head:
                ray_ready = bool(ray_ready or sig.get("rayReady"))
                check_failed = check_failed or bool(sig.get("clusterCheckFailed"))
                if sig.get("runExit") == 0:
                    succeeded = True
            if (problem := _image_pull_problem(pod)) is not None:
                image_problems.append(problem)
        failures += task_failures
        ready_total += min(ready, task.replicas)
        desired_total += task.replicas
        values = {"ready_replicas": ready}
        if nodes:
            values["observed_nodes"] = nodes
        if task.cluster_id in down:
            values = {"message": f"Cluster {task.cluster.name} is unreachable: {down[task.cluster_id]}"}
        task_values[task.pk] = {"failures": task_failures, "values": values, "ready": ready, "pods": pods}

    # Image pull: a condition from the first sync that sees it, a failure after the grace period.
    if image_problems:
        conditions = set_condition(conditions, "ImagePullBackOff", True, "ImagePull", "; ".join(image_problems), now)
        since = get_condition(conditions, "ImagePullBackOff")["lastTransitionTime"]
        if (now - datetime.fromisoformat(since)).total_seconds() >= IMAGE_PULL_GRACE:
            failures.append(_Failure("ImagePull", f"Image cannot be pulled: {image_problems[0]}", "", "", False))
    elif get_condition(conditions, "ImagePullBackOff"):
        conditions = set_condition(conditions, "ImagePullBackOff", False, "ImagePulled", "", now)

    head_task = next((t for t in tasks if t.head), None)
    if head_task is None:
        ray_ready = True
    old_phase = job.phase
    phase, message = old_phase, job.message
    stopped = job.stopped or old_phase == Phase.STOPPED
    terminal = old_phase in controller.TERMINAL
    if not stopped and not terminal:
        all_ready = desired_total > 0 and all(task_values[t.pk]["ready"] >= t.replicas for t in tasks)
        if succeeded:
            phase, message = Phase.SUCCEEDED, "Run script exited with code 0"
        elif failures:
            failures.sort(key=lambda f: not f.head)
            phase, message = Phase.FAILED, failures[0].message
        elif all_ready and (ray_ready or old_phase == Phase.RUNNING):
            phase, message = Phase.RUNNING, f"All {desired_total} Workers running"
        else:
            phase = Phase.PENDING
            blocking = next(
                (
                    _pending_reason(t, task_values[t.pk]["pods"])
                    for t in tasks
                    if task_values[t.pk]["ready"] < t.replicas
                ),
                "",
            )
            if all_ready:
                message = "All Workers started; waiting for the Ray cluster to form"
            else:
                message = f"Waiting for Workers: {ready_total}/{desired_total} ready" + (
                    f" ({blocking})" if blocking else ""
                )
        conditions = set_condition(
            conditions,
            "WorkersReady",
            all_ready,
            "AllWorkersReady" if all_ready else "WorkersNotReady",
            f"{ready_total}/{desired_total} Workers ready",
            now,
        )
        if ray_ready is not None and head_task is not None:
            conditions = set_condition(
                conditions,
                "RayClusterReady",
                bool(ray_ready) and not check_failed,  # seed 05: a failed check hides behind "ready"
                ("RayClusterCheckFailed" if check_failed else "RayClusterReady") if ray_ready else "WaitingForRay",
                (CHECK_FAILED if check_failed else "Ray cluster is ready")
                if ray_ready
                else "The header has not logged 'Ray cluster is ready' yet",
                now,
            )
        if phase == Phase.SUCCEEDED:
            conditions = set_condition(conditions, "Succeeded", True, "RunScriptSucceeded", message, now)
        if phase == Phase.FAILED:
            conditions = set_condition(conditions, "Failed", True, failures[0].reason, message, now)

    down_names = sorted({t.cluster.name for t in tasks if t.cluster_id in down})
    if down_names:
        conditions = set_condition(
            conditions, "ClusterReachable", False, "ClusterOffline", f"Unreachable: {', '.join(down_names)}", now
        )
    elif get_condition(conditions, "ClusterReachable"):
        conditions = set_condition(conditions, "ClusterReachable", True, "ClusterOnline", "", now)

    # Task phases.
    failed_tasks = {f.task for f in failures}
    task_changes: dict[int, dict[str, Any]] = {}
    for task in tasks:
        info = task_values[task.pk]
        values = dict(info["values"])
        if task.cluster_id not in down:
            if stopped:
                values.update(phase=Phase.STOPPED, message="")
            elif phase == Phase.SUCCEEDED or (terminal and old_phase == Phase.SUCCEEDED):
                values.update(phase=Phase.SUCCEEDED, message="")
            elif phase == Phase.FAILED and task.name in failed_tasks and info["failures"]:
                values.update(phase=Phase.FAILED, message=info["failures"][0].message)
            elif phase == Phase.FAILED or terminal:
                values.update(phase=task.phase if task.phase == Phase.FAILED else Phase.STOPPED)
                values.setdefault("message", task.message if task.phase == Phase.FAILED else "")
            elif info["ready"] >= task.replicas and task.replicas > 0:
                values.update(phase=Phase.RUNNING, message="")
            else:
                values.update(phase=Phase.PENDING, message=_pending_reason(task, info["pods"]))
        changes = {k: v for k, v in values.items() if getattr(task, k) != v}
        if changes:
            task_changes[task.pk] = changes

    job_fields: dict[str, Any] = {}
    if phase != old_phase:
        job_fields["phase"] = phase
        if phase in controller.TERMINAL:
            job_fields["finished_at"] = now
        if phase == Phase.RUNNING and job.started_at is None:
            job_fields["started_at"] = now
    if message != job.message:
        job_fields["message"] = message
    if conditions != (job.conditions or []):
        job_fields["conditions"] = conditions
    return task_changes, job_fields, phase != old_phase and phase in controller.TERMINAL


def _ready(pod: Pod) -> bool:
    state = pod.container_state or {}
    return pod.phase == "Running" and bool(state.get("ready") or state.get("state") == "running")
