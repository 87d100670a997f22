"""The fleet back office against the REAL control plane: console-owned node metadata survives the
node sync and its labels are written back to the Node; cordon really sets ``spec.unschedulable``; a
control-plane Node is a system node kept out of the listing."""

from __future__ import annotations

import json

import pytest
from rest_framework.test import APIClient

from accounts.models import AuditEvent
from clusters.models import Node
from clusters.services import node_metadata, node_sync
from tests.k8s_real.conftest import wait_for
from tools.k8s.fleet import NodeSpec, add_nodes, delete_nodes

pytestmark = [pytest.mark.k8s_real, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def own_nodes(control_plane):
    """Three kwok Nodes of this test only (removed afterwards): ``adm-0``, ``adm-1`` and the control-plane
    ``adm-cp``."""
    specs = [
        NodeSpec(name="adm-0", labels={"pool": "adm", "rlark.io/node-category": "cloud"}, gpus=4),
        NodeSpec(name="adm-1", labels={"pool": "adm"}, gpus=4),
        NodeSpec(name="adm-cp", labels={"pool": "adm", "node-role.kubernetes.io/control-plane": ""}, gpus=4),
    ]
    add_nodes(control_plane, specs)
    yield [s.name for s in specs]
    delete_nodes(control_plane, [s.name for s in specs])


def _node(control_plane, name: str) -> dict:
    return json.loads(control_plane.kubectl("get", "node", name, "-o", "json"))


def _sync(cluster) -> None:
    result = node_sync.sync_cluster_nodes(cluster, force=True)
    assert result.ok, result.error


def test_console_metadata_survives_sync_and_labels_are_written_back(k8s_cluster, control_plane, own_nodes, admin_user):
    _sync(k8s_cluster)
    qs = Node.objects.filter(cluster=k8s_cluster, name="adm-0").select_related("cluster")
    control_plane.kubectl("annotate", "node", "adm-0", "rlark.io/gpu-model=A800", "--overwrite")
    _sync(k8s_cluster)
    assert qs.get().gpu_model == "A800"  # discovered, nothing owned yet

    for field, value, key in [
        ("gpu_model", "H100", ""),
        ("category", "edge", ""),
        ("site", "rack-7", ""),
        ("label", "team-a", "rlark.io/team"),
    ]:
        result = node_metadata.set_field(qs, field, value, key=key, actor=admin_user)
        assert result.changed == 1 and not result.warnings, result.warnings
    written = _node(control_plane, "adm-0")["metadata"]["labels"]
    assert written["rlark.io/team"] == "team-a" and written["rlark.io/node-category"] == "edge"  # RBAC: patch nodes

    # an operator (or the data plane) changes the same keys on the Node, and a discovered key too
    control_plane.kubectl("label", "node", "adm-0", "rlark.io/node-category=cloud", "pool=adm2", "--overwrite")
    control_plane.kubectl("annotate", "node", "adm-0", "rlark.io/gpu-model=A800", "rlark.io/site=old", "--overwrite")
    _sync(k8s_cluster)
    node = qs.get()
    assert node.gpu_model == "H100" and node.category == "edge"  # console-owned keys win
    assert node.annotations["rlark.io/site"] == "rack-7" and node.labels["rlark.io/team"] == "team-a"
    assert node.labels["pool"] == "adm2"  # discovered keys follow the cluster
    assert node.discovered_labels["rlark.io/node-category"] == "cloud"  # what the cluster says is still kept

    # removing a console label removes it from the Node too
    node_metadata.set_field(qs, "label", None, key="rlark.io/team", actor=admin_user)
    assert "rlark.io/team" not in _node(control_plane, "adm-0")["metadata"]["labels"]
    _sync(k8s_cluster)
    assert "rlark.io/team" not in qs.get().labels


def test_cordon_and_uncordon_set_spec_unschedulable_and_are_audited(k8s_cluster, control_plane, own_nodes, admin_user):
    _sync(k8s_cluster)
    api = APIClient()
    api.force_authenticate(admin_user)
    resp = api.post("/api/v1/nodes/kwok-a/adm-1/cordon/")
    assert resp.status_code == 200 and resp.json()["cordoned"] is True
    assert _node(control_plane, "adm-1")["spec"].get("unschedulable") is True
    _sync(k8s_cluster)
    assert Node.objects.get(cluster=k8s_cluster, name="adm-1").unschedulable
    resp = api.post("/api/v1/nodes/kwok-a/adm-1/uncordon/")
    assert resp.status_code == 200 and resp.json()["cordoned"] is False
    assert not _node(control_plane, "adm-1")["spec"].get("unschedulable")
    actions = list(AuditEvent.objects.filter(object_id="kwok-a/adm-1").values_list("action", flat=True))
    assert sorted(actions) == ["node.cordon", "node.uncordon"]


def test_control_plane_node_is_a_system_node(k8s_cluster, control_plane, own_nodes, admin_user):
    def synced() -> bool:
        node_sync.sync_cluster_nodes(k8s_cluster, force=True)
        return Node.objects.filter(cluster=k8s_cluster, name__in=own_nodes).count() == 3

    wait_for(synced, 20, "own nodes synced")
    assert Node.objects.get(cluster=k8s_cluster, name="adm-cp").system
    api = APIClient()
    api.force_authenticate(admin_user)
    names = {n["name"] for n in api.get("/api/v1/nodes/", {"selector": "pool=adm"}).json()["nodes"]}
    assert names == {"adm-0", "adm-1"}
    assert "adm-cp" in {n["name"] for n in api.get("/api/v1/nodes/", {"system": "1"}).json()["nodes"]}


def test_job_whose_selector_matches_only_cordoned_nodes_says_so(k8s_cluster, control_plane, own_nodes, alice):
    from jobs.observe.sync import sync_all_clusters
    from tests.k8s_real.jobs import document, task

    def ready() -> bool:  # adm-1 Ready and schedulable when the job is checked
        _sync(k8s_cluster)
        return Node.objects.get(cluster=k8s_cluster, name="adm-1").online

    wait_for(ready, 30, "adm-1 Ready")
    control_plane.kubectl("cordon", "adm-1")  # an operator cordons it right after
    api = APIClient()
    api.force_authenticate(alice)
    doc = document("cordoned-only", task("header", head=True, replicas=1, selector={"kubernetes.io/hostname": "adm-1"}))
    resp = api.post("/api/v1/jobs/", doc, format="json")
    assert resp.status_code == 201, resp.content

    def reason() -> str:
        sync_all_clusters(force=True)
        data = api.get("/api/v1/jobs/cordoned-only/diagnosis/", HTTP_ACCEPT_LANGUAGE="en").json()
        text = " ".join(r["message"] for items in (data.get("pending") or {}).values() for r in items)
        return text if "is cordoned (adm-1)" in text else ""

    text = wait_for(reason, 60, "cordoned-only pending reason")
    assert "kubernetes.io/hostname=adm-1" in text


def test_node_warning_events_reach_the_node(k8s_cluster, control_plane, own_nodes):
    from datetime import UTC, datetime

    import yaml

    now = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    event = {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {"name": f"adm-0.{k8s_cluster.namespace}", "namespace": "default"},
        "involvedObject": {"kind": "Node", "name": "adm-0", "apiVersion": "v1"},
        "reason": "EvictionThresholdMet",
        "message": "Attempting to reclaim ephemeral-storage",
        "type": "Warning",
        "count": 3,
        "firstTimestamp": now,
        "lastTimestamp": now,
        "source": {"component": "kubelet", "host": "adm-0"},
    }
    control_plane.kubectl("apply", "-f", "-", input=yaml.safe_dump(event))
    try:
        _sync(k8s_cluster)  # the console's ServiceAccount lists Node events cluster-wide (deploy/rbac.yaml)
        node = Node.objects.get(cluster=k8s_cluster, name="adm-0")
        assert [(e["reason"], e["count"]) for e in node.events] == [("EvictionThresholdMet", 3)]
        assert {c["type"] for c in node.conditions} >= {"Ready"}
    finally:
        control_plane.kubectl("delete", "event", "-n", "default", event["metadata"]["name"], "--ignore-not-found")


def test_rotating_credentials_tests_the_new_one_and_keeps_the_old_until_then(
    k8s_cluster, control_plane, k8s_namespace, admin_user
):
    from tools.k8s.fleet import console_kubeconfig

    api = APIClient()
    api.force_authenticate(admin_user)
    old = k8s_cluster.kubeconfig
    url = f"/api/v1/clusters/{k8s_cluster.name}/credentials/"

    resp = api.post(url, {"token": "not-a-real-token"}, format="json")  # refused by the API server
    assert resp.status_code == 400, resp.content
    assert resp.json()["code"] == "unauthorized"
    k8s_cluster.refresh_from_db()
    assert k8s_cluster.kubeconfig == old
    _sync(k8s_cluster)  # the old credential still works

    # a valid token of a ServiceAccount without our RBAC: the same SelfSubjectAccessReview check refuses it
    control_plane.kubectl("-n", k8s_namespace.name, "create", "serviceaccount", "nobody")
    weak = control_plane.kubectl("-n", k8s_namespace.name, "create", "token", "nobody", "--duration=1h").strip()
    resp = api.post(url, {"token": weak}, format="json")
    assert resp.status_code == 400 and resp.json()["code"] == "forbidden", resp.content
    assert "missing RBAC permissions" in resp.json()["detail"]
    k8s_cluster.refresh_from_db()
    assert k8s_cluster.kubeconfig == old
    _sync(k8s_cluster)

    fresh = console_kubeconfig(control_plane, k8s_namespace.name)["users"][0]["user"]["token"]
    resp = api.post(url, {"token": fresh}, format="json")
    assert resp.status_code == 200, resp.content
    k8s_cluster.refresh_from_db()
    assert k8s_cluster.kubeconfig != old and fresh in k8s_cluster.kubeconfig
    _sync(k8s_cluster)  # and the new one is in use
    assert AuditEvent.objects.filter(action="cluster.credentials_rotated", object_id=k8s_cluster.name).count() == 1
    assert fresh not in str(list(AuditEvent.objects.values_list("detail", flat=True)))
