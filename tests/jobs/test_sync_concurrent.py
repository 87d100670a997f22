"""Two sync cycles at once (a POST's targeted sync beside the periodic one, or two Celery worker threads): the
second waits for the first one's calls to the same cluster and then reads it itself. Before, it reported the
cluster offline at once ("has not answered for 0 s"), marked its Nodes offline, and the next submissions were
refused with node_selector_no_match. A slow cluster (every request answered after 0.3 s) is used for the overlap:
the fake API server, for a delay a real one cannot be made to add on demand."""

from __future__ import annotations

import threading

import pytest
import yaml
from django.db import connection

from clusters.models import Cluster, Node
from jobs.control import controller
from jobs.models import Job
from jobs.observe.sync import sync_all_clusters, sync_jobs
from tests.fake_runtime import job_document

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def slow_cluster(settings, tmp_path):
    from tests.fake_k8s.server import FakeKubernetes

    settings.CELERY_TASK_ALWAYS_EAGER = True
    settings.VAR_DIR = tmp_path
    settings.RLARK_K8S_CONNECT_TIMEOUT = 2
    settings.RLARK_K8S_READ_TIMEOUT = 10
    settings.RLARK_CLUSTER_SYNC_DEADLINE = 8
    fake = FakeKubernetes(token="t").start()
    fake.add_node("n0", {"kubernetes.io/hostname": "n0"}, {"cpu": 16, "memory": "64Gi"})
    Cluster.objects.create(name="k-slow", runtime="kubernetes", kubeconfig=yaml.safe_dump(fake.kubeconfig()))
    assert sync_all_clusters(force=True)["clusters"] == {"k-slow": "online"}
    fake.set_fault("timeout", delay=0.3)  # every request answered, 0.3 s late
    yield fake
    fake.set_fault(None)
    fake.stop()


def test_two_cycles_at_once_both_see_the_cluster_online(slow_cluster, alice):
    job = Job.objects.create(
        name="busy", owner=alice, spec=job_document("busy", roles=[("header", True, 1)], cluster="k-slow")
    )
    controller.request_reconcile(job)
    results: list[dict] = []
    start = threading.Barrier(3)

    def cycle(run) -> None:
        try:
            start.wait(10)
            results.append(run())
        finally:
            connection.close()

    # the periodic cycle and two targeted ones (two submissions' syncs) at once
    runs = [lambda: sync_all_clusters(force=True), lambda: sync_jobs([job]), lambda: sync_jobs([job])]
    threads = [threading.Thread(target=cycle, args=(run,)) for run in runs]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert [r["clusters"] for r in results] == [{"k-slow": "online"}] * 3, results
    row = Cluster.objects.get(name="k-slow")
    assert row.status == Cluster.Status.ONLINE, row.status_message
    assert Node.objects.get(cluster=row, name="n0").online
