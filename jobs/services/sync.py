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
- Only rows that changed are written (Pods in bulk).
"""

from __future__ import annotations

import dataclasses
import logging
import re
import threading
import time
from collections import defaultdict
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.db import transaction
from django.db.models import F, Q
from django.utils import timezone

from clusters.models import Cluster
from clusters.runtime.base import PodInfo, RuntimeError_
from jobs.models import Job, Phase, Pod, Task
from jobs.services import controller, domain_ips, metrics, runtime_restart
from jobs.services.status import get_condition, set_condition

logger = logging.getLogger(__name__)

CRASHLOOP_LIMIT = int(getattr(settings, "RLARK_CRASHLOOP_LIMIT", 3))
IMAGE_PULL_GRACE = float(getattr(settings, "RLARK_IMAGE_PULL_GRACE", 120))
IMAGE_PULL_REASONS = {"ErrImagePull", "ImagePullBackOff", "InvalidImageName", "ErrImageNeverPull"}
SIGNAL_TAIL = 400
PROBE_TAIL = 20

RUN_EXIT = re.compile(r"Run script exited with code (-?\d+)")
RAY_EXIT = re.compile(r"Ray worker process exited with code (-?\d+)")
RAY_READY = "Ray cluster is ready"
CHECK_FAILED = "Warning: Ray cluster check failed, proceeding anyway."
# Wrapper stage markers in order (upstream-rlark 5.1/5.3; seed 05-troubleshooting).
STAGES = (
    ("RLINF_NODE_RANK: ", "rank"),
    ("Executing prepare script...", "prepare"),
    ("Error: Ray CLI is not found.", "ray_missing"),
    ("Waiting for ", "waiting_nodes"),
    ("Connecting to Ray head at ", "connecting"),
    ("Head is reachable at ", "head_reachable"),
    ("Warning: Ray cluster check failed", "check_failed"),
    ("Ray cluster is ready", "ray_ready"),
    ("Executing run script...", "run"),
    ("Run script exited with code ", "run_exited"),
    ("Ray worker process exited with code ", "worker_exited"),
)
EXIT_STAGES = {"run_exited", "worker_exited"}
ERROR_LINE = re.compile(
    r"(?i)(\berror\b|exception|traceback|\bfailed\b|fatal|no such file|not found|permission denied|killed)"
)


# --- log signals ------------------------------------------------------------------------------


def log_signals(text: str) -> dict[str, Any]:
    """Facts the wrapper markers tell about one Worker's log.

    Returns ``{"runExit": int|None, "rayExit": int|None, "rayReady": bool,
    "clusterCheckFailed": bool, "lastStage": marker line|None, "firstError": line|None}``
    (the last occurrence of each exit marker counts; ``firstError`` is the first error-looking
    line after the last stage marker, or that marker itself when it is an error).
    """
    run_exit = ray_exit = None
    ready = check_failed = False
    last_stage = None
    last_stage_index = -1
    lines = text.splitlines()
    for index, line in enumerate(lines):
        stripped = line.strip()
        if (m := RUN_EXIT.search(stripped)) is not None:
            run_exit = int(m.group(1))
        if (m := RAY_EXIT.search(stripped)) is not None:
            ray_exit = int(m.group(1))
        if RAY_READY in stripped:
            ready = True
        if CHECK_FAILED in stripped:
            check_failed = True
        stage = next((key for marker, key in STAGES if stripped.startswith(marker)), None)
        if stage is not None:
            last_stage = stripped
            if stage not in EXIT_STAGES:
                last_stage_index = index
    first_error = None
    since = lines[last_stage_index].strip() if last_stage_index >= 0 else ""
    if since.startswith("Error:"):
        first_error = since
    else:
        tail = lines[last_stage_index + 1 :]
        for pos, line in enumerate(tail):
            stripped = line.strip()
            if (
                stripped
                and ERROR_LINE.search(stripped)
                and not stripped.startswith(CHECK_FAILED)
                and not any(stripped.startswith(marker) for marker, _ in STAGES)
            ):
                if stripped.startswith("Traceback"):  # a Python traceback: name its exception line
                    stripped = next((t.strip() for t in tail[pos + 1 :] if t.strip() and not t[:1].isspace()), stripped)
                first_error = stripped[:500]
                break
    return {
        "runExit": run_exit,
        "rayExit": ray_exit,
        "rayReady": ready,
        "clusterCheckFailed": check_failed,
        "lastStage": last_stage,
        "firstError": first_error,
    }


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
    messages after a worker restart then costs nothing), unless ``force``.

    Returns ``{"clusters": {name: "online"|"offline: <reason>"}, "jobs": n}``.
    """
    global _last_full_sync
    interval = float(getattr(settings, "RLARK_SYNC_INTERVAL", 10))
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
    clusters = list(Cluster.objects.filter(tasks__job=job).distinct())
    return _sync(clusters, [job], node_sync=False)


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


def _sync(clusters: list[Cluster], jobs: list[Job], node_sync: bool, force: bool = False) -> dict[str, Any]:
    targets: dict[int, set[tuple[str, int]]] = defaultdict(set)
    job_by_id = {job.pk: job for job in jobs}
    for task in Task.objects.filter(job__in=jobs).only("job_id", "cluster_id", "namespace"):
        targets[task.cluster_id].add((task.namespace, task.job_id))
    observed: dict[int, dict[str, list[PodInfo]]] = defaultdict(dict)
    down: dict[int, str] = {}
    report: dict[str, str] = {}
    now = time.monotonic()
    for cluster in clusters:
        failures, retry_at = _backoff.get(cluster.pk, (0, 0.0))
        if node_sync and failures and now < retry_at and not force:  # peers M1: a dead cluster is retried with back-off
            down[cluster.pk] = cluster.status_message or "offline"
            report[cluster.name] = f"offline (retry in {retry_at - now:.0f}s)"
            continue
        try:
            runtime = controller.runtime_for(cluster)
            if node_sync:
                _sync_nodes(cluster, runtime)
            for namespace, job_id in sorted(targets.get(cluster.pk, ())):
                for info in runtime.list_pods(namespace, job_by_id[job_id].name):
                    observed[job_id].setdefault(info.task, []).append(info)
        except Exception as exc:  # noqa: BLE001 - one failing cluster must not stop the others
            reason = exc.reason if isinstance(exc, RuntimeError_) else type(exc).__name__
            message = f"{reason}: {exc}"[:1000]
            logger.warning("cluster %s sync failed: %s", cluster.name, message)
            down[cluster.pk] = message
            report[cluster.name] = f"offline: {message}"
            _mark_cluster(cluster, Cluster.Status.OFFLINE, message)
            if node_sync:
                _backoff[cluster.pk] = (failures + 1, now + min(BACKOFF_MAX, BACKOFF_BASE * 2**failures))
            continue
        _backoff.pop(cluster.pk, None)
        report[cluster.name] = "online"
        _mark_cluster(cluster, Cluster.Status.ONLINE, "")
    for job in jobs:
        try:
            observe_job(job, observed.get(job.pk, {}), down)
            metrics.sample_during_sync(job)  # CPU/memory samples for the Metrics tab (H8, throttled)
        except Exception:  # noqa: BLE001
            logger.exception("status aggregation of job %s", job.name)
    try:
        domain_ips.assign(jobs, full=node_sync)  # seed 04: virtual IPs of Workers in their job's domain
    except Exception:  # noqa: BLE001 - never let IP bookkeeping stop the sync
        logger.exception("domain IP allocation")
    return {"clusters": report, "jobs": len(jobs)}


def _sync_nodes(cluster: Cluster, runtime) -> None:
    """Node sync through ``clusters.services.node_sync`` (which also sets the cluster's status and
    heartbeat); raises when it failed so the cluster's Pods are not listed this round."""
    try:
        from clusters.services.node_sync import sync_cluster_nodes
    except ImportError:  # pragma: no cover - node sync ships with the Kubernetes issue
        runtime.ping()
        return
    result = sync_cluster_nodes(cluster, runtime)
    if not result.ok:
        raise RuntimeError_(result.error, reason=result.reason or "internal")


def _mark_cluster(cluster: Cluster, status: str, message: str) -> None:
    """Offline with the reason on failure; back online after a failure (never overrides ``degraded``)."""
    cluster.refresh_from_db(fields=["status", "status_message"])
    if status == Cluster.Status.ONLINE and cluster.status != Cluster.Status.OFFLINE:
        return
    if cluster.status != status or cluster.status_message != message:
        fields = {"status": status, "status_message": message}
        if status == Cluster.Status.ONLINE:
            fields["last_sync_at"] = timezone.now()
        Cluster.objects.filter(pk=cluster.pk).update(**fields)
        if status == Cluster.Status.OFFLINE:
            from clusters.models import Node

            Node.objects.filter(cluster=cluster, online=True).update(online=False)
        for key, value in fields.items():
            setattr(cluster, key, value)


# --- aggregation ------------------------------------------------------------------------------


def _iso(value: datetime | None) -> str | None:
    return value.isoformat() if value else None


def _pod_values(info: PodInfo) -> dict[str, Any]:
    c = info.container
    state = dataclasses.asdict(c)
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


POD_FIELDS = [
    "ordinal",
    "uid",
    "node",
    "ip",
    "phase",
    "reason",
    "message",
    "container_state",
    "restart_count",
    "exit_code",
    "events",
    "created_at",
    "started_at",
    "finished_at",
]


@dataclasses.dataclass
class _Failure:
    reason: str
    message: str
    task: str
    pod: str
    head: bool


def observe_job(job: Job, pods_by_task: dict[str, list[PodInfo]], down: dict[int, str] | None = None) -> Job:
    """Fold one observation of ``job``'s Pods into the database and recompute its status.

    ``pods_by_task`` maps Task name -> the Pods its runtime reported; Tasks whose cluster id
    is in ``down`` (cluster id -> reason) keep their last known state.
    """
    down = down or {}
    terminal_now = False
    with controller.job_lock(job.pk):
        job.refresh_from_db()
        now = timezone.now()
        tasks = list(job.tasks.select_related("cluster"))
        rows = defaultdict(dict)
        for pod in Pod.objects.filter(task__job=job):
            rows[pod.task_id][pod.name] = pod
        keep_rows = job.stopped or job.phase in (Phase.STOPPED, *controller.TERMINAL)
        creates, updates, deletes = [], {}, []
        runtime_restarted = False
        for task in tasks:
            if task.cluster_id in down:
                continue
            seen = set()
            for info in pods_by_task.get(task.name, []):
                seen.add(info.name)
                values = _pod_values(info)
                row = rows[task.pk].get(info.name)
                if row is None:
                    row = Pod(task=task, name=info.name, **values)
                    creates.append(row)
                    rows[task.pk][info.name] = row
                    continue
                runtime_restarted = runtime_restarted or runtime_restart.restarted(row, info)
                if row.uid == info.uid:  # same instance: keep what its log told us
                    signals = (row.container_state or {}).get("signals")
                    if signals:
                        values["container_state"]["signals"] = signals
                replaced = (row.container_state or {}).get("replaced")
                same_revision = (row.container_state or {}).get("revision", "") == (info.revision or "")
                if replaced is None and row.uid and info.uid != row.uid and same_revision and _lost(job, row):
                    replaced = {"uid": row.uid}
                if replaced is not None:  # kept for the rest of this attempt (a new attempt deletes the rows)
                    values["container_state"]["replaced"] = replaced
                for key, value in values.items():
                    if getattr(row, key) != value:
                        setattr(row, key, value)
                        updates.setdefault(row.pk, (row, set()))[1].add(key)
            for name, row in list(rows[task.pk].items()):
                if name in seen:
                    continue
                if keep_rows:
                    if row.phase not in ("Succeeded", "Failed", "Stopped"):
                        row.phase = "Stopped"
                        updates.setdefault(row.pk, (row, set()))[1].add("phase")
                elif _lost(job, row) and not _rolling(pods_by_task.get(task.name, []), row):
                    # Gone between two syncs while the job ran (deleted, evicted, or Failed and replaced by its
                    # StatefulSet before we looked): the Worker's Ray node is lost; keep the row to say so.
                    row.phase, row.reason = "Failed", "PodDeleted"
                    row.message = "the Pod disappeared while the job was running"
                    row.container_state = {**(row.container_state or {}), "replaced": {"uid": row.uid}}
                    updates.setdefault(row.pk, (row, set()))[1].update(
                        {"phase", "reason", "message", "container_state"}
                    )
                else:
                    deletes.append(row.pk)
                    del rows[task.pk][name]

        active = not keep_rows
        if runtime_restarted and active:
            runtime_restart.new_attempt(job, now)
        if active:
            _read_signals(job, tasks, rows, updates, creates)
        with transaction.atomic():
            if deletes:
                Pod.objects.filter(pk__in=deletes).delete()
            if creates:
                Pod.objects.bulk_create(creates)
            if updates:
                fields = sorted(set().union(*(f for _, f in updates.values())))
                Pod.objects.bulk_update([r for r, _ in updates.values() if r.pk], fields)
            terminal_now = _aggregate(job, tasks, rows, down, now)
    if terminal_now:
        controller.reconcile(job)  # finished: scale every Task to 0 (upstream-rlark 4.8, goes further)
    return job


def _rolling(infos: list[PodInfo], row: Pod) -> bool:
    """The Task's other Pods come from a newer revision than ``row``: its StatefulSet is rolling an edit out."""
    old = (row.container_state or {}).get("revision", "")
    return any(i.revision and i.revision != old for i in infos)


def _lost(job: Job, row: Pod) -> bool:
    """A Worker that was running in a running job (so a missing or new Pod means its Ray node died)."""
    return job.phase == Phase.RUNNING and row.phase == "Running" and not job.stopped and not _stale(job, row)


def _stale(job: Job, pod: Pod) -> bool:
    """A Pod created before the current attempt started (still terminating after a restart)."""
    return bool(job.started_at and pod.created_at and pod.created_at < job.started_at - timedelta(seconds=2))


def _read_signals(job: Job, tasks: list[Task], rows, updates, creates) -> None:
    """Read log tails where a marker may have appeared: the header until the Ray cluster is
    ready and then a short tail each sync until ``Run script exited with code N`` (the header's
    wrapper idles after its run script, so its container does not exit), and any Worker whose
    container exited or restarted (once per container instance)."""
    created = {id(r) for r in creates}
    worker_exited = False
    head_row = None
    for task in tasks:
        for row in rows[task.pk].values():
            state = row.container_state or {}
            signals = state.get("signals") or {}
            key = f"{row.uid}:{row.restart_count}:{state.get('state')}"
            exited = state.get("state") == "terminated" or row.restart_count > 0 or row.phase in ("Succeeded", "Failed")
            need = exited and signals.get("key") != key
            changed = False
            if task.head:
                head_row = (task, row)
                if not need and row.phase == "Running" and not _stale(job, row):
                    if not signals.get("rayReady"):
                        need = True
                    elif signals.get("runExit") is None:
                        changed = _probe_run_exit(task, row, key)
            elif exited and not _stale(job, row):
                worker_exited = True
            if (need and _refresh_signals(task, row, key)) or changed:
                _touch(row, updates, created)
    if worker_exited and head_row is not None:
        task, row = head_row
        signals = (row.container_state or {}).get("signals") or {}
        if signals.get("runExit") is None and _refresh_signals(task, row, signals.get("key") or ""):
            _touch(row, updates, created)


def _probe_run_exit(task: Task, row: Pod, key: str) -> bool:
    """Cheap per-sync check of a running header: does the end of its log show the run script's exit?"""
    try:
        text = controller.runtime_for(task.cluster).read_log(task.namespace, row.name, tail_lines=PROBE_TAIL)
    except Exception:  # noqa: BLE001
        return False
    if not RUN_EXIT.search(text):
        return False
    return _refresh_signals(task, row, key)


def _touch(row: Pod, updates, created) -> None:
    if id(row) not in created and row.pk:
        updates.setdefault(row.pk, (row, set()))[1].add("container_state")


def _refresh_signals(task: Task, row: Pod, key: str) -> bool:
    """Read ``row``'s log tail (and the previous instance's when it restarted); True if changed."""
    try:
        runtime = controller.runtime_for(task.cluster)
        text = runtime.read_log(task.namespace, row.name, tail_lines=SIGNAL_TAIL)
        if row.restart_count > 0 and not (RUN_EXIT.search(text) or RAY_EXIT.search(text)):
            try:
                text = runtime.read_log(task.namespace, row.name, tail_lines=SIGNAL_TAIL, previous=True) + text
            except RuntimeError_:
                pass
    except Exception as exc:  # noqa: BLE001 - a log we cannot read just tells us nothing new
        logger.info("log of %s not readable: %s", row.name, exc)
        return False
    signals = {**log_signals(text), "key": key}
    state = dict(row.container_state or {})
    old = state.get("signals") or {}
    if old.get("key") == key:  # same container instance: what an earlier, longer read saw still holds
        signals["rayReady"] = signals["rayReady"] or bool(old.get("rayReady"))
        signals["clusterCheckFailed"] = signals["clusterCheckFailed"] or bool(old.get("clusterCheckFailed"))
    if state.get("signals") == signals:
        return False
    state["signals"] = signals
    row.container_state = state
    return True


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


def _aggregate(job: Job, tasks: list[Task], rows, down: dict[int, str], now: datetime) -> bool:
    """Recompute Task and Job status from the Pod rows; save what changed. True when the job just
    reached Succeeded/Failed (the caller then archives logs and scales it down)."""
    conditions = list(job.conditions or [])
    failures: list[_Failure] = []
    succeeded = False
    ray_ready = None
    check_failed = False
    image_problems: list[str] = []
    ready_total = desired_total = 0
    task_values: dict[int, dict[str, Any]] = {}
    for task in tasks:
        pods = [p for p in rows[task.pk].values() if not _stale(job, p)]
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
    changed_tasks = []
    changed_fields: set[str] = set()
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
        fields = [k for k, v in values.items() if getattr(task, k) != v]
        if fields:
            for key in fields:
                setattr(task, key, values[key])
            changed_tasks.append(task)
            changed_fields.update(fields)
    if changed_tasks:
        Task.objects.bulk_update(changed_tasks, sorted(changed_fields))

    job_fields = {}
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
    if job_fields:
        for key, value in job_fields.items():
            setattr(job, key, value)
        job_fields["updated_at"] = now
        # Conditional on the desired state we computed from: a stop/start/restart committed meanwhile
        # (by the web process) wins, and the next sync starts from it.
        written = Job.objects.filter(pk=job.pk, stopped=job.stopped, attempt=job.attempt).update(**job_fields)
        if not written:
            return False
    return phase != old_phase and phase in controller.TERMINAL


def _ready(pod: Pod) -> bool:
    state = pod.container_state or {}
    return pod.phase == "Running" and bool(state.get("ready") or state.get("state") == "running")
