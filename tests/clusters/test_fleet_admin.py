"""The back office for a GPU fleet: system nodes kept out, console-owned metadata that survives sync,
batch metadata edits, the capacity nodes view with a constant number of queries."""

from __future__ import annotations

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from accounts.models import AuditEvent
from clusters.models import Cluster, Node
from clusters.runtime.base import NodeInfo as RuntimeNode
from clusters.services import node_metadata, node_sync
from clusters.services.inventory import upsert_local_nodes
from clusters.system_nodes import is_system_node
from jobs.jobspec.document import normalize
from jobs.jobspec.validator import validate
from tests.spec_fixtures import base_doc, inventory, node

pytestmark = pytest.mark.django_db

CP = {"node-role.kubernetes.io/control-plane": ""}


@pytest.mark.parametrize(
    ("labels", "system"),
    [
        ({"node-role.kubernetes.io/control-plane": ""}, True),
        ({"node-role.kubernetes.io/master": "true"}, True),
        ({"kubernetes.io/role": "master"}, True),
        ({"kubernetes.io/role": "control-plane"}, True),
        ({"kubernetes.io/role": "worker"}, False),
        ({"node-role.kubernetes.io/worker": ""}, False),
        ({}, False),
    ],
)
def test_system_node_rule(labels, system):
    assert is_system_node(labels) is system


@pytest.fixture
def fleet():
    """Local cluster ``alpha``: two 8-GPU business nodes and one 8-GPU control-plane node (``cp-0``)."""
    alpha = Cluster.objects.create(name="alpha", runtime="local", status="online")
    upsert_local_nodes(
        alpha,
        [
            {"name": "gpu-0", "labels": {"pool": "gpu"}, "capacity": {"nvidia.com/gpu": 8, "cpu": 32}},
            {"name": "gpu-1", "labels": {"pool": "gpu"}, "capacity": {"nvidia.com/gpu": 8, "cpu": 32}},
            {"name": "cp-0", "labels": {"pool": "gpu", **CP}, "capacity": {"nvidia.com/gpu": 8, "cpu": 8}},
        ],
    )
    return alpha


def test_system_nodes_hidden_from_api_totals_and_page(client, admin_user, alice, fleet):
    assert Node.objects.get(name="cp-0").system
    client.force_login(alice)
    body = client.get("/api/v1/nodes/").json()
    assert sorted(n["name"] for n in body["nodes"]) == ["gpu-0", "gpu-1"] and body["count"] == 2
    assert client.get("/api/v1/nodes/", {"system": "1"}).json()["count"] == 2  # the switch is for admins only
    assert client.get("/api/v1/nodes/", {"selector": "pool=gpu"}).json()["count"] == 2
    cluster = client.get("/api/v1/clusters/alpha/").json()
    assert cluster["nodes"]["total"] == 2 and cluster["gpus"]["total"] == 16
    assert [n["name"] for n in cluster["node_list"]] == ["gpu-0", "gpu-1"]
    assert 'data-node="cp-0"' not in client.get("/clusters/").content.decode()
    client.force_login(admin_user)
    body = client.get("/api/v1/nodes/", {"system": "1"}).json()
    assert body["count"] == 3 and {n["name"]: n["control_plane"] for n in body["nodes"]}["cp-0"] is True
    assert client.get("/api/v1/clusters/alpha/").json()["gpus"]["total"] == 16  # totals never count it
    assert 'data-node="cp-0"' in client.get("/clusters/", {"system": "1"}).content.decode()


def test_admin_nodes_list_hides_system_nodes_behind_a_switch(client, admin_user, fleet):
    client.force_login(admin_user)
    html = client.get("/admin/clusters/node/").content.decode()
    assert ">gpu-0<" in html and ">cp-0<" not in html
    html = client.get("/admin/clusters/node/", {"system": "show"}).content.decode()
    assert ">gpu-0<" in html and ">cp-0<" in html
    html = client.get("/admin/clusters/node/", {"system": "only"}).content.decode()
    assert ">gpu-0<" not in html and ">cp-0<" in html


def test_validator_skips_system_nodes_in_matching_and_replica_counts():
    inv = inventory()
    doc = base_doc()  # rollout: pool=rollout, replicas 2 -> gpu-1, gpu-2
    assert validate(normalize(doc), inv).valid
    inv.nodes.append(node("local", "cp-0", pool="rollout", **CP))
    result = validate(normalize(doc), inv)
    assert result.valid, result.to_dict("en")  # a control-plane node neither matches nor changes the count
    doc["spec"]["tasks"][0]["nodeSelector"] = {"kubernetes.io/hostname": "cp-0"}
    assert "node_selector_no_match" in {p.code for p in validate(normalize(doc), inv).problems}


# ---------------------------------------------------------------- console-owned metadata


def test_merge_rule_console_keys_win_discovered_kept_for_the_rest():
    # upstream-rlark 10.1 case: management city/gpu-model/device-model kept, other discovered keys kept
    discovered = {"rlark.io/agent-note": "reported", "rlark.io/city": "stale", "other.example/note": "x"}
    console = {"rlark.io/city": "深圳市", "rlark.io/gpu-model": "NVIDIA 4090", "rlark.io/device-model": "Unitree G1"}
    assert node_metadata.merge(discovered, console) == {
        "rlark.io/agent-note": "reported",
        "rlark.io/city": "深圳市",
        "other.example/note": "x",
        "rlark.io/gpu-model": "NVIDIA 4090",
        "rlark.io/device-model": "Unitree G1",
    }
    assert node_metadata.merge({"a": "1", "b": "2"}, {"b": None}) == {"a": "1"}  # a console removal hides the key


def _sync(cluster, *infos):
    return node_sync.apply_node_infos(cluster, list(infos))


def test_console_metadata_survives_node_sync(admin_user):
    cluster = Cluster.objects.create(name="k", runtime="kubernetes", status="online")
    reported = RuntimeNode(
        name="n0",
        labels={"pool": "gpu", "rlark.io/node-category": "cloud"},
        annotations={"rlark.io/gpu-model": "A800", "rlark.io/city": "stale"},
        capacity={"nvidia.com/gpu": 8},
        allocatable={"nvidia.com/gpu": 8},
    )
    _sync(cluster, reported)
    n0 = Node.objects.get(name="n0")
    assert n0.gpu_model == "A800" and n0.category == "cloud"
    nodes = Node.objects.filter(name="n0").select_related("cluster")
    node_metadata.set_field(nodes, "gpu_model", " H100 ", actor=admin_user)
    node_metadata.set_field(nodes, "category", "edge", actor=admin_user)
    node_metadata.set_field(nodes, "city", "北京", actor=admin_user)
    node_metadata.set_field(nodes, "label", "team-a", key="rlark.io/team", actor=admin_user)
    for _ in range(2):  # a resync (changed and unchanged reports alike) never overwrites the console's values
        _sync(cluster, reported)
        n0.refresh_from_db()
        assert n0.gpu_model == "H100" and n0.category == "edge"
        assert n0.annotations["rlark.io/city"] == "北京" and n0.labels["rlark.io/team"] == "team-a"
        assert n0.labels["pool"] == reported.labels["pool"]  # discovered keys are kept (and follow the cluster)
        assert n0.discovered_annotations["rlark.io/gpu-model"] == "A800"  # and the cluster's value is still known
        reported = RuntimeNode(**{**reported.__dict__, "labels": {**reported.labels, "pool": "gpu2"}})
    assert n0.labels["pool"] == "gpu2"
    # the selector matcher sees the console label
    assert [n.name for n in Node.objects.filter(labels__has_key="rlark.io/team")] == ["n0"]


def test_batch_set_and_remove_is_audited_with_the_count(admin_user, fleet):
    qs = Node.objects.filter(system=False).select_related("cluster")
    result = node_metadata.set_field(qs, "device_model", "Franka", actor=admin_user)
    assert result.changed == 2
    again = node_metadata.set_field(qs, "device_model", "Franka", actor=admin_user)
    assert (again.changed, again.unchanged) == (0, 2)
    event = AuditEvent.objects.filter(action="node.metadata").order_by("pk").first()
    assert event.detail["count"] == 2 and event.detail["key"] == "rlark.io/device-model"
    node_metadata.set_field(qs, "device_model", None, actor=admin_user)
    assert not any("rlark.io/device-model" in n.annotations for n in Node.objects.filter(system=False))
    with pytest.raises(node_metadata.MetadataError):
        node_metadata.set_field(qs, "category", "spaceship")
    with pytest.raises(node_metadata.MetadataError):
        node_metadata.set_field(qs, "label", "has space", key="pool")
    with pytest.raises(node_metadata.MetadataError):
        node_metadata.set_field(qs, "label", "x", key="bad key/")


def test_admin_batch_action_sets_one_field_on_the_filtered_nodes(client, admin_user, fleet):
    client.force_login(admin_user)
    ids = [str(pk) for pk in Node.objects.filter(system=False).values_list("pk", flat=True)]
    form = client.post(
        "/admin/clusters/node/", {"action": "set_metadata", "_selected_action": ids, "select_across": "0"}
    )
    assert form.status_code == 200 and b'data-testid="metadata-form"' in form.content
    done = client.post(
        "/admin/clusters/node/",
        {
            "action": "set_metadata",
            "_selected_action": ids,
            "select_across": "0",
            "apply": "1",
            "field": "gpu_model",
            "operation": "set",
            "value": "H20",
        },
        follow=True,
    )
    assert done.status_code == 200
    assert set(Node.objects.filter(system=False).values_list("gpu_model", flat=True)) == {"H20"}
    assert Node.objects.get(name="cp-0").gpu_model == ""
    assert AuditEvent.objects.get(action="node.metadata").detail["count"] == 2
    html = client.get("/admin/clusters/node/", {"gpu_model": "H20"}).content.decode()
    assert ">gpu-0<" in html and ">gpu-1<" in html


def test_admin_label_and_readiness_filters(client, admin_user, fleet):
    Node.objects.filter(name="gpu-1").update(unschedulable=True)
    node_metadata.set_field(Node.objects.filter(name="gpu-0").select_related("cluster"), "label", "a", key="team")
    client.force_login(admin_user)
    html = client.get("/admin/clusters/node/", {"label": "team=a"}).content.decode()
    assert ">gpu-0<" in html and ">gpu-1<" not in html
    html = client.get("/admin/clusters/node/", {"ready": "cordoned"}).content.decode()
    assert ">gpu-1<" in html and ">gpu-0<" not in html


# ---------------------------------------------------------------- capacity view at fleet scale


def _big_fleet(n: int, owner) -> None:
    from jobs.models import Job, Pod, Task

    cluster = Cluster.objects.create(name="big", runtime="local", status="online")
    Node.objects.bulk_create(
        Node(
            cluster=cluster,
            name=f"n-{i:04d}",
            labels={"pool": "gpu"},
            capacity={"nvidia.com/gpu": 8},
            allocatable={"nvidia.com/gpu": 8},
            used={"nvidia.com/gpu": i % 9},
            online=i % 7 != 0,
        )
        for i in range(n)
    )
    job = Job.objects.create(name="busy", spec={}, owner=owner)
    task = Task.objects.create(job=job, name="busy-a", template_name="a", cluster=cluster)
    Pod.objects.bulk_create(Pod(task=task, name=f"busy-a-{i}", ordinal=i, node=f"n-{i:04d}") for i in range(30))


@pytest.mark.parametrize("order", ["", "5", "-6", "7"])  # default, GPUs used, GPUs free (desc), jobs
def test_nodes_view_over_1000_nodes_has_constant_queries(client, admin_user, order):
    _big_fleet(1000, admin_user)
    client.force_login(admin_user)
    params = {"o": order} if order else {}
    with CaptureQueriesContext(connection) as small:
        client.get("/admin/clusters/node/", {**params, "p": "1"})
    with CaptureQueriesContext(connection) as big:
        resp = client.get("/admin/clusters/node/", {**params, "p": "5", "ready": "ready"})
    assert resp.status_code == 200
    assert len(big) <= len(small) + 1 and len(big) <= 15, [q["sql"][:120] for q in big.captured_queries]
    html = resp.content.decode()
    assert html.count('class="action-select"') == 100  # paginated: 100 rows a page


def test_nodes_view_sorts_by_free_gpus_and_shows_jobs(client, admin_user):
    _big_fleet(40, admin_user)
    client.force_login(admin_user)
    html = client.get("/admin/clusters/node/", {"o": "-6"}).content.decode()  # GPUs free, most first
    first = html.index("n-0000")  # used 0 -> 8 free
    assert first < html.index("n-0008")  # used 8 -> 0 free
    node0 = Node.objects.get(name="n-0000")
    page = client.get(f"/admin/clusters/node/{node0.pk}/change/").content.decode()
    assert "busy" in page


def test_pending_reason_names_a_selector_that_matches_only_cordoned_nodes():
    from jobs.explain.pending import NodeView, PodView, RoleInput, role_reasons

    nodes = [
        NodeView("gpu-3", {"pool": "reserved"}, {"nvidia.com/gpu": 8}, unschedulable=True),
        NodeView("gpu-4", {"pool": "reserved"}, {"nvidia.com/gpu": 8}, unschedulable=True),
        NodeView("gpu-0", {"pool": "gpu"}, {"nvidia.com/gpu": 8}),
    ]
    pod = PodView("j-header-0", phase="Pending", reason="Unschedulable", message="0/6 nodes are available")
    role = RoleInput("j", "header", "j-header", 1, {"nvidia.com/gpu": 1}, {"pool": "reserved"}, [pod])
    (reason,) = role_reasons(role, nodes)
    assert "Every node matching selector pool=reserved is cordoned (gpu-3, gpu-4)" in reason.message("en")
    assert "都已封锁" in reason.message("zh-hans")
    role.selector = {"pool": "gpu"}  # a schedulable match: no cordon claim
    assert "cordoned" not in role_reasons(role, nodes)[0].message("en")
