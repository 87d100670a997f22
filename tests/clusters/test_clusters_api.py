"""Cluster registration, node sync, node API and the kubeconfig-secrecy guarantee, over the fake API
server."""

from __future__ import annotations

import logging
import time

import pytest
import yaml
from django.db import connection
from django.test.utils import CaptureQueriesContext
from rest_framework.test import APIClient

from clusters.models import Cluster, Node
from clusters.services.node_sync import sync_all_clusters, sync_cluster_nodes
from tests.fake_k8s import FakeKubernetes
from tests.fake_k8s.fixtures import MARKER_TOKEN, fake_k8s, fake_kubeconfig  # noqa: F401

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def fast_timeouts(settings):
    settings.RLARK_K8S_CONNECT_TIMEOUT = 1
    settings.RLARK_K8S_READ_TIMEOUT = 2


@pytest.fixture
def admin_api(admin_user):
    client = APIClient()
    client.force_authenticate(admin_user)
    return client


@pytest.fixture
def user_api(alice):
    client = APIClient()
    client.force_authenticate(alice)
    return client


def seed_nodes(fake: FakeKubernetes) -> None:
    fake.add_node(
        "gpu-0",
        {"pool": "head", "rlark.io/gpu-model": "A100"},
        {"nvidia.com/gpu": 8, "cpu": 64, "memory": "512Gi"},
    )
    fake.add_node(
        "gpu-1",
        {"pool": "rollout", "rlark.io/gpu-model": "A100"},
        {"nvidia.com/gpu": 8, "cpu": 64, "memory": "512Gi"},
    )
    fake.add_node(
        "franka-1",
        {"pool": "rollout", "rlark.io/node-category": "robot"},
        {"rlinf.io/device-franka": 1, "cpu": 8, "memory": "16Gi"},
    )


def register(api, fake, name="gpu-a", **extra):
    body = {"name": name, "runtime": "kubernetes", "kubeconfig": yaml.safe_dump(fake.kubeconfig()), **extra}
    return api.post("/api/v1/clusters/", body, format="json")


def test_register_kubernetes_cluster_and_see_nodes(admin_api, user_api, fake_k8s):  # noqa: F811
    seed_nodes(fake_k8s)
    resp = register(admin_api, fake_k8s, pod_cidr="10.244.0.0/16", service_cidr="10.96.0.0/12")
    assert resp.status_code == 201, resp.content
    body = resp.json()
    assert body["status"] == "online" and body["nodes"]["total"] == 3 and body["gpus"] == {"total": 16, "free": 16}
    assert "kubeconfig" not in body and body["has_kubeconfig"] is True
    cluster = Cluster.objects.get(name="gpu-a")
    assert cluster.pod_cidr == "10.244.0.0/16" and cluster.namespace == "rlark-system"
    nodes = {n.name: n for n in cluster.nodes.all()}
    assert nodes["gpu-0"].gpu_model == "A100" and nodes["gpu-0"].category == "cloud"
    assert nodes["franka-1"].category == "robot" and nodes["franka-1"].capacity["rlinf.io/device-franka"] == 1
    listing = user_api.get("/api/v1/clusters/").json()
    assert [c["name"] for c in listing] == ["gpu-a"]
    detail = user_api.get("/api/v1/clusters/gpu-a/").json()
    assert sorted(n["name"] for n in detail["node_list"]) == ["franka-1", "gpu-0", "gpu-1"]
    # only admins register
    assert register(user_api, fake_k8s, name="other").status_code == 403


@pytest.mark.parametrize(
    "case,code,text",
    [
        ("refused", "unreachable", "connection refused"),
        ("token", "unauthorized", "401"),
        ("namespace", "namespace_missing", "does not exist"),
        ("rbac", "forbidden", "create pods/exec"),
        ("garbage", "kubeconfig_invalid", "kubeconfig"),
    ],
)
def test_connectivity_test_on_save_gives_clear_400(admin_api, fake_k8s, case, code, text):  # noqa: F811
    kubeconfig = fake_k8s.kubeconfig()
    extra = {}
    if case == "refused":
        fake_k8s.refuse_connections()
    elif case == "token":
        kubeconfig = fake_k8s.kubeconfig(token="expired-token")
    elif case == "namespace":
        extra["namespace"] = "missing-ns"
    elif case == "rbac":
        fake_k8s.denied.add(("create", "pods/exec"))
    body = {"name": "bad", "runtime": "kubernetes", "kubeconfig": yaml.safe_dump(kubeconfig), **extra}
    if case == "garbage":
        body["kubeconfig"] = "::: not yaml {"
    resp = admin_api.post("/api/v1/clusters/", body, format="json")
    assert resp.status_code == 400
    assert resp.json()["code"] == code and text in resp.json()["detail"]
    assert MARKER_TOKEN not in resp.content.decode()
    assert not Cluster.objects.filter(name="bad").exists()


def test_kubeconfig_upload_as_file(admin_api, fake_k8s):  # noqa: F811
    from django.core.files.uploadedfile import SimpleUploadedFile

    upload = SimpleUploadedFile("config", yaml.safe_dump(fake_k8s.kubeconfig()).encode())
    resp = admin_api.post(
        "/api/v1/clusters/", {"name": "filed", "runtime": "kubernetes", "kubeconfig": upload}, format="multipart"
    )
    assert resp.status_code == 201, resp.content


def test_register_local_cluster_inline_nodes(admin_api, user_api):
    body = {
        "name": "alpha",
        "runtime": "local",
        "nodes": [
            {
                "name": "alpha-0",
                "labels": {"pool": "head", "rlark.io/gpu-model": "A100"},
                "capacity": {"nvidia.com/gpu": 8, "cpu": 32, "memory": "256Gi"},
            },
            {"name": "alpha-1", "labels": {"pool": "rollout"}, "capacity": {"cpu": 16}},
        ],
    }
    resp = admin_api.post("/api/v1/clusters/", body, format="json")
    assert resp.status_code == 201, resp.content
    node = Node.objects.get(name="alpha-0")
    assert node.labels["kubernetes.io/hostname"] == "alpha-0" and node.capacity["memory"] == 256 * 2**30
    dup = admin_api.post("/api/v1/clusters/", body, format="json")
    assert dup.status_code == 400 and dup.json()["code"] == "exists"
    bad = admin_api.post("/api/v1/clusters/", {"name": "Bad_Name", "runtime": "local"}, format="json")
    assert bad.status_code == 400 and bad.json()["field"] == "name"


def test_nodes_selector_match_with_per_cluster_counts(admin_api, user_api, fake_k8s):  # noqa: F811
    seed_nodes(fake_k8s)
    register(admin_api, fake_k8s)
    admin_api.post(
        "/api/v1/clusters/",
        {"name": "beta", "runtime": "local", "nodes": [{"name": "beta-0", "labels": {"pool": "rollout"}}]},
        format="json",
    )
    data = user_api.get("/api/v1/nodes/", {"selector": "pool=rollout"}).json()
    assert data["count"] == 3 and data["selector"] == {"pool": "rollout"}
    assert data["clusters"] == [
        {"cluster": "beta", "count": 1, "schedulable": 1},
        {"cluster": "gpu-a", "count": 2, "schedulable": 2},
    ]
    data = user_api.get("/api/v1/nodes/", {"selector": "pool=rollout,rlark.io/gpu-model=A100"}).json()
    assert [(n["cluster"], n["name"]) for n in data["nodes"]] == [("gpu-a", "gpu-1")]
    assert data["nodes"][0]["gpus"] == {"total": 8, "free": 8}
    data = user_api.get("/api/v1/nodes/", {"selector": "kubernetes.io/hostname=gpu-0,gpu-1"}).json()
    assert data["count"] == 2
    assert user_api.get("/api/v1/nodes/", {"selector": "pool=a=b"}).status_code == 400
    everything = user_api.get("/api/v1/nodes/", {"category": "robot"}).json()
    assert [n["name"] for n in everything["nodes"]] == ["franka-1"]


def test_cordon_uncordon_api(admin_api, user_api, fake_k8s):  # noqa: F811
    seed_nodes(fake_k8s)
    register(admin_api, fake_k8s)
    assert user_api.post("/api/v1/nodes/gpu-a/gpu-1/cordon/").status_code == 403
    resp = admin_api.post("/api/v1/nodes/gpu-a/gpu-1/cordon/")
    assert resp.status_code == 200 and resp.json()["cordoned"] is True
    assert fake_k8s.get("nodes", "", "gpu-1")["spec"]["unschedulable"] is True
    assert Node.objects.get(name="gpu-1").unschedulable
    # cordoned is not offline, and the match view counts it as not schedulable
    data = user_api.get("/api/v1/nodes/", {"selector": "pool=rollout"}).json()
    assert data["count"] == 2 and data["schedulable"] == 1
    assert Node.objects.get(name="gpu-1").online
    admin_api.post("/api/v1/nodes/gpu-a/gpu-1/uncordon/")
    assert fake_k8s.get("nodes", "", "gpu-1")["spec"]["unschedulable"] is False


@pytest.fixture
def two_clusters(admin_api):
    servers = [FakeKubernetes(token=MARKER_TOKEN).start() for _ in range(2)]
    for i, fake in enumerate(servers):
        fake.add_node(f"n{i}-0", {"pool": "x"}, {"nvidia.com/gpu": 4, "cpu": 8, "memory": "32Gi"})
        assert register(admin_api, fake, name=f"c{i}").status_code == 201
    yield servers
    for fake in servers:
        fake.stop()


@pytest.mark.parametrize("fault", ["500", "timeout", "refused"])
def test_one_cluster_failing_goes_offline_others_keep_syncing(two_clusters, fault):
    bad, good = two_clusters
    if fault == "refused":
        bad.refuse_connections()
    else:
        bad.set_fault(fault, delay=6)
    good.add_node("n1-1", {"pool": "x"}, {"nvidia.com/gpu": 2})
    results = {r.cluster: r for r in sync_all_clusters(force=True)}
    c0, c1 = Cluster.objects.get(name="c0"), Cluster.objects.get(name="c1")
    assert not results["c0"].ok and c0.status == "offline"
    assert {"500": "500", "timeout": "timed out", "refused": "connection refused"}[fault] in c0.status_message
    assert not Node.objects.get(name="n0-0").online
    assert results["c1"].ok and c1.status == "online"
    assert sorted(c1.nodes.values_list("name", flat=True)) == ["n1-0", "n1-1"]
    # recovery without manual action: the next sync brings it back
    bad.set_fault(None)
    bad.accept_connections()
    if fault == "timeout":  # a slow failure backs off: the next cycle does not wait for the dead API again
        started = time.monotonic()
        skipped = sync_cluster_nodes(c0)
        assert skipped.skipped and not skipped.ok and time.monotonic() - started < 0.5
        assert skipped.error == results["c0"].error
    # fast failures (500, refused) are retried at once: recovery shows at the very next sync
    assert sync_cluster_nodes(c0, force=fault == "timeout").ok
    c0.refresh_from_db()
    assert c0.status == "online" and c0.status_message == "" and Node.objects.get(name="n0-0").online


def test_sync_writes_only_changes_and_queries_are_constant(admin_api, fake_k8s):  # noqa: F811
    seed_nodes(fake_k8s)
    register(admin_api, fake_k8s)
    cluster = Cluster.objects.get(name="gpu-a")
    sync_cluster_nodes(cluster)
    with CaptureQueriesContext(connection) as unchanged:
        result = sync_cluster_nodes(cluster)
    assert result.ok and result.updated == 0 and result.created == 0
    writes = [q for q in unchanged.captured_queries if not q["sql"].lstrip().upper().startswith("SELECT")]
    assert not [q for q in writes if "UPDATE" in q["sql"].upper() or "INSERT" in q["sql"].upper()]
    # 50 more pods on the nodes change "used" but not the number of queries
    for i in range(50):
        fake_k8s.put(
            "pods",
            "rlark-system",
            {
                "metadata": {"name": f"p{i}"},
                "spec": {
                    "nodeName": "gpu-1",
                    "containers": [{"name": "main", "resources": {"requests": {"cpu": "1"}}}],
                },
                "status": {"phase": "Running"},
            },
        )
    with CaptureQueriesContext(connection) as changed:
        result = sync_cluster_nodes(cluster)
    assert result.updated == 1 and Node.objects.get(name="gpu-1").used["cpu"] == 50
    assert len(changed.captured_queries) <= len(unchanged.captured_queries) + 4
    fake_k8s.set_node_ready("gpu-0", False)
    sync_cluster_nodes(cluster)
    cluster.refresh_from_db()
    assert cluster.status == "degraded" and "1 of 3" in cluster.status_message
    fake_k8s._delete("nodes", "", "franka-1", None)
    assert sync_cluster_nodes(cluster).deleted == 1


def test_kubeconfig_never_leaks(admin_user, fake_k8s, caplog, client):  # noqa: F811
    """A marker string from the kubeconfig appears in no page, API response, log line or DB column."""
    caplog.set_level(logging.DEBUG)
    seed_nodes(fake_k8s)
    api = APIClient()
    api.force_authenticate(admin_user)
    texts = [register(api, fake_k8s).content.decode()]
    cluster = Cluster.objects.get(name="gpu-a")
    fake_k8s.set_fault("500")
    sync_cluster_nodes(cluster)
    fake_k8s.set_fault(None)
    texts.append(register(api, FakeKubernetes(token=MARKER_TOKEN), name="never-started").content.decode())
    texts += [api.get(u).content.decode() for u in ("/api/v1/clusters/", "/api/v1/clusters/gpu-a/", "/api/v1/nodes/")]
    client.force_login(admin_user)
    for url in ("/clusters/", "/admin/clusters/cluster/", f"/admin/clusters/cluster/{cluster.pk}/change/"):
        resp = client.get(url)
        assert resp.status_code == 200, url
        texts.append(resp.content.decode())
    texts.append(caplog.text)
    for text in texts:
        assert MARKER_TOKEN not in text
    # the model holds it decrypted in memory, the database only as ciphertext
    assert MARKER_TOKEN in Cluster.objects.get(name="gpu-a").kubeconfig
    with connection.cursor() as cur:
        for table in connection.introspection.table_names():
            cur.execute(f'SELECT * FROM "{table}"')  # noqa: S608
            for row in cur.fetchall():
                assert not any(MARKER_TOKEN in str(v) for v in row), table
