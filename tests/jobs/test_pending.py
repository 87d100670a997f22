"""Pending reasons per role: unschedulable with the blocking resource, PVC, image pull, prepare still running."""

from __future__ import annotations

import pytest

from jobs.explain.pending import NodeView, PodView, RoleInput, blocking_resources, pending_reasons

NODES = [
    NodeView("gpu-0", {"pool": "train"}, {"nvidia.com/gpu": 8, "cpu": 16}, {"nvidia.com/gpu": 5}),
    NodeView("gpu-1", {"pool": "train"}, {"nvidia.com/gpu": 8, "cpu": 16}, {"nvidia.com/gpu": 6}),
    NodeView("gpu-2", {"pool": "train"}, {"nvidia.com/gpu": 8}, {}, unschedulable=True),  # cordoned: not counted
    NodeView("other", {"pool": "eval"}, {"nvidia.com/gpu": 8}, {}),  # selector does not match
]


def role(pods, **kw):
    base = dict(job="demo", role="Actor", task="demo-actor", replicas=1, requests={"nvidia.com/gpu": 8.0})
    base.update(selector={"pool": "train"}, pods=pods)
    base.update(kw)
    return RoleInput(**base)


def test_unschedulable_names_blocking_resource_computed_from_nodes():
    pod = PodView(
        "demo-actor-0",
        reason="Unschedulable",
        message="0/4 nodes are available: 2 Insufficient nvidia.com/gpu, 1 node(s) were unschedulable.",
    )
    (reason,) = pending_reasons([role([pod])], NODES)["Actor"]
    assert reason.code == "unschedulable"
    assert reason.resource == "nvidia.com/gpu need 8, free 3"
    en = reason.message("en")
    assert en.startswith("Job demo, role Actor: Worker demo-actor-0 cannot be scheduled.")
    assert "Blocking resource: nvidia.com/gpu need 8, free 3." in en
    assert "0/4 nodes are available" in en
    assert "阻塞资源：nvidia.com/gpu need 8, free 3。" in reason.message("zh-hans")


def test_runtime_stated_resource_wins_and_failed_scheduling_event_counts():
    pod = PodView(
        "demo-actor-0",
        events=[{"type": "Warning", "reason": "FailedScheduling", "message": "nvidia.com/gpu need 8, free 2"}],
    )
    (reason,) = pending_reasons([role([pod])], NODES)["Actor"]
    assert reason.code == "unschedulable" and reason.resource == "nvidia.com/gpu need 8, free 2"


def test_no_matching_node_and_memory_units():
    assert blocking_resources({"memory": 96 * 2**30}, {}, [NodeView("n", {}, {"memory": 64 * 2**30}, {})]) == [
        "memory need 96Gi, free 64Gi"
    ]
    pod = PodView("demo-actor-0", reason="Unschedulable", message="0/4 nodes are available")
    (reason,) = pending_reasons([role([pod], selector={"pool": "nope"})], NODES)["Actor"]
    assert reason.resource == "nvidia.com/gpu need 8, free 0"
    assert blocking_resources({"nvidia.com/gpu": 2}, {"pool": "train"}, NODES) == []


@pytest.mark.parametrize(
    ("pod", "code", "needle"),
    [
        (
            PodView(
                "demo-actor-0",
                reason="Unschedulable",
                message='0/3 nodes are available: persistentvolumeclaim "pvc-demo-actor-data" not found.',
            ),
            "pvc_unbound",
            "pvc-demo-actor-data",
        ),
        (
            PodView("demo-actor-0", container={"state": "waiting", "reason": "ImagePullBackOff", "message": "nope"}),
            "image_pull",
            "ImagePullBackOff",
        ),
        (
            PodView(
                "demo-actor-0",
                events=[{"type": "Warning", "reason": "Failed", "message": 'Failed to pull image "x": 401'}],
            ),
            "image_pull",
            'Failed to pull image "x": 401',
        ),
        (
            PodView("demo-actor-0", phase="Running", container={"state": "running"}, last_stage="prepare"),
            "prepare_running",
            "Executing prepare script...",
        ),
    ],
)
def test_other_reasons(pod, code, needle):
    (reason,) = pending_reasons([role([pod])], NODES)["Actor"]
    assert reason.code == code
    assert needle in reason.message("en") and needle in reason.message("zh-hans")


def test_missing_pod_and_running_pod():
    running = PodView("demo-actor-0", phase="Running", container={"state": "running", "ready": True})
    result = pending_reasons([role([running], replicas=2)], NODES)["Actor"]
    assert [(r.code, r.pod) for r in result] == [("no_pod", "demo-actor-1")]
    assert "demo-actor-1" in result[0].message("zh-hans")


def test_missing_claim_is_named_and_its_old_storage_class_events_are_not_blamed():
    # the claim was deleted: the scheduler names it; a ProvisioningFailed event of the deleted claim remains
    pod = PodView(
        "demo-actor-0",
        reason="Unschedulable",
        message='0/3 nodes are available: persistentvolumeclaim "pvc-demo-actor-data" not found. not found',
    )
    old = [{"reason": "ProvisioningFailed", "message": 'storageclass.storage.k8s.io "fast" not found'}]
    (reason,) = pending_reasons([role([pod], claims={"pvc-demo-actor-data": old})], NODES)["Actor"]
    en, zh = reason.message("en"), reason.message("zh-hans")
    assert "pvc-demo-actor-data" in en and "does not exist in the cluster" in en
    assert "StorageClass" not in en and "fast" not in en
    assert "pvc-demo-actor-data" in zh and "不存在" in zh and "StorageClass" not in zh


def test_a_claim_being_deleted_is_a_missing_claim():
    pod = PodView(
        "demo-actor-0",
        reason="Unschedulable",
        message='0/6 nodes are available: persistentvolumeclaim "pvc-demo-actor-data" is being deleted. not found',
        events=[{"reason": "FailedScheduling", "message": "pod has unbound immediate PersistentVolumeClaims"}],
    )
    old = [{"reason": "ProvisioningFailed", "message": 'storageclass.storage.k8s.io "fast" not found'}]
    (reason,) = pending_reasons([role([pod], claims={"pvc-demo-actor-data": old})], NODES)["Actor"]
    assert "pvc-demo-actor-data" in reason.message("en") and "does not exist" in reason.message("en")
    assert "fast" not in reason.message("en")


def test_unnamed_unbound_claim_names_the_templates_claims_not_a_question_mark():
    pod = PodView(
        "demo-actor-0",
        reason="Unschedulable",
        message="0/6 nodes are available: pod has unbound immediate PersistentVolumeClaims. not found",
    )
    (reason,) = pending_reasons([role([pod], claim_names=["pvc-demo-actor-data"])], NODES)["Actor"]
    assert reason.code == "pvc_unbound"
    assert "pvc-demo-actor-data" in reason.message("en") and "?" not in reason.message("en")
    many = [f"pvc-{i}" for i in range(7)]
    (reason,) = pending_reasons([role([pod], claim_names=many)], NODES)["Actor"]
    assert "pvc-0, pvc-1, pvc-2, pvc-3, pvc-4, …" in reason.message("en") and "pvc-5" not in reason.message("en")


def test_a_named_claim_is_not_blamed_on_another_claims_events():
    pod = PodView("demo-actor-0", reason="Unschedulable", message="PersistentVolumeClaim pvc-a is not bound")
    other = [{"reason": "ProvisioningFailed", "message": 'storageclass.storage.k8s.io "slow" not found'}]
    (reason,) = pending_reasons([role([pod], claims={"pvc-a": [], "pvc-b": other})], NODES)["Actor"]
    assert reason.code == "pvc_unbound" and "pvc-a" in reason.message("en") and "slow" not in reason.message("en")
