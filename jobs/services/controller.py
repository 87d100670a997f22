"""Job controller: turns stored Jobs into Tasks on runtimes and handles lifecycle actions.

CONTRACT (stable signatures; the bodies are being built - see issue 4). Every function is
idempotent and safe to re-run. ``actor`` is the acting user (for the audit log) or None.
"""

from __future__ import annotations

from jobs.models import Job


def request_reconcile(job: Job) -> None:
    """Schedule (Celery) or run a reconcile of ``job``: create/update/scale/delete its Tasks."""


def reconcile(job: Job) -> None:
    """Bring the runtimes in line with ``job.spec`` and ``job.stopped`` now."""


def stop(job: Job, actor=None) -> Job:
    """Set ``stopped``, scale every Task to 0, phase Stopped."""
    return job


def start(job: Job, actor=None) -> Job:
    """Clear ``stopped`` and re-create the Workers (a new run, not a resume)."""
    return job


def restart(job: Job, actor=None) -> Job:
    """Re-create every Worker of the job (also from Succeeded/Failed; attempt += 1)."""
    return job


def delete(job: Job, actor=None) -> None:
    """Remove the job's workloads from every runtime, then the job row."""
    job.delete()
