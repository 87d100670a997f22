"""Who else has jobs on a single-user local cluster (docs/security.md, "Local runtime"; the rule of when a local
cluster is single-user is ``clusters.runtime.local.tenancy``)."""

from __future__ import annotations

from clusters.runtime.local import tenancy
from jobs.control.lifecycle import TERMINAL as FINISHED_PHASES
from jobs.models import Task


def occupants(cluster: str, user, *, exclude_job=None) -> list[str]:
    """User names, sorted, of the other users whose jobs are active (not stopped, not finished) on the local
    ``cluster``; empty when local clusters are not single-user here. One query."""
    if not tenancy.single_user():
        return []
    tasks = Task.objects.filter(cluster__name=cluster, cluster__runtime="local", job__stopped=False)
    tasks = tasks.exclude(job__phase__in=FINISHED_PHASES).exclude(job__owner=user)
    if exclude_job is not None:
        tasks = tasks.exclude(job=exclude_job)
    return sorted(set(tasks.values_list("job__owner__username", flat=True)))
