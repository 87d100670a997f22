"""Celery tasks of the control plane."""

from __future__ import annotations

from celery import shared_task


@shared_task(name="jobs.tasks.sync_all", ignore_result=True)
def sync_all() -> None:
    """Periodic status sync of every cluster (Celery beat, every RLARK_SYNC_INTERVAL seconds)."""
    try:
        from jobs.services.sync import sync_all_clusters
    except ImportError:  # the sync service is not built yet
        return
    sync_all_clusters()
