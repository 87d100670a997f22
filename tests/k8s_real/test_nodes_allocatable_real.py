"""Nodes against the REAL control plane: a kwok Node whose status reports its GPUs in ``allocatable`` only (no
``capacity`` entry for them: kwok's node stage fills ``capacity`` with cpu/memory/pods alone) is still a GPU node,
with its GPUs counted and the ``cloud`` category of a GPU node; when its cluster goes offline, its GPUs are no
longer shown as free on the Clusters page, the Overview, the API and the back office."""

from __future__ import annotations

import json

import pytest
from django.conf import settings
from rest_framework.test import APIClient

from clusters.models import Cluster, Node
from clusters.services import node_sync
from tests.k8s_real.conftest import wait_for
from tools.k8s.fleet import NodeSpec, delete_nodes, node_manifest

pytestmark = [pytest.mark.k8s_real, pytest.mark.django_db(transaction=True)]

NAME = "alloc-only-0"


@pytest.fixture
def allocatable_only_node(control_plane):
    """A kwok Node created with ``status.allocatable`` holding ``nvidia.com/gpu: 4`` and no ``status.capacity``."""
    doc = node_manifest(NodeSpec(name=NAME, labels={"pool": "alloc"}, gpus=4))
    doc["status"].pop("capacity")
    control_plane.kubectl("apply", "--server-side", "--force-conflicts", "-f", "-", input=json.dumps(doc))
    yield NAME
    delete_nodes(control_plane, [NAME])


def test_gpus_only_in_allocatable_make_a_gpu_node_and_an_offline_cluster_has_none_free(
    k8s_cluster, control_plane, allocatable_only_node, admin_user, client
):
    def synced() -> Node | None:
        result = node_sync.sync_cluster_nodes(k8s_cluster, force=True)
        assert result.ok, result.error
        node = Node.objects.filter(cluster=k8s_cluster, name=NAME, online=True).first()
        return node if node is not None and node.allocatable.get("nvidia.com/gpu") else None

    node = wait_for(synced, 30, "the allocatable-only node synced and Ready")
    status = json.loads(control_plane.kubectl("get", "node", NAME, "-o", "json"))["status"]
    assert "nvidia.com/gpu" not in status["capacity"] and status["allocatable"]["nvidia.com/gpu"] == "4"

    assert node.category == "cloud"  # a GPU node with no category label is cloud compute (upstream-rlark 10.2)
    api = APIClient()
    api.force_authenticate(admin_user)
    row = next(n for n in api.get("/api/v1/nodes/", {"selector": "pool=alloc"}).json()["nodes"] if n["name"] == NAME)
    assert row["category"] == "cloud" and row["gpus"] == {"total": 4, "free": 4}
    assert api.get("/api/v1/nodes/", {"category": "cloud", "selector": "pool=alloc"}).json()["nodes"]

    cluster = next(c for c in api.get("/api/v1/clusters/").json() if c["name"] == k8s_cluster.name)
    free_online = cluster["gpus"]["free"]
    assert free_online >= 4

    node_sync.mark_offline(k8s_cluster, "the API server does not answer")  # what a failed sync does
    k8s_cluster.refresh_from_db()
    assert k8s_cluster.status == Cluster.Status.OFFLINE
    cluster = next(c for c in api.get("/api/v1/clusters/").json() if c["name"] == k8s_cluster.name)
    assert cluster["gpus"]["free"] == 0 and cluster["gpus"]["total"] >= 4  # the total stays, nothing is free
    row = next(n for n in api.get("/api/v1/nodes/", {"selector": "pool=alloc"}).json()["nodes"] if n["name"] == NAME)
    assert row["gpus"] == {"total": 4, "free": 0}

    client.force_login(admin_user)
    client.cookies[settings.LANGUAGE_COOKIE_NAME] = "en"
    overview = client.get("/").content.decode()
    assert f"0 / {cluster['gpus']['total']} GPUs free" in overview
    client.cookies[settings.LANGUAGE_COOKIE_NAME] = "zh-hans"
    admin_page = client.get("/admin/clusters/node/", {"system": "show", "cluster__id__exact": k8s_cluster.pk})
    assert admin_page.status_code == 200
    row_html = next(r for r in admin_page.content.decode().split("<tr") if NAME in r)
    assert '<td class="field-category_label">云算力</td>' in row_html  # the category's name, not the code "cloud"
    assert '<td class="field-free_gpus">0</td>' in row_html

    # back online: the next sync shows its GPUs as free again
    wait_for(synced, 30, "the cluster back online")
    cluster = next(c for c in api.get("/api/v1/clusters/").json() if c["name"] == k8s_cluster.name)
    assert cluster["gpus"]["free"] == free_online
