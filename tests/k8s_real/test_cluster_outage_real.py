"""One cluster whose API server process stops must not delay the status of the others; it shows
Offline with the reason and comes back by itself when its API server is back. Cluster B has a control plane of
its own (same etcd, certificates and port when restarted), cluster A is the session's."""

from __future__ import annotations

import time

import pytest
import yaml
from rest_framework.test import APIClient

from clusters.models import Cluster
from jobs.observe.sync import sync_all_clusters
from tests.k8s_real.conftest import wait_for
from tests.k8s_real.jobs import document, running, synced, task
from tools.k8s.controlplane import ControlPlane
from tools.k8s.fleet import NodeSpec, add_nodes, console_kubeconfig

pytestmark = [pytest.mark.k8s_real, pytest.mark.django_db(transaction=True), pytest.mark.timeout(300)]


@pytest.fixture
def second_control_plane(control_plane, tmp_path):
    cp = ControlPlane.start(control_plane.bins, tmp_path / "cp-b", die_with_parent=True)
    try:
        add_nodes(cp, [NodeSpec(name="edge-0", labels={"pool": "edge"}, gpus=0, cpu=16)])
        yield cp
    finally:
        cp.stop()


def test_stopped_api_server_goes_offline_without_slowing_the_others(
    k8s_cluster, k8s_namespace, second_control_plane, admin_user, alice
):
    admin = APIClient()
    admin.force_authenticate(admin_user)
    resp = admin.post(
        "/api/v1/clusters/",
        {
            "name": "kwok-b",
            "runtime": "kubernetes",
            "namespace": "rlark-system",
            "kubeconfig": yaml.safe_dump(console_kubeconfig(second_control_plane, "rlark-system")),
        },
        format="json",
    )
    assert resp.status_code == 201, resp.content

    second_control_plane.stop_apiserver()
    api = APIClient()
    api.force_authenticate(alice)
    doc = document("outage-a", task("header", head=True, replicas=1, selector={"kubernetes.io/hostname": "cpu-0"}))
    assert api.post("/api/v1/jobs/", doc, format="json").status_code == 201
    wait_for(lambda: running(k8s_namespace, 1), 60, "header Running on cluster A")
    k8s_namespace.write_log("outage-a-header-0", ["Ray cluster is ready", "Executing run script..."])

    started = time.monotonic()
    sync_all_clusters(force=True)
    elapsed = time.monotonic() - started
    job = synced("outage-a", lambda j: j.phase == "Running", 20, "job on A Running during B's outage")
    assert job.phase == "Running"
    assert elapsed < 5, f"a sync cycle took {elapsed:.1f} s while cluster B was down"
    b = Cluster.objects.get(name="kwok-b")
    assert b.status == "offline"
    assert "cannot reach" in b.status_message or "unreachable" in b.status_message, b.status_message
    assert Cluster.objects.get(name="kwok-a").status == "online"

    second_control_plane.start_apiserver()
    wait_for(
        lambda: sync_all_clusters(force=True) and Cluster.objects.get(name="kwok-b").status == "online",
        60,
        "cluster B online again",
        interval=1,
    )
