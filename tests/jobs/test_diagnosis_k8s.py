"""Diagnosis, pending reasons and metrics through the Kubernetes runtime against the fake API server: an
unschedulable Worker names the blocking resource computed from the nodes, an image pull error is classified within
one sync, CPU/memory come from the metrics API when present (equal to its numbers) and are "not available"
otherwise."""

from __future__ import annotations

import pytest
import yaml

from clusters.models import Cluster
from clusters.services.node_sync import sync_cluster_nodes
from jobs.control import controller
from jobs.explain import diagnosis
from jobs.explain.pending import job_pending_reasons
from jobs.models import Job
from jobs.observe import metrics
from jobs.observe.sync import sync_job
from tests.fake_k8s.fixtures import fake_k8s, fake_kubeconfig  # noqa: F401
from tests.jobs.test_runcheck import template

pytestmark = pytest.mark.django_db

NS = "rlark-system"


@pytest.fixture
def k8s(fake_k8s, fake_kubeconfig, settings):  # noqa: F811
    settings.CELERY_TASK_ALWAYS_EAGER = True
    settings.RLARK_K8S_CONNECT_TIMEOUT = 1
    settings.RLARK_K8S_READ_TIMEOUT = 3
    fake_k8s.add_node("gpu-a-0", {"pool": "head"}, {"nvidia.com/gpu": 8, "cpu": 64, "memory": "512Gi"})
    fake_k8s.add_node("gpu-a-1", {"pool": "rollout"}, {"nvidia.com/gpu": 8, "cpu": 64, "memory": "512Gi"})
    cluster = Cluster.objects.create(
        name="gpu-a", runtime="kubernetes", namespace=NS, kubeconfig=yaml.safe_dump(fake_kubeconfig)
    )
    assert sync_cluster_nodes(cluster, force=True).ok
    return fake_k8s


def submit(owner, gpus_rollout: int = 1) -> Job:
    head = template("header", "rlinf/rlinf:v1", {"pool": "head"}, 1, head=True)
    rollout = template("rollout", "rlinf/rlinf:v1", {"pool": "rollout"}, 1)
    res = {"nvidia.com/gpu": str(gpus_rollout)}
    rollout["kubernetes"]["workload"]["template"]["spec"]["containers"][0]["resources"] = {
        "requests": res,
        "limits": res,
    }
    for t in (head, rollout):
        t["cluster"] = "gpu-a"
        t["kubernetes"]["workload"]["template"]["spec"]["containers"][0]["env"] = [
            {"name": "RLARK_TASK_ROLE", "value": t["name"]}
        ]
    doc = {
        "apiVersion": "rlinf.io/v1alpha1",
        "kind": "Job",
        "metadata": {"name": "k8sjob"},
        "spec": {"tasks": [head, rollout]},
    }
    job = Job.objects.create(name="k8sjob", owner=owner, spec=doc)
    controller.request_reconcile(job)
    job.refresh_from_db()
    return job


def test_unschedulable_and_image_pull_on_kubernetes(k8s, admin_user):
    job = submit(admin_user, gpus_rollout=16)
    assert {p["metadata"]["name"] for p in k8s.list("pods", NS)} == {"k8sjob-header-0", "k8sjob-rollout-0"}
    k8s.set_pod(NS, "k8sjob-header-0", waiting="ErrImagePull", message='pull access denied for "rlinf/rlinf:v1"')
    k8s.add_event(
        NS,
        "k8sjob-rollout-0",
        "FailedScheduling",
        "0/2 nodes are available: 1 Insufficient nvidia.com/gpu, 1 node(s) didn't match Pod's node affinity.",
        type_="Warning",
    )
    sync_job(job)
    job.refresh_from_db()
    reasons = job_pending_reasons(job, with_logs=False)
    (unsched,) = reasons["rollout"]
    assert unsched.code == "unschedulable" and unsched.resource == "nvidia.com/gpu need 16, free 8"
    assert "Insufficient nvidia.com/gpu" in unsched.message("en")
    (pull,) = reasons["header"]
    assert pull.code == "image_pull" and "ErrImagePull" in pull.message("en")
    found = {(f.code, f.pod) for f in diagnosis.diagnose_job(job).findings}
    assert ("image_pull", "k8sjob-header-0") in found  # within one sync


def test_metrics_api_values_or_not_available(k8s, admin_user, client):
    job = submit(admin_user)
    for pod, node in (("k8sjob-header-0", "gpu-a-0"), ("k8sjob-rollout-0", "gpu-a-1")):
        k8s.set_pod(NS, pod, phase="Running", node=node, ip="10.0.0.2")
    sync_job(job)
    job.refresh_from_db()
    assert not metrics.sample_job(job)  # no metrics API
    client.force_login(admin_user)
    page = client.get("/jobs/k8sjob/metrics/", HTTP_ACCEPT_LANGUAGE="en").content.decode()
    assert 'data-testid="metrics-na"' in page and 'data-testid="cpu"' not in page
    k8s.metrics_enabled = True
    k8s.pod_metrics[(NS, "k8sjob-header-0")] = {"cpu": "1500m", "memory": "2Gi"}
    k8s.pod_metrics[(NS, "k8sjob-rollout-0")] = {"cpu": "250m", "memory": "512Mi"}
    assert metrics.sample_job(job)
    rows = {w.pod: (w.cpu, w.memory) for w in metrics.worker_metrics(job)}
    assert rows == {"k8sjob-header-0": (1.5, 2 * 2**30), "k8sjob-rollout-0": (0.25, 512 * 2**20)}
    api = client.get("/api/v1/jobs/k8sjob/metrics/").json()
    assert {w["pod"]: (w["cpu"], w["memory"]) for w in api["workers"]} == rows
    assert api["tensorboard"]["readable"] is False
