"""A cluster that accepts connections but never answers must not slow the others.

Two Kubernetes clusters on two fake API servers (the fake is used here for a fault a real API server cannot be made
to produce on demand: an answer that never comes). One of them hangs every request for 30 s; the sync cycle still
ends within its per-cluster deadline, the healthy cluster's job status follows its Pods in that same cycle, the hung
cluster shows Offline with the reason, and it comes back online by itself once it answers again.
"""

from __future__ import annotations

import time

import pytest
import yaml

from clusters.models import Cluster
from jobs.control import controller
from jobs.models import Job, Pod
from jobs.observe.status import get_condition
from jobs.observe.sync import sync_all_clusters
from tests.fake_k8s.server import FakeKubernetes
from tests.fake_runtime import job_document

pytestmark = pytest.mark.django_db
NS = "rlark-system"


@pytest.fixture
def two_clusters(settings, tmp_path):
    settings.CELERY_TASK_ALWAYS_EAGER = True
    settings.VAR_DIR = tmp_path
    settings.RLARK_K8S_CONNECT_TIMEOUT = 1
    settings.RLARK_K8S_READ_TIMEOUT = 6
    settings.RLARK_CLUSTER_SYNC_DEADLINE = 1.5
    servers = {"k-ok": FakeKubernetes(token="t-ok").start(), "k-hung": FakeKubernetes(token="t-hung").start()}
    for name, fake in servers.items():
        fake.add_node("n0", {"kubernetes.io/hostname": "n0"}, {"cpu": 16, "memory": "64Gi"})
        Cluster.objects.create(name=name, runtime="kubernetes", kubeconfig=yaml.safe_dump(fake.kubeconfig()))
    yield servers
    for fake in servers.values():
        fake.set_fault(None)
        fake.stop()


def submit(owner, name: str, cluster: str) -> Job:
    job = Job.objects.create(
        name=name, owner=owner, spec=job_document(name, roles=[("header", True, 1)], cluster=cluster)
    )
    controller.request_reconcile(job)
    return job


def timed_cycle() -> tuple[float, dict]:
    t0 = time.monotonic()
    result = sync_all_clusters(force=True)
    return time.monotonic() - t0, result


def test_a_hung_cluster_does_not_delay_the_others_and_recovers(two_clusters, alice):
    ok, hung = two_clusters["k-ok"], two_clusters["k-hung"]
    submit(alice, "good", "k-ok")
    stuck = submit(alice, "stuck", "k-hung")
    _, result = timed_cycle()
    assert result["clusters"] == {"k-ok": "online", "k-hung": "online"}

    hung.set_fault("timeout", delay=30)  # accepts the connection, never answers
    ok.set_pod(NS, "good-header-0", phase="Running", node="n0", ip="10.0.0.7")
    elapsed, result = timed_cycle()
    assert elapsed < 4, f"one hung cluster made the cycle take {elapsed:.1f} s"
    assert result["clusters"]["k-ok"] == "online"
    assert result["clusters"]["k-hung"].startswith("offline")
    assert Pod.objects.get(name="good-header-0").phase == "Running"  # the healthy cluster synced in the same cycle
    hung_row = Cluster.objects.get(name="k-hung")
    assert hung_row.status == Cluster.Status.OFFLINE
    assert "sync deadline" in hung_row.status_message or "同步期限" in hung_row.status_message
    stuck.refresh_from_db()
    assert get_condition(stuck.conditions, "ClusterReachable")["status"] == "False"

    elapsed, result = timed_cycle()  # its earlier calls still hang: no second thread, still fast, still offline
    assert elapsed < 4 and result["clusters"]["k-hung"].startswith("offline")

    hung.set_fault(None)  # the API server answers again: back online without anyone doing anything
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        _, result = timed_cycle()
        if result["clusters"]["k-hung"] == "online":
            break
        time.sleep(0.5)
    assert result["clusters"]["k-hung"] == "online"
    assert Cluster.objects.get(name="k-hung").status == Cluster.Status.ONLINE
    stuck.refresh_from_db()
    assert get_condition(stuck.conditions, "ClusterReachable")["status"] == "True"


def test_a_job_whose_cluster_hangs_before_its_first_sync_shows_the_cluster_unreachable(two_clusters, alice, caplog):
    """No Pod row exists yet for a job whose cluster stops answering before the first sync saw its Pods: its
    status still says the cluster is unreachable (the aggregation once raised KeyError for such jobs)."""
    fresh = submit(alice, "fresh", "k-hung")
    Pod.objects.filter(task__job=fresh).delete()  # as before any sync stored its Pods
    two_clusters["k-hung"].set_fault("timeout", delay=30)
    _, result = timed_cycle()
    assert result["clusters"]["k-hung"].startswith("offline")
    assert not [r for r in caplog.records if r.levelname == "ERROR" and "fresh" in r.getMessage()]
    fresh.refresh_from_db()
    assert get_condition(fresh.conditions, "ClusterReachable")["status"] == "False"
    assert not Pod.objects.filter(task__job=fresh).exists()
