"""Clusters & Nodes page: status, node table, filters, the htmx match box, cordon from the page, zh/en."""

from __future__ import annotations

import pytest

from clusters.models import Cluster
from clusters.services.inventory import upsert_local_nodes

pytestmark = pytest.mark.django_db


@pytest.fixture
def clusters():
    alpha = Cluster.objects.create(name="alpha", runtime="local", status="online")
    upsert_local_nodes(
        alpha,
        [
            {
                "name": "alpha-0",
                "labels": {"pool": "head", "rlark.io/gpu-model": "A100"},
                "capacity": {"nvidia.com/gpu": 8, "cpu": 32, "memory": "256Gi"},
            },
            {
                "name": "alpha-1",
                "labels": {"pool": "rollout", "rlark.io/node-category": "robot"},
                "capacity": {"rlinf.io/device-franka": 1, "cpu": 8},
            },
        ],
    )
    beta = Cluster.objects.create(
        name="beta", runtime="kubernetes", status="offline", status_message="cannot reach the Kubernetes API server"
    )
    upsert_local_nodes(beta, [{"name": "beta-0", "labels": {"pool": "rollout"}, "capacity": {"nvidia.com/gpu": 4}}])
    beta.nodes.update(online=False)
    return alpha, beta


def test_page_shows_clusters_nodes_and_reasons(client, alice, clusters):
    client.force_login(alice)
    html = client.get("/clusters/").content.decode()
    assert "集群与节点" in html and "部分离线" not in html
    assert 'data-cluster="alpha"' in html and 'data-cluster="beta"' in html
    assert "cannot reach the Kubernetes API server" in html and "已断开" in html
    assert "8 / 8 GPU" in html and "1 / 1 设备" in html and "云算力" in html and "机器人" in html
    assert "封锁" not in html  # no admin actions for users
    client.cookies["django_language"] = "en"
    html = client.get("/clusters/", HTTP_ACCEPT_LANGUAGE="en").content.decode()
    assert "<h1>Clusters & Nodes</h1>" in html.replace("&amp;", "&")
    assert "Disconnected:" in html and "Robot" in html


def test_filters(client, alice, clusters):
    client.force_login(alice)
    html = client.get("/clusters/", {"category": "robot"}).content.decode()
    assert 'data-node="alpha-1"' in html and 'data-node="alpha-0"' not in html
    html = client.get("/clusters/", {"gpu_model": "A100"}).content.decode()
    assert 'data-node="alpha-0"' in html and 'data-node="beta-0"' not in html
    html = client.get("/clusters/", {"label": "pool=rollout"}).content.decode()
    assert 'data-node="alpha-1"' in html and 'data-node="beta-0"' in html and 'data-node="alpha-0"' not in html
    html = client.get("/clusters/", {"cluster": "beta"}).content.decode()
    assert 'data-node="beta-0"' in html and 'data-node="alpha-0"' not in html


def test_match_box_global_and_per_cluster(client, alice, clusters):
    client.force_login(alice)
    html = client.get("/clusters/match/", {"selector": "pool=rollout"}, HTTP_HX_REQUEST="true").content.decode()
    assert 'data-testid="match-count">2<' in html
    assert "<td>alpha</td><td>1</td><td>1</td>" in html and "<td>beta</td><td>1</td><td>0</td>" in html
    assert 'data-testid="match-cross-cluster"' in html
    html = client.get("/clusters/match/", {"selector": "pool=head"}).content.decode()
    assert 'data-testid="match-count">1<' in html and "match-cross-cluster" not in html
    html = client.get("/clusters/match/", {"selector": "pool=a=b"}).content.decode()
    assert 'data-testid="match-error"' in html
    html = client.get("/clusters/match/", {"selector": "pool=<script>x</script>"}).content.decode()
    assert "<script>x" not in html


def test_cordon_from_page_admin_only(client, alice, admin_user, clusters):
    client.force_login(alice)
    assert client.post("/clusters/nodes/alpha/alpha-0/cordon/").status_code == 403
    client.force_login(admin_user)
    resp = client.post("/clusters/nodes/alpha/alpha-0/cordon/", {"next": "/clusters/?category=cloud"})
    assert resp.status_code == 302 and resp["Location"] == "/clusters/?category=cloud"
    html = client.get("/clusters/").content.decode()
    assert 'data-testid="node-cordoned"' in html and "确认解封节点“alpha-0”并恢复任务调度吗？" in html
    resp = client.post("/clusters/nodes/alpha/alpha-0/uncordon/", {"next": "https://evil.example/"})
    assert resp["Location"] == "/clusters/"
    assert not clusters[0].nodes.get(name="alpha-0").unschedulable
