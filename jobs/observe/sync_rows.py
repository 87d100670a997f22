"""The Pod rows of a status sync: what one observation of a job's Pods changes, and the bulk write of it.

``diff`` compares the Pods a runtime reported (``PodInfo``) with the stored rows in memory, updates the row objects
in place and collects the creates, updates and deletes, then asks ``jobs.observe.phases.aggregate`` for the Task
and Job fields; ``write`` stores every job's changes with one DELETE, one INSERT and one UPDATE per table at most.
A row's ``fingerprint`` (of :func:`pod_values`) lets a steady cycle skip a job without reading its rows.

A Pod that disappears (or is replaced by a new one) while the job runs is a lost Worker, kept as a ``Failed``
row or marked ``replaced`` so the phase rules can say so; not lost: a Pod of an earlier attempt, or one an edit of
its Task's Pod template rolls out (``Task.rolled_revisions``).
"""

from __future__ import annotations

import dataclasses
import hashlib
from collections import defaultdict
from datetime import datetime
from typing import Any

from clusters.models import Cluster
from clusters.runtime.base import ContainerState, PodInfo
from jobs.control import controller
from jobs.models import Job, Phase, Pod, Task
from jobs.observe import bulk, progress, runtime_restart
from jobs.observe.phases import aggregate, is_stale
from rlark_console.id_sets import id_in


def keep_rows(job: Job) -> bool:
    """Stopped or finished: Pods that went away stay as rows (phase Stopped), logs are not read."""
    return job.stopped or job.phase in (Phase.STOPPED, *controller.TERMINAL)


def tasks_of(job_ids: list[int], clusters: dict[int, Cluster] | None = None) -> list[Task]:
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


def rows_of(job_ids: list[int]) -> dict[int, dict[str, Pod]]:
    """Task id -> Pod name -> row, for all these jobs in one query."""
    rows: dict[int, dict[str, Pod]] = defaultdict(dict)
    for pod in Pod.objects.filter(task__job_id__in=id_in(job_ids)).order_by("task_id", "ordinal"):
        rows[pod.task_id][pod.name] = pod
    return rows


def _iso(value: datetime | None) -> str | None:
    """``value`` in ISO 8601, or None."""
    return value.isoformat() if value else None


_STATE_FIELDS = tuple(f.name for f in dataclasses.fields(ContainerState))


def pod_values(info: PodInfo) -> dict[str, Any]:
    """The Pod row fields of one report: ``{ordinal, uid, node, ip, phase, reason, message, container_state (the
    container's state, flat, times in ISO 8601; ``revision`` when the runtime reports one), restart_count,
    exit_code (the current or last one), events, created_at, started_at, finished_at}``."""
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
    """32 hex chars identifying one report of a Pod (``pod_values`` of it, before log signals are merged in)."""
    return hashlib.blake2b(repr(values).encode(), digest_size=16).hexdigest()


@dataclasses.dataclass
class Changes:
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


def diff(
    job: Job,
    tasks: list[Task],
    rows: dict[int, dict[str, Pod]],
    pods_by_task: dict[str, list[PodInfo]],
    down: dict[int, str],
    signals: dict[tuple[int, str], dict[str, Any]],
    now: datetime,
    locked: bool = False,
    refusals: dict[int, str] | None = None,
) -> Changes:
    """The Pod rows, Task and Job fields that ``pods_by_task`` (Task name -> reported Pods) changes (row objects
    are updated in place; ``rows``: Task id -> Pod name -> row). Tasks whose cluster id is in ``down`` keep their
    rows; ``signals``: (task id, Pod name) -> log signals just read.

    ``locked``: the job's row is locked for writing, so a runtime restart is recorded on it at once
    (``runtime_restart.new_attempt``); otherwise it only marks the job as changed. ``refusals``: task id -> the
    cluster's message for refusing to create that Task's Pods (``phases.aggregate``)."""
    out = Changes(job)
    keep = keep_rows(job)
    for task in tasks:
        if task.cluster_id in down:
            continue
        task_rows = rows.setdefault(task.pk, {})
        infos = pods_by_task.get(task.name, [])
        for info in infos:
            _fold_reported(out, job, task, task_rows, info, signals.get((task.pk, info.name)))
        seen = {info.name for info in infos}
        for name, row in list(task_rows.items()):
            if name not in seen:
                _fold_gone(out, job, task, task_rows, row, infos, keep)
    if out.runtime_restarted and not keep:
        if not locked:
            return out  # recorded when the job is written (under its lock)
        runtime_restart.new_attempt(job, now)
        out.runtime_restarted = False
    out.tasks, out.job_fields, out.terminal_now = aggregate(job, tasks, rows, down, now, refusals)
    out.job_fields = {**out.job_fields, **progress.job_fields(job, tasks, pods_by_task, signals, now, rows)}
    return out


def _fold_reported(
    out: Changes, job: Job, task: Task, task_rows: dict[str, Pod], info: PodInfo, new_signals: dict | None
) -> None:
    """One reported Pod into its row (a new row in ``out.creates``; changed fields in ``out.updates``). Log signals
    of another Pod instance (their ``key`` is ``<uid>:...``) are dropped; a row's signals are kept while its uid
    stays; a Pod of the same revision under a new uid replaces a lost Worker (``container_state.replaced``)."""
    values = pod_values(info)
    values["fingerprint"] = fingerprint(values)
    row = task_rows.get(info.name)
    if new_signals is not None and not str(new_signals.get("key", "")).startswith(f"{info.uid}:"):
        new_signals = None
    if row is None:
        if new_signals is not None:
            values["container_state"]["signals"] = new_signals
        row = Pod(task=task, name=info.name, **values)
        out.creates.append(row)
        task_rows[info.name] = row
        return
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


def _fold_gone(
    out: Changes,
    job: Job,
    task: Task,
    task_rows: dict[str, Pod],
    row: Pod,
    infos: list[PodInfo],
    keep: bool,
) -> None:
    """A stored row whose Pod was not reported: ``Stopped`` when the job keeps its rows (stopped or finished);
    ``Failed``/``PodDeleted`` when a running Worker was lost (not by a rollout, ``infos`` being its Task's reported
    Pods); otherwise deleted."""
    if keep:
        if row.phase not in ("Succeeded", "Failed", "Stopped"):
            row.phase = "Stopped"
            if row.pk:
                out.updates.setdefault(row.pk, (row, set()))[1].add("phase")
    elif row.pk and _lost(job, task, row) and not _rolling(infos, row):
        # Gone between two syncs while the job ran (deleted, evicted, or Failed and replaced by its
        # StatefulSet before we looked): the Worker's Ray node is lost; keep the row to say so.
        row.phase, row.reason = "Failed", "PodDeleted"
        row.message = "the Pod disappeared while the job was running"
        row.container_state = {**(row.container_state or {}), "replaced": {"uid": row.uid}}
        out.updates.setdefault(row.pk, (row, set()))[1].update({"phase", "reason", "message", "container_state"})
    else:
        if row.pk:
            out.deletes.append(row.pk)
        else:
            out.creates = [c for c in out.creates if c is not row]
        del task_rows[row.name]


def write(all_changes: list[Changes], tasks_by_job: dict[int, list[Task]], now: datetime) -> int:
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
        and not is_stale(job, row)
        and not rolled
    )
