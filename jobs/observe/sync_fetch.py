"""The runtime side of one status-sync cycle: per cluster, concurrently, under a deadline.

For every cluster of the cycle one worker thread makes the cluster's calls and nothing else (no database):

- its nodes (``list_nodes``) when the cycle syncs nodes;
- its Pods: one ``list_pods_all(namespace)`` per namespace, whatever the number of jobs (``list_pods`` per job
  only for a targeted sync of a few jobs, or a runtime without the bulk call);
- the log sizes of its Workers where the runtime can tell them cheaply (local), then the *new* lines of the
  logs that matter (:func:`plan_log_reads`), read from each Pod's cursor (``Runtime.read_log_from``);
- one ``pod_metrics_all`` per namespace when metrics are due.

The caller waits at most ``RLARK_CLUSTER_SYNC_DEADLINE`` seconds (default 5) for all of them together. A cluster
that has not answered by then is reported as not answering and keeps its last known state; its thread finishes
on its own (each call has the client's own timeouts) and no second one is started for that cluster while it runs,
so a hung API server never delays the other clusters nor piles up threads.
"""

from __future__ import annotations

import dataclasses
import logging
import threading
import time
import zlib
from concurrent.futures import Future, ThreadPoolExecutor, wait
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.utils.translation import gettext as _

from clusters.runtime.base import PodInfo, Runtime, RuntimeFailure
from jobs.observe import progress
from jobs.observe.log_markers import merge_signals

logger = logging.getLogger(__name__)

SIGNAL_TAIL = 400  # lines of a restarted container's previous instance read once for its exit markers
PER_JOB_LIMIT = 5  # a targeted sync of at most this many jobs lists their Pods per job
READ_LIMIT = 4 << 20  # bytes of new log read per Worker and cycle; the rest comes next cycle
LOG_READ_PARALLEL = 8  # log reads in flight per cluster
LOG_BUDGET = 0.5  # share of the deadline a cycle spends reading logs; what is left is read next cycle


def deadline() -> float:
    """Seconds the cycle waits for every cluster together (``RLARK_CLUSTER_SYNC_DEADLINE``)."""
    return float(settings.RLARK_CLUSTER_SYNC_DEADLINE)


def probe_interval() -> float:
    """Seconds between two reads of a running header's new log lines on a runtime that cannot report log sizes
    (Kubernetes; ``RLARK_LOG_PROBE_INTERVAL``, default 30). Targeted syncs (after an action, a watch event) and
    forced cycles read at once."""
    return float(settings.RLARK_LOG_PROBE_INTERVAL)


def probes_per_cycle() -> int:
    """At most this many periodic header probes per cluster and cycle (``RLARK_LOG_PROBES_PER_CYCLE``, default
    100), the most overdue first; the rest wait for the next cycle. A steady cycle then reads a bounded number of
    logs whatever the number of running jobs; every header is still probed, later at fleet scale."""
    return max(1, int(settings.RLARK_LOG_PROBES_PER_CYCLE))


def probe_due_after(key: str) -> float:
    """Seconds after its last probe that the container ``key`` is due again: :func:`probe_interval` scaled by a
    fixed factor in [0.5, 1.5) from the key, so headers first read together (a forced cycle, a console restart)
    do not all come due in the same later cycle."""
    return probe_interval() * (0.5 + zlib.crc32(key.encode()) / 2**32)


@dataclasses.dataclass
class TaskSnap:
    """What a fetch thread needs to know about one Task (plain data, read before the threads start)."""

    task_id: int
    job_id: int
    job: str
    head: bool
    active: bool  # the job runs (not stopped, not finished): its logs matter
    started_at: datetime | None
    replicas: int = 0  # the Workers it should have now (0 when stopped): fewer Pods -> ask why (refusals)


@dataclasses.dataclass
class RowSnap:
    """The stored state of one Pod row the log plan depends on."""

    uid: str
    signals: dict[str, Any]


@dataclasses.dataclass
class ClusterPlan:
    """One cluster's part of a cycle."""

    cluster_id: int
    name: str
    runtime: Runtime
    node_sync: bool
    namespaces: dict[str, dict[str, TaskSnap]]  # namespace -> task name -> snapshot
    rows: dict[tuple[int, str], RowSnap]  # (task id, pod name) -> stored row
    per_job: bool = False
    probe_all: bool = False
    metrics_jobs: dict[str, list[str]] = dataclasses.field(default_factory=dict)  # namespace -> job names
    rows_ready: threading.Event = dataclasses.field(default_factory=threading.Event)

    @property
    def task_ids(self) -> set[int]:
        return {snap.task_id for tasks in self.namespaces.values() for snap in tasks.values()}


@dataclasses.dataclass
class ClusterResult:
    cluster_id: int
    ok: bool = True
    error: str = ""
    reason: str = ""
    nodes: list | None = None
    pods: dict[int, list[PodInfo]] = dataclasses.field(default_factory=dict)  # task id -> Pods
    signals: dict[tuple[int, str], dict[str, Any]] = dataclasses.field(default_factory=dict)  # (task, pod) -> new
    metrics: dict[str, dict[str, float]] | None = None
    refusals: dict[int, str] = dataclasses.field(default_factory=dict)  # task id -> the cluster's FailedCreate text
    log_reads: int = 0
    calls: int = 0
    seconds: float = 0.0


_executor: ThreadPoolExecutor | None = None
_executor_lock = threading.Lock()
_inflight: dict[tuple[int, str], tuple[Future, float]] = {}  # (cluster id, name) -> (running fetch, its start)
_probed: dict[int, dict[str, float]] = {}  # cluster id -> {container key: monotonic time of the last probe}


def _pool() -> ThreadPoolExecutor:
    global _executor
    with _executor_lock:
        if _executor is None:
            workers = int(settings.RLARK_SYNC_THREADS)
            _executor = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="rlark-sync")
        return _executor


def fetch_all(plans: list[ClusterPlan], rows_loader=None) -> dict[int, ClusterResult]:
    """Run every plan in its own thread and wait at most :func:`deadline` seconds for all of them.

    ``rows_loader`` (called here, in the caller's thread, while the clusters list their Pods) returns
    ``(task id, Pod name) -> RowSnap`` for every plan; the threads wait for it before they plan log reads, so the
    database read overlaps the network calls. Returns cluster id -> result; a cluster that did not answer in time
    (or is still busy with an earlier cycle's calls older than the deadline: hung) gets ``ok=False,
    reason="timeout"`` and a message naming the deadline. A cluster another cycle is reading right now (younger
    calls) is read once those have ended, within this cycle's deadline."""
    limit = deadline()
    started = time.monotonic()
    futures: dict[int, Future] = {}
    out: dict[int, ClusterResult] = {}
    queued: list[tuple[ClusterPlan, Future, float]] = []  # plans whose cluster another cycle is reading right now
    for plan in plans:
        busy = _inflight.get((plan.cluster_id, plan.name))
        if busy is not None and not busy[0].done():
            queued.append((plan, *busy))
            continue
        _submit(plan, futures, started)
    try:
        if rows_loader is not None:
            snaps = rows_loader()
            for plan in plans:
                ids = plan.task_ids
                plan.rows = {k: v for k, v in snaps.items() if k[0] in ids}
    finally:
        for plan in plans:
            plan.rows_ready.set()
    # A concurrent cycle (a POST's targeted sync beside the periodic one) waits for the other cycle's calls to the
    # same cluster, then makes its own: one reader per cluster at a time, and no cluster is called offline for
    # being read twice at once. Only calls older than the deadline (a hung cluster) fail this cycle at once.
    young = [future for _plan, future, since in queued if started - since < limit]
    if young:
        wait(young, timeout=max(0.0, limit - (time.monotonic() - started)))
    for plan, future, since in queued:
        if future.done():
            _submit(plan, futures, time.monotonic())
            continue
        out[plan.cluster_id] = ClusterResult(
            plan.cluster_id,
            ok=False,
            reason="timeout",
            error=_("the cluster has not answered for %(seconds)s s (sync deadline %(deadline)s s)")
            % {"seconds": f"{time.monotonic() - since:.0f}", "deadline": f"{limit:g}"},
        )
    wait(list(futures.values()), timeout=max(0.0, limit - (time.monotonic() - started)))
    names = {p.cluster_id: p.name for p in plans}
    for cluster_id, future in futures.items():
        if future.done():
            _inflight.pop((cluster_id, names[cluster_id]), None)
            try:
                out[cluster_id] = future.result()
            except Exception as exc:  # noqa: BLE001 - _fetch catches runtime errors; this is a bug, keep going
                logger.exception("sync fetch of cluster %s", cluster_id)
                out[cluster_id] = ClusterResult(cluster_id, ok=False, reason="internal", error=type(exc).__name__)
        else:
            out[cluster_id] = ClusterResult(
                cluster_id,
                ok=False,
                reason="timeout",
                error=_("the cluster did not answer within the sync deadline of %(deadline)s s")
                % {"deadline": f"{limit:g}"},
            )
    return out


def _submit(plan: ClusterPlan, futures: dict[int, Future], since: float) -> None:
    future = _pool().submit(_fetch, plan)
    _inflight[(plan.cluster_id, plan.name)] = (future, since)
    futures[plan.cluster_id] = future


def _fetch(plan: ClusterPlan) -> ClusterResult:
    result = ClusterResult(plan.cluster_id)
    t0 = time.monotonic()
    runtime = plan.runtime
    try:
        if plan.node_sync:
            result.nodes = runtime.list_nodes()
            result.calls += 1
        for namespace, tasks in plan.namespaces.items():
            by_name = _list(runtime, namespace, tasks, plan.per_job, result)
            for pods in by_name.values():
                pods.sort(key=lambda p: p.ordinal)
            for name, pods in by_name.items():
                result.pods[tasks[name].task_id] = pods
            _read_logs(plan, runtime, namespace, tasks, by_name, result)
            _read_refusals(runtime, namespace, tasks, by_name, result)
        for namespace, jobs in plan.metrics_jobs.items():
            try:
                metrics = runtime.pod_metrics_all(namespace, jobs)
                result.calls += 1
            except (RuntimeFailure, OSError, NotImplementedError):
                metrics = None
            if metrics is not None:
                result.metrics = {**(result.metrics or {}), **metrics}
    except Exception as exc:  # noqa: BLE001 - one failing cluster must not stop the others
        result.ok = False
        result.reason = exc.reason if isinstance(exc, RuntimeFailure) else "internal"
        result.error = str(exc) if isinstance(exc, RuntimeFailure) else f"{type(exc).__name__}: {exc}"
        if not isinstance(exc, RuntimeFailure):
            logger.exception("sync of cluster %s", plan.name)
    result.seconds = time.monotonic() - t0
    return result


def _list(
    runtime: Runtime, namespace: str, tasks: dict[str, TaskSnap], per_job: bool, result: ClusterResult
) -> dict[str, list[PodInfo]]:
    """Task name -> its Pods, from one list of the namespace (or one per job)."""
    infos: list[PodInfo] | None = None
    if not per_job:
        try:
            infos = runtime.list_pods_all(namespace)
            result.calls += 1
        except NotImplementedError:
            infos = None
    if infos is None:
        infos = []
        for job in sorted({t.job for t in tasks.values()}):
            infos += runtime.list_pods(namespace, job)
            result.calls += 1
    out: dict[str, list[PodInfo]] = {name: [] for name in tasks}
    for info in infos:
        if info.task in out and (not info.job or info.job == tasks[info.task].job):
            out[info.task].append(info)
    return out


def _read_refusals(
    runtime: Runtime,
    namespace: str,
    tasks: dict[str, TaskSnap],
    by_name: dict[str, list[PodInfo]],
    result: ClusterResult,
) -> None:
    """For the Tasks of running jobs with fewer Pods than replicas, the cluster's reason for not creating them:
    the newest ``FailedCreate`` Warning event of the Task's StatefulSet (the StatefulSet controller's, e.g. a
    ResourceQuota's ``exceeded quota`` refusal from the API server), into ``result.refusals`` (task id -> message,
    at most 2,000 characters). The reader is the one the Diagnosis's pending reasons use
    (``Runtime.warning_events``, one bounded list call per namespace, and only then). An event older than the job's
    current start (``TaskSnap.started_at``) is of an earlier run and is ignored. A cluster that cannot list events
    adds nothing (the Pods still sync)."""
    short = [name for name, snap in tasks.items() if snap.active and len(by_name.get(name, [])) < snap.replicas]
    if not short:
        return
    try:
        events = runtime.warning_events(namespace, "StatefulSet", short)
        result.calls += 1
    except (RuntimeFailure, OSError, NotImplementedError):
        return
    for name in short:
        since = tasks[name].started_at
        found = (e for e in events.get(name, []) if e.reason == "FailedCreate" and e.message)
        refused = next((e for e in found if not stale(since, e.last_time)), None)
        if refused is not None:
            result.refusals[tasks[name].task_id] = refused.message[:2000]


# --- log signals ----------------------------------------------------------------------------------------------


def container_key(info: PodInfo) -> str:
    """One container instance: a new Pod (uid) or a restart starts a new log."""
    return f"{info.uid}:{info.container.restart_count}"


def state_key(info: PodInfo) -> str:
    return f"{container_key(info)}:{info.container.state}:{info.phase}"


def exited(info: PodInfo) -> bool:
    c = info.container
    return c.state == "terminated" or c.restart_count > 0 or info.phase in ("Succeeded", "Failed")


def stale(started_at: datetime | None, created_at: datetime | None) -> bool:
    """A Pod created before the current attempt started (still terminating after a restart)."""
    return bool(started_at and created_at and created_at < started_at - timedelta(seconds=2))


def plan_log_reads(
    plan: ClusterPlan, tasks: dict[str, TaskSnap], pods: dict[str, list[PodInfo]], sizes: dict[str, int] | None
) -> list[tuple[TaskSnap, PodInfo, dict[str, Any]]]:
    """Which Workers' logs to read now, each with its stored signals (``{}`` for a new container instance).

    - a Worker whose container exited, restarted or finished: once per container state;
    - the header, until its run script's exit is known, when its log grew (runtimes that report sizes), else
      every cycle until ``Ray cluster is ready`` and then about every :func:`probe_interval` seconds
      (:func:`probe_due_after`; at most :func:`probes_per_cycle` per cycle, the most overdue first; all at once
      on a targeted or forced sync);
    - the header of a job one of whose Workers just exited (its run script is likely to end next);
    - a running Worker until its log shows Ray's ``Ray runtime started.`` (it joined; runtimes that report sizes:
      when its log grew).
    Nothing is read for stopped or finished jobs, or for Pods of an earlier attempt."""
    now = time.monotonic()
    probed = _probed.setdefault(plan.cluster_id, {})
    seen_keys: set[str] = set()
    out: list[tuple[TaskSnap, PodInfo, dict[str, Any]]] = []
    worker_exited_jobs: set[int] = set()
    heads: dict[int, tuple[TaskSnap, PodInfo, dict[str, Any]]] = {}
    periodic: list[tuple[float, tuple[TaskSnap, PodInfo, dict[str, Any]]]] = []  # (seconds overdue, read)
    for name, infos in pods.items():
        snap = tasks[name]
        if not snap.active:
            continue
        for info in infos:
            if stale(snap.started_at, info.created_at):
                continue
            row = plan.rows.get((snap.task_id, info.name))
            signals = dict(row.signals) if row is not None and row.uid == info.uid else {}
            if signals.get("key") != container_key(info):
                signals = {}  # a new container instance: its log starts over
            key = container_key(info)
            seen_keys.add(key)
            need = exited(info) and signals.get("stateKey") != state_key(info)
            if need and not snap.head:
                worker_exited_jobs.add(snap.job_id)
            if snap.head and info.phase == "Running" and signals.get("runExit") is None:
                heads[snap.job_id] = (snap, info, signals)
                if sizes is not None:
                    need = need or sizes.get(info.name, 0) != signals.get("size")
                elif not signals.get("rayReady") or plan.probe_all:
                    need = True
                elif (overdue := now - probed.get(key, 0.0) - probe_due_after(key)) >= 0 and not need:
                    periodic.append((overdue, (snap, info, signals)))
                    continue
            elif not snap.head and info.phase == "Running" and not signals.get("rayStarted"):
                # a Worker that has not joined Ray yet: its log says when it does (jobs.observe.ray_nodes)
                need = need or sizes is None or sizes.get(info.name, 0) != signals.get("size")
            if need:
                out.append((snap, info, signals))
    periodic.sort(key=lambda item: -item[0])
    out.extend(item for _, item in periodic[: probes_per_cycle()])
    chosen = {(s.task_id, i.name) for s, i, _ in out}
    for job_id in worker_exited_jobs:
        head = heads.get(job_id)
        if head is not None and (head[0].task_id, head[1].name) not in chosen:
            out.append(head)
    for key in list(probed):
        if key not in seen_keys:
            del probed[key]
    return out


def _read_logs(
    plan: ClusterPlan,
    runtime: Runtime,
    namespace: str,
    tasks: dict[str, TaskSnap],
    pods: dict[str, list[PodInfo]],
    result: ClusterResult,
) -> None:
    names = [i.name for name, infos in pods.items() if tasks[name].active for i in infos]
    sizes = runtime.log_sizes(namespace, names) if names else None
    if sizes is not None:
        result.calls += 1
    plan.rows_ready.wait(deadline())  # the stored rows, read by the caller meanwhile
    probed = _probed.setdefault(plan.cluster_id, {})
    reads = plan_log_reads(plan, tasks, pods, sizes)
    if not reads:
        return
    budget_end = time.monotonic() + deadline() * LOG_BUDGET  # the rest waits for the next cycle

    def read(item: tuple[TaskSnap, PodInfo, dict[str, Any]]) -> None:
        snap, info, signals = item
        if time.monotonic() >= budget_end:
            return
        key = container_key(info)
        text = ""
        try:
            if not signals and info.container.restart_count > 0:
                try:  # the previous instance's end tells how it exited
                    text = runtime.read_log(namespace, info.name, tail_lines=SIGNAL_TAIL, previous=True)
                except RuntimeFailure:
                    pass
            chunk = runtime.read_log_from(namespace, info.name, signals.get("cursor", ""), READ_LIMIT)
        except RuntimeFailure as exc:  # a log we cannot read just tells us nothing new
            logger.info("log of %s not readable: %s", info.name, exc)
            return
        probed[key] = time.monotonic()
        base = {} if chunk.reset else signals
        merged = progress.fold_step(merge_signals(base, text + chunk.text), text + chunk.text)
        merged.update(key=key, stateKey=state_key(info), cursor=chunk.cursor)
        if sizes is not None and info.name in sizes and len(chunk.text) < READ_LIMIT // 2:
            merged["size"] = sizes[info.name]  # read to the end: the next read waits until the log grows
        with lock:
            result.signals[(snap.task_id, info.name)] = merged
            result.log_reads += 1
            result.calls += 1

    lock = threading.Lock()
    if len(reads) == 1:
        read(reads[0])
        return
    with ThreadPoolExecutor(max_workers=min(LOG_READ_PARALLEL, len(reads)), thread_name_prefix="rlark-log") as pool:
        list(pool.map(read, reads))
