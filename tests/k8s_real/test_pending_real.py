"""Pending reasons produced by the REAL scheduler, StatefulSet controller, PV controller and
ResourceQuota admission, shown by the console's diagnosis API (``pending``) in words a researcher understands.

The console validates against its own node inventory, so each case makes the cluster change behind that
inventory's back, as another team's workload or an operator would: a Pod that takes the GPUs, a cordon, a
quota, a claim or StorageClass that does not exist."""

from __future__ import annotations

import re

import pytest
from rest_framework.test import APIClient

from jobs.observe.sync import sync_all_clusters
from storage.models import StorageClass
from tests.k8s_real.conftest import discard_namespace, wait_for
from tests.k8s_real.jobs import document, task

pytestmark = [pytest.mark.k8s_real, pytest.mark.django_db(transaction=True)]


def pending_messages(api: APIClient, job: str, lang: str = "en") -> str:
    """Every pending reason of the job's diagnosis, as one text (after a sync)."""
    sync_all_clusters(force=True)
    data = api.get(f"/api/v1/jobs/{job}/diagnosis/", HTTP_ACCEPT_LANGUAGE=lang).json()
    return "\n".join(r["message"] for items in (data.get("pending") or {}).values() for r in items)


def submit(api: APIClient, doc: dict) -> None:
    resp = api.post("/api/v1/jobs/", doc, format="json")
    assert resp.status_code == 201, resp.content


@pytest.fixture
def api(alice):
    client = APIClient()
    client.force_authenticate(alice)
    return client


def test_insufficient_gpu_shows_the_schedulers_own_message(k8s_cluster, k8s_namespace, control_plane, api):
    # another team's Pod takes all 8 GPUs of gpu-2 after the console last looked at the nodes
    other = f"{k8s_namespace.name}-other"
    control_plane.kubectl("create", "namespace", other)
    try:
        control_plane.kubectl(
            "-n",
            other,
            "run",
            "blocker",
            "--image=busybox",
            "--restart=Never",
            "--overrides",
            '{"spec":{"nodeSelector":{"kubernetes.io/hostname":"gpu-2"},"containers":[{"name":"blocker",'
            '"image":"busybox","resources":{"requests":{"nvidia.com/gpu":"8"},"limits":{"nvidia.com/gpu":"8"}}}]}}',
        )
        wait_for(
            lambda: (
                "Running"
                in control_plane.kubectl("-n", other, "get", "pod", "blocker", "-o", "jsonpath={.status.phase}")
            ),
            30,
            "blocker Running",
        )
        submit(
            api,
            document(
                "gpu-short",
                task("header", head=True, replicas=1, selector={"kubernetes.io/hostname": "cpu-0"}),
                task("rollout", head=False, replicas=3, selector={"pool": "gpu"}, gpus=8),
            ),
        )
        text = wait_for(
            lambda: (t := pending_messages(api, "gpu-short")) and "Insufficient nvidia.com/gpu" in t and t,
            60,
            "FailedScheduling reason",
        )
        assert re.search(r"0/\d+ nodes are available", text), text
        assert "gpu-short" in text and "rollout" in text
        zh = pending_messages(api, "gpu-short", "zh-hans")
        assert "无法调度" in zh and "Insufficient nvidia.com/gpu" in zh
    finally:
        discard_namespace(control_plane, other)


def test_selector_only_a_cordoned_node_matches(k8s_cluster, k8s_namespace, control_plane, api):
    from tools.k8s.fleet import NodeSpec, add_nodes, delete_nodes

    spare = f"spare-{k8s_namespace.name}"
    add_nodes(control_plane, [NodeSpec(name=spare, labels={"pool": spare}, gpus=0)])
    try:
        wait_for(
            lambda: (
                "True"
                in control_plane.kubectl(
                    "get", "node", spare, "-o", "jsonpath={.status.conditions[?(@.type=='Ready')].status}"
                )
            ),
            30,
            "spare Ready",
        )
        sync_all_clusters(force=True)  # the console sees the node schedulable
        control_plane.kubectl("cordon", spare)  # an operator cordons it right after
        submit(api, document("cordoned", task("header", head=True, replicas=1, selector={"pool": spare})))
        text = wait_for(
            lambda: (t := pending_messages(api, "cordoned")) and "unschedulable" in t and t, 60, "cordon reason"
        )
        assert re.search(r"node\(s\) (were|was) unschedulable", text), text
    finally:
        delete_nodes(control_plane, [spare])


def test_missing_storage_class_is_named(k8s_cluster, k8s_namespace, api):
    StorageClass.objects.create(
        cluster=k8s_cluster, name="ckpt", provider="kubernetes", parameters={"storage_class_name": "rclone-nowhere"}
    )
    doc = document(
        "no-sc",
        task(
            "header",
            head=True,
            replicas=1,
            selector={"kubernetes.io/hostname": "cpu-0"},
            volumes=[("/mnt/ckpt", "pvc-no-sc-ckpt")],
        ),
    )
    doc["spec"]["tasks"][0]["kubernetes"]["workload"]["pvcStorageMap"] = {"pvc-no-sc-ckpt": "ckpt"}
    submit(api, doc)
    text = wait_for(
        lambda: (t := pending_messages(api, "no-sc")) and "rclone-nowhere" in t and t, 60, "StorageClass reason"
    )
    assert "StorageClass rclone-nowhere does not exist" in text and "pvc-no-sc" in text


def test_image_pull_error_from_the_container_state(k8s_cluster, k8s_namespace, api):
    submit(api, document("pull", task("header", head=True, replicas=1, selector={"kubernetes.io/hostname": "cpu-0"})))
    wait_for(lambda: "pull-header-0" in k8s_namespace.pods(), 60, "Pod created")
    k8s_namespace.annotate("pod", "pull-header-0", **{"rlark.test__fault": "image-pull"})
    text = wait_for(
        lambda: (t := pending_messages(api, "pull")) and "ImagePullBackOff" in t and t, 60, "image pull reason"
    )
    assert "registry.example.com/rlinf/rlinf:0.2.1" in text


def test_resource_quota_that_refuses_pod_creation(k8s_cluster, k8s_namespace, api):
    k8s_namespace.apply(
        [{"apiVersion": "v1", "kind": "ResourceQuota", "metadata": {"name": "team"}, "spec": {"hard": {"pods": "2"}}}]
    )
    submit(
        api,
        document(
            "quota",
            task("header", head=True, replicas=1, selector={"kubernetes.io/hostname": "cpu-0"}),
            task("rollout", head=False, replicas=3, selector={"pool": "gpu"}, gpus=1),
        ),
    )
    text = wait_for(lambda: (t := pending_messages(api, "quota")) and "quota" in t and t, 60, "quota reason")
    assert "ResourceQuota is used up" in text and "exceeded quota: team" in text, text
