"""Against the real control plane: registration and nodes; a 2-role job through the REST
API (real StatefulSet controller, scheduler and kwok kubelets); stop, start, edit that removes a role, delete
with real garbage collection."""

from __future__ import annotations

import pytest
from rest_framework.test import APIClient

from clusters.models import Node
from jobs.models import Job, Pod
from tests.k8s_real.conftest import wait_for
from tests.k8s_real.jobs import document, header_and_rollout, running, synced, task

pytestmark = [pytest.mark.k8s_real, pytest.mark.django_db(transaction=True)]


def test_registration_shows_kwok_nodes_with_labels_gpus_and_cordon(k8s_cluster):
    nodes = {n.name: n for n in Node.objects.filter(cluster=k8s_cluster)}
    assert {"gpu-0", "gpu-1", "gpu-2", "gpu-3", "cpu-0", "cpu-1"} <= set(nodes)
    gpu0 = nodes["gpu-0"]
    assert gpu0.labels["rlark.io/node-category"] == "gpu"
    assert gpu0.labels["rlark.io/gpu-model"] == "A800"
    assert float(gpu0.capacity["nvidia.com/gpu"]) == 8
    assert "nvidia.com/gpu" not in nodes["cpu-0"].capacity
    assert gpu0.online and not gpu0.unschedulable
    assert nodes["gpu-3"].online and nodes["gpu-3"].unschedulable  # cordoned, still Ready
    k8s_cluster.refresh_from_db()
    assert k8s_cluster.status == "online", k8s_cluster.status_message


def test_two_role_job_runs_stops_starts_edits_and_is_deleted(k8s_cluster, k8s_namespace, alice):
    ns = k8s_namespace
    api = APIClient()
    api.force_authenticate(alice)
    resp = api.post("/api/v1/jobs/", header_and_rollout("real-a"), format="json")
    assert resp.status_code == 201, resp.content

    # server-side apply: StatefulSets, the head's headless Service, the wrapper-script ConfigMaps
    wait_for(lambda: ns.names("statefulsets") == ["real-a-header", "real-a-rollout"], 20, "both StatefulSets")
    svc = ns.get("service", "real-a-header-ray-head")
    assert svc["spec"]["clusterIP"] == "None"
    assert {"real-a-header-rlark-scripts", "real-a-rollout-rlark-scripts"} <= set(ns.names("configmaps"))

    # the real controller-manager creates ordinal Pods, the scheduler binds them, kwok runs them
    pods = wait_for(lambda: running(ns, 4), 60, "4 Running Pods")
    assert sorted(pods) == ["real-a-header-0", "real-a-rollout-0", "real-a-rollout-1", "real-a-rollout-2"]
    assert pods["real-a-header-0"]["spec"]["nodeName"] == "gpu-0"
    for name in ("real-a-rollout-0", "real-a-rollout-1", "real-a-rollout-2"):
        assert pods[name]["spec"]["nodeName"] in {"gpu-0", "gpu-1", "gpu-2"}  # never the cordoned gpu-3

    ns.write_log("real-a-header-0", ["Starting Ray head", "Ray cluster is ready", "Executing run script..."])
    job = synced("real-a", lambda j: j.phase == "Running", 30, "job Running")
    status = api.get("/api/v1/jobs/real-a/").json()["status"]
    workers = {w["pod"]: w for w in status["workers"]}
    assert set(workers) == set(pods)
    for name, pod in pods.items():
        w = workers[name]
        assert w["node"] == pod["spec"]["nodeName"]
        assert w["ip"] == pod["status"]["podIP"] and w["ip"]
        assert w["phase"] == "Running"
    assert {n: workers[n]["rank"] for n in workers} == {
        "real-a-header-0": 0,
        "real-a-rollout-0": 1,
        "real-a-rollout-1": 2,
        "real-a-rollout-2": 3,
    }
    env = {
        e["name"]: e.get("value")
        for e in ns.get("statefulset", "real-a-rollout")["spec"]["template"]["spec"]["containers"][0]["env"]
    }
    assert env["RLARK_NODE_RANK_START"] == "1"

    # stop: replicas 0, the real controller deletes the Pods
    assert api.post("/api/v1/jobs/real-a/stop/").status_code == 200
    assert [s["spec"]["replicas"] for s in ns.get("statefulsets")["items"]] == [0, 0]
    wait_for(lambda: ns.pods() == {}, 60, "Pods gone after Stop")
    synced("real-a", lambda j: j.phase == "Stopped", 30, "job Stopped")

    # start: they come back, Running again
    assert api.post("/api/v1/jobs/real-a/start/").status_code == 200
    wait_for(lambda: running(ns, 4), 60, "4 Running Pods after Start")
    synced("real-a", lambda j: j.phase == "Running", 30, "job Running after Start")

    # an edit that removes the rollout role deletes its Task (StatefulSet and its Pods)
    edited = document(
        "real-a",
        task("header", head=True, replicas=1, selector={"kubernetes.io/hostname": "gpu-0"}, gpus=4, role="Actor"),
    )
    resp = api.put("/api/v1/jobs/real-a/", edited, format="json")
    assert resp.status_code == 200, resp.content
    wait_for(lambda: ns.names("statefulsets") == ["real-a-header"], 30, "rollout StatefulSet deleted")
    wait_for(lambda: sorted(ns.pods()) == ["real-a-header-0"], 60, "rollout Pods garbage-collected")
    job = Job.objects.get(name="real-a")
    assert sorted(t.template_name for t in job.tasks.all()) == ["header"]

    # delete: nothing of the job is left in the namespace; garbage collection really ran
    assert api.delete("/api/v1/jobs/real-a/").status_code in (200, 204)

    def leftovers():
        out = ns.kubectl("get", "all,configmaps,secrets,pvc", "-o", "name", "-l", "rlinf.io/job=real-a")
        named = ns.kubectl("get", "statefulsets,pods,services,controllerrevisions", "-o", "name")
        return [line for line in (out + named).splitlines() if "real-a" in line]

    wait_for(lambda: leftovers() == [], 60, "namespace empty of the job")
    assert not Job.objects.filter(name="real-a").exists()
    assert not Pod.objects.filter(name__startswith="real-a-").exists()
