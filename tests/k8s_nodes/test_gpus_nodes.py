"""GPUs as extended resources on a real node: ``nvidia.com/gpu: 8`` patched onto the Node's capacity (what a
device plugin would advertise). The real scheduler places a 4-GPU Header there and the real kubelet admits and
runs it; a 16-GPU Worker is refused by the console at the resource's path (16 > 8 on any node); when another
team's Pod holds the GPUs, the console's pending reason is the scheduler's own, naming ``nvidia.com/gpu``."""

from __future__ import annotations

import json

import pytest
from rest_framework.test import APIClient

from clusters.models import Node
from jobs.observe.sync import sync_all_clusters
from tests.k8s_nodes.conftest import CLUSTER
from tests.k8s_real.conftest import wait_for
from tests.k8s_real.jobs import document, running, task
from tests.k8s_real.test_pending_real import pending_messages

pytestmark = [pytest.mark.k8s_nodes, pytest.mark.django_db(transaction=True), pytest.mark.timeout(400)]
GPU = "nvidia.com/gpu"


@pytest.fixture
def gpu_nodes(real_nodes):
    """Both real Nodes advertise 8 GPUs for the test; the capacity is removed again afterwards."""

    def patch(value) -> None:
        body = {"status": {"capacity": {GPU: value}}}
        for name in real_nodes.nodes.names:
            real_nodes.cp.kubectl("patch", "node", name, "--subresource=status", "--type=merge", "-p", json.dumps(body))

    patch("8")
    for name in real_nodes.nodes.names:
        wait_for(
            lambda n=name: (
                real_nodes.cp.kubectl("get", "node", n, "-o", "jsonpath={.status.allocatable}").find(GPU) >= 0
            ),
            30,
            f"{GPU} allocatable on {name}",
        )
    yield real_nodes
    patch(None)


def _header(name: str, image: str, node: str, gpus: int) -> dict:
    return document(
        name,
        task(
            "header",
            head=True,
            replicas=1,
            selector={"kubernetes.io/hostname": node},
            gpus=gpus,
            image=image,
            cluster=CLUSTER,
        ),  # fmt: skip
    )


def test_gpu_worker_runs_on_the_real_node_and_too_many_gpus_are_named(gpu_nodes, real_cluster, real_namespace, alice):
    api = APIClient()
    api.force_authenticate(alice)
    sync_all_clusters(force=True)
    node = Node.objects.get(cluster=real_cluster, name="real-0")
    assert float(node.capacity[GPU]) == 8

    resp = api.post("/api/v1/jobs/", _header("gpu-4", gpu_nodes.worker, "real-0", 4), format="json")
    assert resp.status_code == 201, resp.content
    pods = wait_for(lambda: running(real_namespace, 1), 120, "the 4-GPU Header Running on a real node")
    pod = pods["gpu-4-header-0"]
    assert pod["spec"]["nodeName"] == "real-0"
    assert pod["status"]["containerStatuses"][0]["containerID"].startswith("containerd://")
    assert pod["spec"]["containers"][0]["resources"]["limits"][GPU] == "4"

    resp = api.post("/api/v1/jobs/", _header("gpu-16", gpu_nodes.worker, "real-1", 16), format="json")
    assert resp.status_code == 400
    errors = resp.json()["errors"]
    assert any(
        e["code"] == "gpu_exceeds_node" and e["path"].endswith(f"resources.requests.{GPU}") and "16" in e["message"]
        for e in errors
    ), errors


def test_pending_reason_names_the_gpus_another_pod_holds(gpu_nodes, real_cluster, real_namespace, alice):
    cp = gpu_nodes.cp
    other = f"{real_namespace.name}-other"
    cp.kubectl("create", "namespace", other)
    try:
        blocker = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": "blocker", "namespace": other},
            "spec": {
                "nodeSelector": {"kubernetes.io/hostname": "real-1"},
                "terminationGracePeriodSeconds": 0,
                "containers": [
                    {
                        "name": "main",
                        "image": gpu_nodes.worker,
                        "command": ["sleep", "600"],
                        "resources": {"requests": {GPU: "8"}, "limits": {GPU: "8"}},
                    }
                ],
            },
        }
        cp.kubectl("apply", "-f", "-", input=json.dumps(blocker))
        wait_for(
            lambda: "Running" in cp.kubectl("-n", other, "get", "pod", "blocker", "-o", "jsonpath={.status.phase}"),
            90,
            "the other team's 8-GPU Pod Running on real-1",
        )
        api = APIClient()
        api.force_authenticate(alice)
        resp = api.post("/api/v1/jobs/", _header("gpu-short", gpu_nodes.worker, "real-1", 4), format="json")
        assert resp.status_code == 201, resp.content
        text = wait_for(
            lambda: (t := pending_messages(api, "gpu-short")) and f"Insufficient {GPU}" in t and t,
            90,
            "the scheduler's FailedScheduling reason",
        )
        assert "gpu-short" in text and "header" in text, text
    finally:
        cp.kubectl("-n", other, "delete", "pod", "blocker", "--force", "--grace-period=0", "--ignore-not-found")
        cp.kubectl("delete", "namespace", other, "--wait=false")
