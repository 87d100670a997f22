"""A run on a real Pod, stopped and resumed from its latest complete checkpoint, through the REST API: the run
script (the RLinf-like writer of ``tests/clusters/test_checkpoints_local.py``) saves into a hostPath on the real
node and cuts the save of step 5 off; the Checkpoints API, read inside the Worker, shows steps 1-4 complete and 5
incomplete; once the job is stopped (no Worker left to read them) the last listing is what a resume chooses from;
the incomplete one is refused and ``latest`` resumes from step 4 in a new run whose first logged step is 5."""

from __future__ import annotations

import re
import time

import pytest
from rest_framework.test import APIClient

from terminal.services.runtimes import use_runtime_factory
from tests.clusters.test_checkpoints_local import WRITER
from tests.k8s_nodes.jobs import demo_job, pod_logs
from tests.k8s_real.conftest import wait_for
from tests.k8s_real.jobs import synced
from tools.k8s.controlplane import ControlPlaneError

pytestmark = [pytest.mark.k8s_nodes, pytest.mark.django_db(transaction=True), pytest.mark.timeout(900)]

JOB = "kck"
RUN_SCRIPT = (
    "python3 -u /data/examples/ckpt/train_ckpt.py --config-name ckpt "
    'runner.ckpt_root="/data/$RLARK_RUN_ID/checkpoints" runner.max_steps=6 runner.cut_step=5'
)


def head_log(ns) -> str:
    """The Header's log, "" while its container is not started."""
    try:
        return ns.kubectl("logs", f"{JOB}-header-0", "-c", "main")
    except ControlPlaneError:
        return ""


def listing(api: APIClient, predicate, timeout: float) -> dict:
    deadline = time.monotonic() + timeout
    while True:
        body = api.get(f"/api/v1/jobs/{JOB}/checkpoints/", HTTP_ACCEPT_LANGUAGE="en").json()
        if predicate(body):
            return body
        if time.monotonic() > deadline:
            raise AssertionError(f"checkpoints never got there: {body}")
        time.sleep(3)


def test_a_stopped_run_on_real_pods_resumes_from_its_latest_complete_checkpoint(
    real_nodes, real_cluster, real_namespace, alice, tmp_path_factory
):
    root = tmp_path_factory.mktemp("node-checkpoints")
    host = root / real_namespace.name
    (host / "examples" / "ckpt").mkdir(parents=True)
    (host / "examples" / "ckpt" / "train_ckpt.py").write_text(WRITER)
    real_cluster.allow_host_path = True
    real_cluster.host_path_roots = str(root)
    real_cluster.save(update_fields=["allow_host_path", "host_path_roots"])
    use_runtime_factory(None)
    doc = demo_job(JOB, real_nodes.worker, rollouts=0)
    doc["spec"]["tasks"] = doc["spec"]["tasks"][:1]
    header = doc["spec"]["tasks"][0]
    header["runScript"] = RUN_SCRIPT
    header["checkpointDir"] = "/data/$RLARK_RUN_ID/checkpoints"
    pod = header["kubernetes"]["workload"]["template"]["spec"]
    pod["containers"][0]["volumeMounts"] = [{"name": "data", "mountPath": "/data"}]
    pod["volumes"] = [{"name": "data", "hostPath": {"path": str(host), "type": "DirectoryOrCreate"}}]
    api = APIClient()
    api.force_authenticate(alice)
    assert api.post("/api/v1/jobs/", doc, format="json").status_code == 201
    try:
        wait_for(
            lambda: "save of step 5 cut off" in head_log(real_namespace),
            240,
            "the cut save",
        )
    except pytest.fail.Exception as exc:
        raise AssertionError(f"{exc}\n{pod_logs(real_namespace)}") from None
    synced(JOB, lambda j: j.phase == "Running", 60, "job Running")

    body = listing(
        api, lambda b: b["checkpoints"] and all(c["state"] != "being_written" for c in b["checkpoints"]), 150
    )
    assert {c["step"]: c["state"] for c in body["checkpoints"]} == {
        1: "complete",
        2: "complete",
        3: "complete",
        4: "complete",
        5: "incomplete",
    }, body
    first_run = body["runId"]
    latest = f"/data/{first_run}/checkpoints/global_step_4"
    assert body["latestComplete"] == latest
    cut = next(c for c in body["checkpoints"] if c["step"] == 5)

    assert api.post(f"/api/v1/jobs/{JOB}/stop/", {}, format="json").status_code == 200
    wait_for(lambda: not real_namespace.pods(), 120, "the Pods gone")
    refused = api.post(
        f"/api/v1/jobs/{JOB}/resume/", {"checkpoint": cut["path"]}, format="json", HTTP_ACCEPT_LANGUAGE="en"
    )
    assert refused.status_code == 400 and "incomplete" in refused.json()["detail"], refused.content
    answer = api.post(f"/api/v1/jobs/{JOB}/resume/", {"checkpoint": "latest"}, format="json")
    assert answer.status_code == 200, answer.content
    assert f"runner.resume_dir={latest}" in answer.json()["resume"]["runScript"]
    job = synced(JOB, lambda j: j.phase in ("Succeeded", "Failed"), 300, "the resumed run to end")
    log = head_log(real_namespace)
    assert job.phase == "Succeeded", f"{job.message}\n{log[-3000:]}"
    assert [int(m) for m in re.findall(r"Global Step: (\d+)/6", log)] == [5, 6], log[-3000:]
    assert f"Resuming training from checkpoint directory {latest}." in log
    assert (host / first_run / "checkpoints" / "global_step_4" / "actor").is_dir()  # never moved
