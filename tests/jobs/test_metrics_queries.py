"""A metrics API adds a constant handful of queries to a sync cycle (≤ 5 at 100 jobs × 10 Pods).

One SELECT per Pod to trim its ring made 2,026 queries per cycle with a metrics API against 626 without.
Samples are written in one bulk INSERT and the rings trimmed by one DELETE per cycle, whatever the number
of Pods; the page's own sampling (``record_pod_metrics``) takes the same statements.
"""

from __future__ import annotations

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from clusters.models import Cluster
from clusters.runtime import registry
from jobs.control import controller
from jobs.models import Job, Phase, Pod
from jobs.models_metrics import MetricSample
from jobs.observe import metrics
from jobs.observe.sync import sync_all_clusters
from tests.fake_runtime import job_document
from tests.jobs.test_sync_scale import HEAD_READY, MeteredRuntime

pytestmark = pytest.mark.django_db

ROLES = [("header", True, 1), ("rollout", False, 9)]  # 10 Pods a job


@pytest.fixture
def alpha(monkeypatch, settings, tmp_path):
    settings.CELERY_TASK_ALWAYS_EAGER = True
    settings.VAR_DIR = tmp_path
    settings.RLARK_SYNC_INTERVAL = 0
    fake = MeteredRuntime("alpha")
    Cluster.objects.create(name="alpha", runtime="local", namespace="ns-alpha", status="online")
    monkeypatch.setattr(registry, "runtime_for", lambda cluster: fake)
    monkeypatch.setattr(metrics, "RING_SIZE", 2)  # rings fill in 3 cycles
    metrics._last_sync_sample.clear()
    return fake


def fleet(fake, owner, jobs: int) -> None:
    for i in range(jobs):
        job = Job.objects.create(name=f"job-{i}", owner=owner, spec=job_document(f"job-{i}", roles=ROLES))
        controller.request_reconcile(job)
    fake.set_running()
    for i in range(jobs):
        fake.log(f"job-{i}-header-0", *HEAD_READY)
    sync_all_clusters()
    sync_all_clusters()


def statements(sql: list[str]) -> list[str]:
    """``sql`` with consecutive batches of one bulk INSERT counted once: SQLite caps a statement at 999
    parameters, so Django splits 1,000 samples into batches there; PostgreSQL (CI) takes one INSERT."""
    out: list[str] = []
    for q in sql:
        if (
            q.startswith('INSERT INTO "jobs_metricsample"')
            and out
            and out[-1].startswith('INSERT INTO "jobs_metricsample"')
        ):
            continue
        out.append(q)
    return out


def cycle(with_metrics: bool) -> list[str]:
    if with_metrics:
        metrics._last_sync_sample.clear()  # every job due for a sample
    else:
        metrics._last_sync_sample.update({pk: float("inf") for pk in Job.objects.values_list("pk", flat=True)})
    with CaptureQueriesContext(connection) as ctx:
        sync_all_clusters()
    return statements([q["sql"] for q in ctx.captured_queries])


def test_metrics_add_at_most_5_queries_at_100_jobs_by_10_pods(alpha, alice):
    fleet(alpha, alice, 100)
    assert Pod.objects.count() == 1000 and Job.objects.filter(phase=Phase.RUNNING).count() == 100
    plain = cycle(with_metrics=False)
    for _ in range(3):  # the third sampled cycle trims every ring
        sampled = cycle(with_metrics=True)
        assert len(sampled) - len(plain) <= 5, [q[:120] for q in sampled]
    deletes = [q for q in sampled if q.startswith("DELETE") and "jobs_metricsample" in q]
    assert len(deletes) == 1, deletes
    assert not [q for q in sampled if q.startswith("SELECT") and '"jobs_metricsample"."pod_name" =' in q]
    assert MetricSample.objects.count() == 1000 * 2  # each Pod keeps its RING_SIZE newest samples
    newest = MetricSample.objects.order_by("-taken_at").first().taken_at
    assert MetricSample.objects.filter(taken_at=newest).count() == 1000


def test_page_sampling_costs_the_same_for_3_and_30_pods(alpha, alice):
    small = Job.objects.create(name="small", owner=alice, spec=job_document("small"))
    big = Job.objects.create(
        name="big", owner=alice, spec=job_document("big", roles=[("header", True, 1), ("rollout", False, 29)])
    )
    for job in (small, big):
        controller.request_reconcile(job)
    alpha.set_running()
    sync_all_clusters()
    counts = {}
    for job in (small, big):
        reading = alpha.pod_metrics("ns-alpha", job.name)
        for _ in range(3):
            with CaptureQueriesContext(connection) as ctx:
                written = metrics.record_pod_metrics(job, reading)
        counts[job.name] = len(ctx.captured_queries)
        assert written == Pod.objects.filter(task__job=job).count()
        assert MetricSample.objects.filter(job=job).count() == written * 2
    assert counts["small"] == counts["big"] <= 4, counts
