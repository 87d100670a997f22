"""Job controller: turns stored Jobs into Tasks on runtimes and handles lifecycle actions.

Every function is idempotent and safe to re-run. ``actor`` is the acting user (for the
audit log) or None.

Model (seed 01-job-role-worker-task; upstream-rlark 4.1, 4.2, 6.1, 6.2):

- One :class:`~jobs.models.Task` per ``spec.tasks[]`` template, named ``<job>-<template>``,
  on the cluster named by the template's ``cluster`` field, in that cluster's namespace,
  with ``rank_start`` = prefix sum of the replicas of the templates before it
  (``RLINF_NODE_RANK = rank_start + ordinal`` is computed by the wrapper scripts).
- Actions only change the desired state in the database (``stopped``, ``attempt``) and bump
  ``Job.generation``; :func:`reconcile` (a Celery task, see :func:`request_reconcile`) then
  drives every runtime to it and records ``observed_generation``. The periodic sync re-runs
  reconcile for any job whose ``observed_generation`` lags, so a killed worker loses nothing.
- RLark Console goes further than upstream (6.2): start and restart re-create every Worker
  (a new run, never a resume; they also work from Succeeded/Failed, ``attempt`` += 1; :func:`resume` is the one
  action that continues from a checkpoint, in a new run too), edits
  add Tasks for new templates and delete the Tasks of removed ones.
"""

from __future__ import annotations

import hashlib
import json
import logging
import threading
from collections import defaultdict
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from django.conf import settings
from django.db import connection, transaction
from django.db.models import F
from django.utils import timezone

from accounts.audit import record
from clusters.models import Cluster
from clusters.ray_auth import job_token
from clusters.runtime import registry
from clusters.runtime.base import Runtime, RuntimeFailure, TaskManifest
from domains.services import release_job
from jobs.control import log_archive, safety, tracking
from jobs.control.lifecycle import TERMINAL
from jobs.jobspec.checkpoints import header_template
from jobs.jobspec.conditions import set_condition
from jobs.jobspec.layout import task_layout
from jobs.jobspec.manifests import build_task_manifests
from jobs.jobspec.validator import MAX_VALUE_BYTES
from jobs.models import Job, Phase, Pod, Task
from storage.models import StorageClass

logger = logging.getLogger(__name__)

MAX_RUNS = 50  # earlier runs kept in Job.runs
MAX_RUN_SCRIPT_BYTES = MAX_VALUE_BYTES  # a resume's edited run script fits in one environment string

_locks_guard = threading.Lock()
_locks: dict[int, threading.RLock] = defaultdict(threading.RLock)
LOCK_SPACE = 0x524C4B << 32  # "RLK": PostgreSQL advisory lock key of a job = LOCK_SPACE + job id (bigint)


def _pg() -> bool:
    return connection.vendor == "postgresql"


def _local_lock(job_id: int) -> threading.RLock:
    with _locks_guard:
        return _locks[job_id]


@contextmanager
def job_lock(job_id: int) -> Iterator[None]:
    """Serialise reconcile, delete and the status sync's writes of one job, across threads *and* processes.

    On PostgreSQL a session-level advisory lock ``LOCK_SPACE + job_id`` is held for the block (every web
    replica and Celery worker shares it; a process that dies releases it with its connection), so what the
    block writes still commits at once, step by step (reconcile records its intent before each runtime call).
    An in-process ``RLock`` is taken as well (re-entrant; the only lock on SQLite, where one process serves).
    Many replicas, no double work."""
    lock = _local_lock(job_id)
    with lock:
        if not _pg():
            yield
            return
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_advisory_lock(%s)", [LOCK_SPACE + job_id])
        try:
            yield
        finally:
            try:
                with connection.cursor() as cursor:
                    cursor.execute("SELECT pg_advisory_unlock(%s)", [LOCK_SPACE + job_id])
            except Exception:  # noqa: BLE001 - e.g. an aborted transaction: closing the session frees the lock
                logger.warning("could not release the lock of job %s; closing the database connection", job_id)
                connection.close()


@contextmanager
def try_lock_jobs(job_ids: list[int]) -> Iterator[list[Job]]:
    """Inside a transaction: lock the Job rows of ``job_ids`` that nobody else is working on and yield them
    (fresh, ordered by id); jobs being reconciled (:func:`job_lock`) or changed by an action
    (``select_for_update``) are skipped, never waited for. PostgreSQL: ``FOR UPDATE SKIP LOCKED``, then
    ``pg_try_advisory_xact_lock`` on the rows got (both released at commit): two queries. Elsewhere: the
    in-process locks, tried without blocking."""
    if _pg():
        rows = list(Job.objects.select_for_update(skip_locked=True).filter(pk__in=job_ids).order_by("pk"))
        if not rows:
            yield []
            return
        with connection.cursor() as cursor:  # only the rows got: never a lock on a job we did not ask for
            cursor.execute(
                "SELECT id FROM unnest(%s::bigint[]) AS id WHERE pg_try_advisory_xact_lock(%s::bigint + id)",
                [[r.pk for r in rows], LOCK_SPACE],
            )
            free = {row[0] for row in cursor.fetchall()}
        yield [r for r in rows if r.pk in free]
        return
    held = []
    try:
        for job_id in sorted(job_ids):
            lock = _local_lock(job_id)
            if lock.acquire(blocking=False):
                held.append((job_id, lock))
        ids = [job_id for job_id, _ in held]
        yield list(Job.objects.filter(pk__in=ids).order_by("pk")) if ids else []
    finally:
        for _, lock in held:
            lock.release()


# --- the Job document -------------------------------------------------------------------------


def _set_spec_stopped(job: Job) -> None:
    """Keep the stored document's ``spec.stopped`` equal to ``job.stopped`` (the YAML tab shows it)."""
    doc = dict(job.spec or {})
    if isinstance(doc.get("spec"), dict) and doc["spec"].get("stopped") is not job.stopped:
        doc["spec"] = {**doc["spec"], "stopped": job.stopped}
        job.spec = doc


def task_plan(job: Job) -> list[dict[str, Any]]:
    """The Tasks ``job`` should have, in template order, from ``jobs.jobspec.layout.task_layout``.

    Returns ``[{"template", "name", "cluster", "head", "role", "display_role", "replicas",
    "rank_start", "order"}]``: ``name`` = ``<job>-<template>``, ``rank_start`` = prefix sum of
    the replicas of the templates before it (upstream-rlark 4.2; first match wins on duplicate
    template names, which the validator rejects anyway).
    """
    document = {**(job.spec or {}), "metadata": {**((job.spec or {}).get("metadata") or {}), "name": job.name}}
    plan, seen = [], set()
    for entry in task_layout(document):
        if not entry.template_name or entry.template_name in seen:
            continue
        seen.add(entry.template_name)
        plan.append(
            {
                "template": entry.template_name,
                "name": entry.task_name,
                "cluster": entry.cluster,
                "head": entry.head,
                "role": entry.role[:16],
                "display_role": entry.display_role[:128],
                "replicas": entry.replicas,
                "rank_start": entry.rank_start,
                "order": entry.order,
            }
        )
    return plan


def _manifests(job: Job, clusters: dict[str, Cluster]) -> dict[str, TaskManifest]:
    """Task name -> manifest, built by ``jobs.jobspec.manifests.build_task_manifests`` (shared by runtimes).

    Passes the job's own clusters, its SSH public keys (``spec.sshPublicKeys``, key lines), the
    console -> Kubernetes StorageClass names of the storage app, the attached RLinf config and the job's Ray
    token (``clusters.ray_auth``: derived, never stored) and its tracking credentials (``jobs.control.tracking``).
    """
    storage_classes = {
        sc.name: str((sc.parameters or {}).get("storage_class_name") or sc.name)
        for sc in StorageClass.objects.filter(provider=StorageClass.Provider.KUBERNETES)
    }
    keys = [k for k in job.spec_section.get("sshPublicKeys") or [] if isinstance(k, str)]
    document = {**(job.spec or {}), "spec": {**job.spec_section, "stopped": job.stopped}}
    resume_dir = str((job.resume or {}).get("dir") or "")
    if resume_dir:  # this run only: the Header runs the resume's script; the stored document is unchanged
        head = header_template(job.spec_section)
        tasks = [
            {**t, "runScript": job.resume.get("runScript") or t.get("runScript")} if t is head else t
            for t in job.spec_section.get("tasks") or []
        ]
        document["spec"]["tasks"] = tasks
    built = build_task_manifests(
        job.name,
        document,
        clusters=clusters,
        ssh_keys=keys,
        storage_classes=storage_classes,
        rlinf_config=job.rlinf_config,
        ray_auth_token=job_token(job.pk, job.created_at.isoformat()),
        resume_dir=resume_dir,
        tracking=tracking.job_env(job),
    )
    return {m.task: m for m in built}


# --- reconcile --------------------------------------------------------------------------------


@dataclass
class ReconcileHooks:
    """How "reconcile soon" reaches the task queue, without the controller knowing the queue.

    ``run_now(job_id)`` reconciles and syncs at once (eager mode, tests); ``enqueue(job_id)`` hands the job
    to a worker. The entry point that owns the queue installs them (``jobs.apps.JobsConfig.ready`` with the
    Celery task ``jobs.tasks.reconcile_job``); until then a reconcile is left to the periodic sync, which
    re-runs every job whose ``observed_generation`` lags."""

    run_now: Callable[[int], None]
    enqueue: Callable[[int], None]


def _no_queue(job_id: int) -> None:
    logger.warning("no reconcile hook installed; job %s waits for the periodic sync", job_id)


_hooks = ReconcileHooks(run_now=_no_queue, enqueue=_no_queue)


def use_reconcile_hooks(hooks: ReconcileHooks) -> None:
    """Install the task-queue hooks of :func:`request_reconcile` (once, at app start)."""
    global _hooks
    _hooks = hooks


def request_reconcile(job: Job) -> None:
    """Schedule a reconcile of ``job`` (the Celery task ``jobs.tasks.reconcile_job`` via :class:`ReconcileHooks`),
    then a status sync.

    Bumps ``job.generation`` so the periodic sync retries if the task is lost. With
    ``CELERY_TASK_ALWAYS_EAGER`` (tests) the reconcile runs right here, synchronously;
    otherwise it is enqueued after the current transaction commits (``transaction.on_commit``).
    """
    # Atomic increment: a caller holding an older copy of the row never moves the generation back (lost update).
    Job.objects.filter(pk=job.pk).update(generation=F("generation") + 1)
    job.generation = Job.objects.values_list("generation", flat=True).get(pk=job.pk)
    if getattr(settings, "CELERY_TASK_ALWAYS_EAGER", False):
        _hooks.run_now(job.pk)
        job.refresh_from_db()
        return
    job_id = job.pk
    transaction.on_commit(lambda: _enqueue(job_id))


def _enqueue(job_id: int) -> None:
    try:
        _hooks.enqueue(job_id)
    except Exception:  # broker down: the periodic sync picks the job up (generation lags)
        logger.exception("could not enqueue reconcile of job %s", job_id)


def reconcile(job: Job) -> None:
    """Bring the runtimes in line with ``job.spec``, ``job.stopped`` and ``job.attempt`` now.

    Steps: delete Tasks of removed templates (workload first, then the row); create/update the
    Task rows; apply every Task's manifest (replicas 0 when stopped or finished); re-create the
    Pods of Tasks that were running under an older attempt. Runtime errors are recorded on the
    Task (``message``) and leave ``observed_generation`` behind so the periodic sync retries.
    """
    with job_lock(job.pk):
        job.refresh_from_db()
        generation = job.generation
        errors = _reconcile_locked(job)
        if errors:
            logger.warning("reconcile of job %s left errors: %s", job.name, "; ".join(errors)[:2000])
        else:
            Job.objects.filter(pk=job.pk, observed_generation__lt=generation).update(observed_generation=generation)
            job.observed_generation = max(job.observed_generation, generation)


def _reconcile_locked(job: Job) -> list[str]:
    plan = task_plan(job)
    clusters = {c.name: c for c in Cluster.objects.filter(name__in={p["cluster"] for p in plan})}
    existing = {t.template_name: t for t in job.tasks.select_related("cluster")}
    errors: list[str] = []
    runtimes: dict[int, Runtime] = {}

    def rt(cluster: Cluster) -> Runtime:
        if cluster.pk not in runtimes:
            runtimes[cluster.pk] = registry.runtime_for(cluster)
        return runtimes[cluster.pk]

    wanted = {p["template"] for p in plan if p["cluster"] in clusters}
    for template, task in list(existing.items()):
        if template not in wanted or clusters[_plan_of(plan, template)["cluster"]].pk != task.cluster_id:
            try:
                rt(task.cluster).delete_task(task.namespace, task.name)
            except RuntimeFailure as exc:
                errors.append(f"{task.name}: {exc}")
                continue
            task.delete()
            del existing[template]

    tasks = _upsert_tasks(job, plan, clusters, existing, errors)

    run = not job.stopped and job.phase not in TERMINAL
    if run and (closed := safety.closed_gate(job)) is not None:
        # A robot job without a current safety approval never runs, whatever let it be marked running
        # (seed 03-onboard-existing-rlinf-workload): it is stopped, its Workers scaled to 0, the message says why.
        run = False
        with transaction.atomic():
            job = _mark_stopped(job, "SafetyApprovalMissing", closed)
            _audit(None, "job.stop", job, reason="SafetyApprovalMissing")
    manifests: dict[str, TaskManifest] = {}
    if run and tasks:
        try:
            manifests = _manifests(job, clusters)
        except Exception as exc:  # a spec the builder rejects: show it, do not crash the worker
            logger.exception("manifests of job %s", job.name)
            errors.append(f"manifests: {exc}")
            _set_job_message(job, f"Cannot build the Task manifests: {exc}")
            return errors
    if run and job.started_at is None:
        Job.objects.filter(pk=job.pk).update(started_at=timezone.now())

    for task in tasks:
        try:
            runtime = rt(task.cluster)
            if run:
                manifest = manifests.get(task.name)
                if manifest is None:
                    raise RuntimeFailure(f"no manifest was built for Task {task.name}", reason="invalid")
                recreate = task.applied_replicas > 0 and task.applied_attempt != job.attempt
                _mark_template(task, manifest, rolls=task.applied_replicas > 0 and not recreate)
                # Record the intent first: a crash after apply must still let stop scale it down.
                _mark_applied(task, max(manifest.replicas, task.applied_replicas), job.attempt)
                runtime.apply_task(manifest)
                if recreate:
                    runtime.restart_pods(task.namespace, task.name)
                _mark_applied(task, manifest.replicas, job.attempt)
            elif task.applied_replicas:
                log_archive.archive_task_logs(job, task)  # the full logs stay readable once the Pods are gone
                try:
                    runtime.scale_task(task.namespace, task.name, 0)
                except RuntimeFailure as exc:
                    if exc.reason != "not_found":
                        raise
                _mark_applied(task, 0, task.applied_attempt)
            if task.message.startswith("Runtime error: "):
                task.message = ""
                task.save(update_fields=["message"])
        except RuntimeFailure as exc:
            errors.append(f"{task.name}: {exc}")
            if task.message != f"Runtime error: {exc}":
                task.message = f"Runtime error: {exc}"
                task.save(update_fields=["message"])
        except Exception as exc:  # noqa: BLE001 - one bad cluster must not block the others
            logger.exception("reconcile of task %s", task.name)
            errors.append(f"{task.name}: {exc}")
    return errors


def _upsert_tasks(
    job: Job, plan: list[dict[str, Any]], clusters: dict[str, Cluster], existing: dict[str, Task], errors: list[str]
) -> list[Task]:
    """The job's Task rows as ``plan`` says (created, or changed fields saved), in plan order; a plan entry whose
    cluster is unknown is left out and named in ``errors``."""
    tasks: list[Task] = []
    for p in plan:
        cluster = clusters.get(p["cluster"])
        if cluster is None:
            errors.append(f"{p['name']}: unknown cluster {p['cluster']!r}")
            continue
        values = {
            "name": p["name"],
            "cluster": cluster,
            "namespace": cluster.namespace,
            "role": p["role"],
            "display_role": p["display_role"],
            "head": p["head"],
            "order": p["order"],
            "replicas": p["replicas"],
            "rank_start": p["rank_start"],
        }
        task = existing.get(p["template"])
        if task is None:
            task = Task.objects.create(job=job, template_name=p["template"], **values)
        else:
            changed = [k for k, v in values.items() if getattr(task, k) != v]
            for key in changed:
                setattr(task, key, values[key])
            if changed:
                task.save(update_fields=["cluster" if k == "cluster" else k for k in changed])
        tasks.append(task)
    return tasks


def _plan_of(plan: list[dict[str, Any]], template: str) -> dict[str, Any]:
    return next(p for p in plan if p["template"] == template)


def _mark_applied(task: Task, replicas: int, attempt: int) -> None:
    if task.applied_replicas != replicas or task.applied_attempt != attempt:
        task.applied_replicas, task.applied_attempt = replicas, attempt
        task.save(update_fields=["applied_replicas", "applied_attempt"])


def template_hash(manifest: TaskManifest) -> str:
    """sha256 (hex, 64 chars) of the manifest's Pod template (``workload.spec.template``), key order ignored."""
    template = (manifest.workload.get("spec") or {}).get("template") or {}
    return hashlib.sha256(json.dumps(template, sort_keys=True, default=str).encode()).hexdigest()


def _mark_template(task: Task, manifest: TaskManifest, rolls: bool) -> None:
    """Record the Pod template about to be applied; ``rolls``: the Task runs, so a changed template rolls out.

    Saved before the apply, with the revisions of the Task's Pods as last synced (``Task.rolled_revisions``):
    the Pods the StatefulSet replaces carry one of those, the Pods of the new template a new one. Runtimes
    without revisions compare creation times: the replaced Pods are older than ``rolled_at``."""
    digest = template_hash(manifest)
    if task.applied_template == digest:
        return
    fields = ["applied_template"]
    if rolls and task.applied_template:
        task.rolled_at = timezone.now()
        revisions = {(p.container_state or {}).get("revision") for p in task.pods.all()}
        task.rolled_revisions = sorted(r for r in revisions if r)
        fields += ["rolled_at", "rolled_revisions"]
    task.applied_template = digest
    task.save(update_fields=fields)


def _set_job_message(job: Job, message: str) -> None:
    if job.message != message:
        job.message = message
        Job.objects.filter(pk=job.pk).update(message=message)


# --- actions ----------------------------------------------------------------------------------


def _audit(actor, action: str, job: Job, request=None, **detail: Any) -> None:
    record(actor, action, "job", job.name, request=request, **detail)


def stop(job: Job, actor=None, request=None) -> Job:
    """Set ``stopped``, scale every Task to 0, phase Stopped (shown at once, upstream 6.1).

    Pods disappear within one reconcile (the runtime kills each Worker's process group).
    Stopping a finished job is a no-op apart from ``stopped`` (upstream: terminal jobs
    cannot be stopped; the page disables the button).
    """
    with transaction.atomic():
        job = _mark_stopped(job, "StoppedByUser", "Job stopped")
        _audit(actor, "job.stop", job, request)
        request_reconcile(job)
    return job


def _mark_stopped(job: Job, reason: str, message: str) -> Job:
    """The stored ``job`` (locked row) set stopped; a job not finished gets phase Stopped, ``message`` and the
    ``Stopped`` condition with ``reason``, and its Tasks phase Stopped. Call inside a transaction."""
    now = timezone.now()
    job = Job.objects.select_for_update().get(pk=job.pk)
    job.stopped = True
    _set_spec_stopped(job)
    fields = ["stopped", "spec", "updated_at"]
    if job.phase not in TERMINAL:
        job.phase = Phase.STOPPED
        job.message = message
        job.finished_at = job.finished_at or now
        job.conditions = set_condition(job.conditions, "Stopped", True, reason, message, now)
        fields += ["phase", "message", "finished_at", "conditions"]
        job.tasks.exclude(phase=Phase.STOPPED).update(phase=Phase.STOPPED, ready_replicas=0, message="")
    job.save(update_fields=fields)
    return job


def start(job: Job, actor=None, request=None) -> Job:
    """Clear ``stopped`` and re-create the Workers: a new run, not a resume from a checkpoint.

    From Stopped, Succeeded or Failed the job goes back to Pending with ``attempt`` += 1 and
    a fresh start time; starting a job that is already running only re-applies it. Raises
    ``safety.SafetyGateClosed`` (nothing changed) for a robot job without a current safety approval.
    """
    with transaction.atomic():
        job = Job.objects.select_for_update().get(pk=job.pk)
        safety.check_start(job)  # a robot job needs a current safety approval (raises SafetyGateClosed)
        if job.stopped or job.phase in (*TERMINAL, Phase.STOPPED):
            _new_attempt(job)
        _audit(actor, "job.start", job, request, attempt=job.attempt)
        request_reconcile(job)
    return job


def restart(job: Job, actor=None, request=None) -> Job:
    """Re-create every Worker of the job (also from Succeeded/Failed/Stopped; ``attempt`` += 1)."""
    with transaction.atomic():
        job = Job.objects.select_for_update().get(pk=job.pk)
        safety.check_start(job)
        _new_attempt(job)
        _audit(actor, "job.restart", job, request, attempt=job.attempt)
        request_reconcile(job)
    return job


def resume(job: Job, *, directory: str, step: int, from_run: str, run_script: str, actor=None, request=None) -> Job:
    """Start a new run (``attempt`` += 1, a new Run ID) that resumes from the checkpoint ``directory`` (container
    path of a ``global_step_<step>`` the caller checked is complete, ``jobs.observe.checkpoints.choose``) written by
    the run ``from_run``: the Header gets ``RLARK_RESUME_DIR=<directory>`` and runs ``run_script`` instead of the
    template's, for this run only (``Job.resume``; Start and Restart clear it). Audited as ``job.resume``."""
    with transaction.atomic():
        job = Job.objects.select_for_update().get(pk=job.pk)
        safety.check_start(job, run_script=run_script)
        _new_attempt(job)
        job.resume = {"dir": directory, "step": step, "fromRun": from_run, "runScript": run_script}
        job.save(update_fields=["resume"])
        _audit(
            actor, "job.resume", job, request, attempt=job.attempt, checkpoint=directory, step=step, fromRun=from_run
        )
        request_reconcile(job)
    return job


def _record_run(job: Job) -> None:
    """Append the attempt that ends to ``job.runs`` (at most :data:`MAX_RUNS`, oldest dropped)."""
    entry = {
        "attempt": job.attempt,
        "runId": job.current_run_id(),
        "startedAt": job.started_at.isoformat() if job.started_at else None,
        "finishedAt": (job.finished_at or timezone.now()).isoformat(),
        "resumedFrom": str((job.resume or {}).get("dir") or ""),
    }
    job.runs = [*[r for r in job.runs or [] if isinstance(r, dict)], entry][-MAX_RUNS:]


def _new_attempt(job: Job) -> None:
    """Reset the job to a fresh Pending run (upstream 6.1 "on entering Pending", plus attempt); the run that ends
    goes to ``job.runs`` and a resume of it is cleared."""
    _record_run(job)
    job.resume = {}
    job.stopped = False
    _set_spec_stopped(job)
    job.attempt += 1
    job.phase = Phase.PENDING
    job.message = "Starting Workers"
    job.started_at = timezone.now()
    job.finished_at = None
    job.conditions = []
    progress = job.clear_progress()
    job.save(
        update_fields=[
            *progress,
            "stopped",
            "spec",
            "attempt",
            "phase",
            "message",
            "started_at",
            "finished_at",
            "conditions",
            "runs",
            "resume",
            "updated_at",
        ]
    )
    job.tasks.update(phase=Phase.PENDING, ready_replicas=0, message="", conditions=[])
    Pod.objects.filter(task__job=job).delete()


def delete(job: Job, actor=None, request=None) -> None:
    """Remove the job's workloads from every runtime, then the job row.

    Raises :class:`RuntimeFailure` (and keeps the job, marked stopped) when a runtime cannot
    delete a workload, so nothing keeps running unseen; the page shows ``删除失败：<msg>``.
    """
    with job_lock(job.pk):
        if job.tasks.filter(applied_replicas__gt=0).exists():
            log_archive.archive_job_logs(job)  # deleted while running: its logs are kept all the same
        errors = []
        for task in job.tasks.select_related("cluster"):
            try:
                registry.runtime_for(task.cluster).delete_task(task.namespace, task.name)
            except RuntimeFailure as exc:
                errors.append(f"{task.name}: {exc}")
        if errors:
            if not job.stopped:
                Job.objects.filter(pk=job.pk).update(stopped=True)
            raise RuntimeFailure("; ".join(errors), reason="unreachable")
        _audit(actor, "job.delete", job, request)
        log_archive.retire(job.name)  # downloadable until RLARK_LOG_ARCHIVE_RETENTION_DAYS
        release_job(job.name)  # its Workers' domain IPs are free again (upstream 12.2)
        job.delete()
