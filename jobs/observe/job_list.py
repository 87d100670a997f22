"""Worker counts for the rows of one job-list page: Task counts are aggregated only for the page shown.

Paging the plain ``Job`` queryset first and aggregating afterwards keeps the list's cost constant in the number
of jobs: the ``COUNT(*)`` and the page's ``ORDER BY created_at LIMIT`` use the ``job_created_idx`` family of
indexes, and the Task aggregate reads only the page's Tasks (one ``GROUP BY`` over ≤ one page of job ids).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from django.db.models import Count, Sum

from jobs.models import Task


@dataclass(frozen=True)
class WorkerCounts:
    """Ready and desired Workers (sum of Task ``ready_replicas`` / ``replicas``) and the number of Tasks (roles)."""

    ready: int = 0
    total: int = 0
    roles: int = 0


def worker_counts(job_ids: Iterable[int]) -> dict[int, WorkerCounts]:
    """``{job id: WorkerCounts}`` for ``job_ids`` in one query; a job without Tasks is missing (use the default)."""
    rows = (
        Task.objects.filter(job_id__in=list(job_ids))
        .order_by()
        .values("job_id")
        .annotate(ready=Sum("ready_replicas"), total=Sum("replicas"), roles=Count("id"))
    )
    return {r["job_id"]: WorkerCounts(r["ready"] or 0, r["total"] or 0, r["roles"]) for r in rows}
