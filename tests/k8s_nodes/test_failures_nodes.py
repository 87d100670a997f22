"""Real failures on real Pods (kubelet, containerd, the image built here), through the REST API: the Diagnosis of a
Failed job names the failing Worker, its last stage, its exit code, its first error (never an INFO line) and the
lines before the exit, from the kubelet's log of the current container or, after a restart, of the previous one;
and a running job names the Ray nodes that have not joined ("Ray nodes 2/3, missing rollout-1 (rank 2)").

Seed 05-troubleshooting-jobs-workers ("定位第一条错误"; "对照 Head ray status 和每个预期 Worker 的连接日志").
"""

from __future__ import annotations

import pytest
from rest_framework.test import APIClient

from jobs.observe.status import get_condition
from tests.failure_scripts import LOST_ONE, PREPARE_EXIT_2, TRACEBACK, crash_once
from tests.k8s_nodes.jobs import demo_job
from tests.k8s_real.jobs import synced

pytestmark = [pytest.mark.k8s_nodes, pytest.mark.django_db(transaction=True), pytest.mark.timeout(900)]


def header_only(name: str, image: str, run_script: str = "sleep 600", prepare: str = "") -> dict:
    doc = demo_job(name, image, rollouts=0)
    doc["spec"]["tasks"] = doc["spec"]["tasks"][:1]
    doc["spec"]["tasks"][0]["runScript"] = run_script
    if prepare:
        doc["spec"]["tasks"][0]["prepareScript"] = prepare
    pod = doc["spec"]["tasks"][0]["kubernetes"]["workload"]["template"]["spec"]
    pod["volumes"] = [{"name": "scratch", "emptyDir": {}}]
    pod["containers"][0]["volumeMounts"] = [{"name": "scratch", "mountPath": "/scratch"}]
    return doc


def failure(api: APIClient, name: str, lang: str = "en") -> dict:
    resp = api.get(f"/api/v1/jobs/{name}/diagnosis/", HTTP_ACCEPT_LANGUAGE=lang)
    assert resp.status_code == 200, resp.content
    return resp.json()["failure"]


def test_real_failures_are_named_and_missing_ray_nodes_are_listed(real_nodes, real_cluster, real_namespace, alice):
    api = APIClient()
    api.force_authenticate(alice)
    image = real_nodes.worker
    nodes = demo_job("kn", image)
    nodes["spec"]["tasks"][0]["runScript"] = "sleep 600"
    nodes["spec"]["tasks"][1]["prepareScript"] = LOST_ONE
    docs = {
        "kprep": header_only("kprep", image, prepare=PREPARE_EXIT_2),
        "ktrace": header_only("ktrace", image, run_script=TRACEBACK),
        "kagain": header_only("kagain", image, prepare=crash_once("/scratch")),
        "knoray": header_only("knoray", image, prepare="export PATH=/nonexistent"),
        "kn": nodes,
    }
    for doc in docs.values():
        resp = api.post("/api/v1/jobs/", doc, format="json")
        assert resp.status_code == 201, resp.content

    for name in ("kprep", "ktrace", "kagain", "knoray"):
        job = synced(name, lambda j: j.phase in ("Succeeded", "Failed"), 240, f"{name} to end")
        assert job.phase == "Failed", job.message

    prep = failure(api, "kprep")
    assert prep["pod"] == "kprep-header-0" and prep["exitCode"] == 2 and prep["lastStage"] == "prepare", repr(prep)
    assert (prep["firstError"] or {}).get("line") == "cat: /data/robot.yaml: No such file or directory", repr(prep)

    trace = failure(api, "ktrace")
    assert trace["exitCode"] == 1 and trace["lastStage"] == "run_script", repr(trace)
    assert (trace["firstError"] or {}).get("line") == "Traceback (most recent call last):", repr(trace)
    assert trace["tail"][-1] == "Run script exited with code 1" and any("JSONDecodeError" in t for t in trace["tail"])

    again = failure(api, "kagain")
    assert again["pod"] == "kagain-header-0", repr(again)
    assert "RuntimeError: boom in the first container" in "\n".join(again["tail"]), repr(again)
    assert failure(api, "kprep", "zh-hans")["lastStageLabel"] == "角色准备脚本"
    noray = failure(api, "knoray")
    noray_line = (noray["firstError"] or {}).get("line", "")
    assert noray["exitCode"] == 1 and noray_line.startswith("Error: Ray CLI is not found."), repr(noray)

    def two_of_three(job):
        c = get_condition(job.conditions, "RayNodesJoined")
        return c is not None and c["message"] == "Ray nodes 2/3, missing rollout-1 (rank 2)"

    job = synced("kn", two_of_three, 240, "Ray nodes 2/3 on real Pods")
    assert job.phase != "Failed", job.message
    # the Worker that cannot reach the head: named by the Diagnosis with the address it waits for
    diag = api.get("/api/v1/jobs/kn/diagnosis/", HTTP_ACCEPT_LANGUAGE="en").json()
    (waiting,) = [f for f in diag["findings"] if f["code"] == "head_unreachable"]
    assert waiting["pod"] == "kn-rollout-1", diag["findings"]
