"""Controller + status sync against the Kubernetes runtime (fake API server over real HTTP, official
client; no stub of the runtime): StatefulSets per Task, Pods -> Workers, stop/start, success, delete."""

from __future__ import annotations

import pytest
import yaml

from clusters.models import Cluster
from jobs.control import controller
from jobs.models import Job, Phase
from jobs.observe.status import get_condition, job_status, read_worker_log
from jobs.observe.sync import sync_all_clusters, sync_job
from tests.fake_k8s.fixtures import fake_k8s, fake_kubeconfig  # noqa: F401
from tests.fake_runtime import job_document

pytestmark = pytest.mark.django_db
NS = "rlark-system"


@pytest.fixture
def k8s(fake_k8s, fake_kubeconfig, settings, tmp_path):  # noqa: F811
    settings.CELERY_TASK_ALWAYS_EAGER = True
    settings.VAR_DIR = tmp_path
    settings.RLARK_K8S_CONNECT_TIMEOUT = 1
    settings.RLARK_K8S_READ_TIMEOUT = 2
    Cluster.objects.create(
        name="gpu-a", runtime="kubernetes", namespace=NS, kubeconfig=yaml.safe_dump(fake_kubeconfig), status="online"
    )
    return fake_k8s


def statefulsets(fake) -> dict[str, int]:
    return {o["metadata"]["name"]: o["spec"]["replicas"] for o in fake.list("statefulsets", NS)}


def pods(fake) -> list[str]:
    return sorted(o["metadata"]["name"] for o in fake.list("pods", NS))


def test_job_lifecycle_on_kubernetes(k8s, alice):
    job = Job.objects.create(name="kjob", owner=alice, spec=job_document("kjob", cluster="gpu-a"))
    controller.request_reconcile(job)
    assert statefulsets(k8s) == {"kjob-header": 1, "kjob-rollout": 2}
    assert pods(k8s) == ["kjob-header-0", "kjob-rollout-0", "kjob-rollout-1"]
    job.refresh_from_db()
    assert job.phase == Phase.PENDING
    assert {w["pod"] for w in job_status(job)["workers"]} == {"kjob-header-0", "kjob-rollout-0", "kjob-rollout-1"}

    # The image cannot be pulled on one Worker: a condition from the first sync.
    k8s.set_pod(NS, "kjob-rollout-1", "Pending", node="n2", waiting="ImagePullBackOff", message="Back-off pulling")
    sync_job(job)
    job.refresh_from_db()
    assert get_condition(job.conditions, "ImagePullBackOff")["status"] == "True"

    # Everything runs and the header formed the Ray cluster.
    for i, name in enumerate(pods(k8s)):
        k8s.set_pod(NS, name, "Running", node=f"n{i}", ip=f"10.0.0.{i + 1}")
    k8s.set_log(NS, "kjob-header-0", "RLINF_NODE_RANK: 0\nRay cluster is ready. Printing cluster information:\n")
    sync_job(job)
    job.refresh_from_db()
    assert job.phase == Phase.RUNNING, job.message
    workers = {w["name"]: w for w in job_status(job)["workers"]}
    assert workers["kjob-rollout-1"]["ip"] == "10.0.0.3" and workers["kjob-rollout-1"]["rank"] == 2
    assert get_condition(job.conditions, "ImagePullBackOff")["status"] == "False"

    # Stop: replicas 0, Pods gone, phase Stopped.
    controller.stop(job)
    assert statefulsets(k8s) == {"kjob-header": 0, "kjob-rollout": 0}
    assert pods(k8s) == []
    job.refresh_from_db()
    assert job.phase == Phase.STOPPED
    assert "Ray cluster is ready" in read_worker_log(job, "kjob-header-0")  # archived before the scale-down

    # Start: a new attempt with new Pods.
    controller.start(job)
    assert statefulsets(k8s) == {"kjob-header": 1, "kjob-rollout": 2}
    assert len(pods(k8s)) == 3
    job.refresh_from_db()
    assert job.attempt == 2 and job.phase == Phase.PENDING

    # The run script ends with 0 (the header idles afterwards): Succeeded, scaled to 0.
    for name in pods(k8s):
        k8s.set_pod(NS, name, "Running")
    k8s.set_log(NS, "kjob-header-0", "Ray cluster is ready\nExecuting run script...\nRun script exited with code 0\n")
    sync_job(job)
    job.refresh_from_db()
    assert job.phase == Phase.SUCCEEDED
    assert statefulsets(k8s) == {"kjob-header": 0, "kjob-rollout": 0}

    # Delete: nothing left.
    controller.delete(job)
    assert statefulsets(k8s) == {} and pods(k8s) == []
    assert not Job.objects.filter(name="kjob").exists()


def test_api_failure_marks_cluster_offline_and_recovers(k8s, alice, monkeypatch):
    from jobs.observe import sync

    monkeypatch.setattr(sync, "_backoff", {})
    job = Job.objects.create(name="kjob", owner=alice, spec=job_document("kjob", cluster="gpu-a"))
    controller.request_reconcile(job)
    k8s.set_fault("500")
    sync_all_clusters(force=True)
    cluster = Cluster.objects.get(name="gpu-a")
    assert cluster.status == "offline" and cluster.status_message
    assert "kubeconfig-marker" not in cluster.status_message
    job.refresh_from_db()
    assert get_condition(job.conditions, "ClusterReachable")["status"] == "False"
    k8s.set_fault(None)
    k8s.add_node("n0", {"pool": "head"}, {"cpu": 8})
    sync_all_clusters(force=True)
    assert Cluster.objects.get(name="gpu-a").status == "online"
    job.refresh_from_db()
    assert get_condition(job.conditions, "ClusterReachable")["status"] == "True"
