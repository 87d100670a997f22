"""The Ray nodes count (jobs.observe.ray_nodes): Workers joined by their own logs, or by the Header's cluster check
when it counts more; the names of those not seen joining; a Pod of an earlier attempt never counts."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from clusters.models import Cluster
from jobs.models import Job, Pod, Task
from jobs.observe.ray_nodes import tally_nodes

pytestmark = pytest.mark.django_db


def seeded(alice, head_signals: dict, rollout_signals: list[dict], stale: bool = False):
    now = timezone.now()
    cluster = Cluster.objects.create(name="c", runtime="local", status="online")
    job = Job.objects.create(name="j", owner=alice, spec={}, phase="Pending", started_at=now - timedelta(minutes=1))
    head = Task.objects.create(job=job, template_name="header", name="j-header", cluster=cluster, head=True)
    roll = Task.objects.create(
        job=job, template_name="rollout", name="j-rollout", cluster=cluster, replicas=2, rank_start=1, order=1
    )
    created = now - timedelta(minutes=5 if stale else 0)
    rows = {head.pk: {}, roll.pk: {}}
    rows[head.pk]["j-header-0"] = Pod.objects.create(
        task=head, name="j-header-0", phase="Running", container_state={"signals": head_signals}, created_at=created
    )
    for i, signals in enumerate(rollout_signals):
        rows[roll.pk][f"j-rollout-{i}"] = Pod.objects.create(
            task=roll,
            name=f"j-rollout-{i}",
            ordinal=i,
            phase="Running",
            container_state={"signals": signals},
            created_at=created,
        )
    return job, [head, roll], rows


def test_workers_join_by_their_logs_and_the_missing_are_named(alice):
    job, tasks, rows = seeded(alice, {"rayStarted": True}, [{"rayStarted": True}, {}])
    assert tally_nodes(job, tasks, rows).message() == "Ray nodes 2/3, missing rollout-1 (rank 2)"


def test_a_worker_whose_ray_process_exited_has_left(alice):
    job, tasks, rows = seeded(alice, {"rayStarted": True}, [{"rayStarted": True, "rayExit": 1}, {"rayStarted": True}])
    assert tally_nodes(job, tasks, rows).message() == "Ray nodes 2/3, missing rollout-0 (rank 1)"


def test_the_headers_ray_status_counts_when_it_sees_more(alice):
    job, tasks, rows = seeded(alice, {"rayStarted": True, "rayAlive": 3}, [{}, {}])
    nodes = tally_nodes(job, tasks, rows)
    assert (nodes.joined, nodes.missing) == (3, [])
    job, tasks, rows = seeded_again(alice, {"rayStarted": True, "rayAlive": 2}, [{}, {}])
    assert tally_nodes(job, tasks, rows).message().startswith("Ray nodes 2/3, missing ")


def test_pods_of_an_earlier_attempt_never_count(alice):
    job, tasks, rows = seeded(alice, {"rayStarted": True}, [{"rayStarted": True}, {"rayStarted": True}], stale=True)
    assert tally_nodes(job, tasks, rows).message() == (
        "Ray nodes 0/3, missing header-0 (rank 0), rollout-0 (rank 1), rollout-1 (rank 2)"
    )


def seeded_again(alice, head_signals, rollout_signals):
    Job.objects.all().delete()
    Cluster.objects.all().delete()
    return seeded(alice, head_signals, rollout_signals)
