"""Seed a fleet of jobs straight into the database, as reconcile and sync would leave them, at fleet scale.

Each job is a Header (1 Worker) + a rollout role (2 Workers): 2 Tasks and 3 Pods per job, so 10,000 jobs are
20k Tasks and 30k Pods, the fleet the issue measured. ``bulk_create`` in batches; used by ``bench/lists.py`` and
the query-count tests, so both measure the same shape.
"""

from __future__ import annotations

from datetime import timedelta

from django.utils import timezone

from clusters.models import Cluster
from jobs.models import Job, Phase, Pod, Task
from tests.fake_runtime import job_document

PHASES = (Phase.RUNNING, Phase.SUCCEEDED, Phase.FAILED, Phase.PENDING, Phase.STOPPED)
BATCH = 1000


def owner_of(i: int, owners: list):
    """``owners[0]`` owns every 4th job (a heavy user, so an owner's list is as long at 100 jobs as its page);
    the others share the rest round-robin."""
    return owners[0] if i % 4 == 0 or len(owners) == 1 else owners[1 + i % (len(owners) - 1)]


def seed_jobs(count: int, owners: list, cluster: Cluster, start: int = 0) -> list[Job]:
    """Create jobs ``fleet-<start>`` .. ``fleet-<start+count-1>`` over ``owners`` (``owner_of``), newest last;
    returns the Job rows (with pks)."""
    now = timezone.now()
    jobs = [
        Job(
            name=f"fleet-{i:05d}",
            display_name=f"Fleet run {i}",
            owner=owner_of(i, owners),
            spec=job_document(f"fleet-{i:05d}", cluster=cluster.name),
            phase=PHASES[i % len(PHASES)],
            started_at=now - timedelta(minutes=5),
        )
        for i in range(start, start + count)
    ]
    Job.objects.bulk_create(jobs, batch_size=BATCH)
    jobs = list(Job.objects.filter(name__in=[j.name for j in jobs]).order_by("id"))
    base = now - timedelta(days=30)
    for offset, job in enumerate(jobs):  # spread creation times so ORDER BY created_at means something
        job.created_at = base + timedelta(seconds=start + offset)
    Job.objects.bulk_update(jobs, ["created_at"], batch_size=BATCH)
    tasks = []
    for job in jobs:
        for order, (template, head, replicas) in enumerate((("header", True, 1), ("rollout", False, 2))):
            tasks.append(
                Task(
                    job=job,
                    template_name=template,
                    name=f"{job.name}-{template}",
                    cluster=cluster,
                    namespace=cluster.namespace or "default",
                    head=head,
                    order=order,
                    replicas=replicas,
                    ready_replicas=replicas if job.phase == Phase.RUNNING else 0,
                    phase=job.phase,
                )
            )
    Task.objects.bulk_create(tasks, batch_size=BATCH)
    tasks = Task.objects.filter(job__in=jobs).only("id", "name", "replicas")
    pods = [
        Pod(task=t, name=f"{t.name}-{k}", ordinal=k, node=f"node-{k}", phase="Running")
        for t in tasks
        for k in range(t.replicas)
    ]
    Pod.objects.bulk_create(pods, batch_size=BATCH)
    return jobs
