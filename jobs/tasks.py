"""Celery tasks of the control plane (all idempotent; safe to re-run or run twice).

This is the only module that knows Celery: the controller reaches :func:`reconcile_job` through the hooks
:func:`install_reconcile_hooks` gives it (``jobs.control.controller.ReconcileHooks``).
"""

from __future__ import annotations

import logging

from celery import shared_task

from jobs.control import controller
from jobs.control.log_archive import purge_expired
from jobs.explain import runcheck
from jobs.models import Job
from jobs.observe import log_scans
from jobs.observe.sync import sync_all_clusters, sync_job
from rlark_console import varspace

logger = logging.getLogger(__name__)


@shared_task(name="jobs.tasks.sync_all", ignore_result=True)
def sync_all() -> None:
    """Periodic status sync of every cluster (Celery beat, every RLARK_SYNC_INTERVAL seconds). A full disk
    (``var/`` or the database's) is logged as such, and the pages' banner says status updates are not saved."""
    try:
        sync_all_clusters()
    except Exception as exc:
        if not varspace.is_disk_full(exc):
            raise
        varspace.report("status sync", exc)


@shared_task(name="jobs.tasks.reconcile_job", ignore_result=True)
def reconcile_job(job_id: int) -> None:
    """Apply the job's desired state to its runtimes, then sync its status at once."""
    job = Job.objects.filter(pk=job_id).first()
    if job is None:  # deleted meanwhile
        return
    controller.reconcile(job)
    sync_job(job)


@shared_task(name="jobs.tasks.sync_job", ignore_result=True)
def sync_job_task(job_id: int) -> None:
    """Sync one job's status now."""
    job = Job.objects.filter(pk=job_id).first()
    if job is None:
        return
    try:
        sync_job(job)
    except Exception as exc:
        if not varspace.is_disk_full(exc):
            raise
        varspace.report("status sync", exc)


@shared_task(name="jobs.tasks.purge_log_archives", ignore_result=True)
def purge_log_archives() -> None:
    """Remove deleted jobs' archived logs once the retention period is over (``jobs.control.log_archive``)."""
    purge_expired()


@shared_task(name="jobs.tasks.refresh_log_scans", ignore_result=True)
def refresh_log_scans(job_id: int) -> None:
    """Read what the job's Workers appended to their logs since their stored scans (``jobs.observe.log_scans``);
    asked for by the Diagnosis tab and the Run check when their scans are older than the max age."""
    job = Job.objects.filter(pk=job_id).first()
    if job is not None:
        log_scans.refresh_stale(job, runcheck.job_log_patterns(job))


def _enqueue_log_scan_refresh(job_id: int) -> None:
    refresh_log_scans.delay(job_id)


def _run_reconcile_now(job_id: int) -> None:
    reconcile_job.apply(args=(job_id,))


def _enqueue_reconcile(job_id: int) -> None:
    reconcile_job.delay(job_id)


def install_reconcile_hooks() -> None:
    """Make ``controller.request_reconcile`` run :func:`reconcile_job` (eagerly, or enqueued after commit)."""
    controller.use_reconcile_hooks(controller.ReconcileHooks(run_now=_run_reconcile_now, enqueue=_enqueue_reconcile))
    log_scans.use_refresh_hook(_enqueue_log_scan_refresh)
