"""A run stopped and resumed from its latest complete checkpoint, on the real local runtime (supervisor, wrapper
scripts, real Ray), through the REST API: the run script, modelled on RLinf 0.3.0's checkpoint writer
(``rlinf/runners/embodied_runner.py`` ``_save_checkpoint``: ``<log_path>/<experiment>/checkpoints/global_step_<N>/
actor/``; torch.distributed.checkpoint's shards, then ``.metadata`` written as ``.metadata.tmp`` and renamed), saves
every step and cuts the save of step 5 off on purpose. The Checkpoints API shows steps 1-4 complete and step 5
incomplete, refuses step 5, and ``latest`` resumes from step 4 in a new run (a new Run ID) whose run script got
``runner.resume_dir`` and ``RLARK_RESUME_DIR``: its first logged step is 5."""

from __future__ import annotations

import re
import time
from pathlib import Path

import pytest

from jobs.control import controller
from jobs.explain import diagnosis
from jobs.models import Job, Pod
from tests.clusters.test_runcheck_local import demo_document, explain, local, run_until  # noqa: F401 - the fixture

pytestmark = [pytest.mark.ray, pytest.mark.django_db(transaction=True), pytest.mark.timeout(900)]

WRITER = r'''
"""A training loop that saves like RLinf's runner: global_step_<N>/actor/dcp_checkpoint/{__0_0.distcp,.metadata}."""
import os, sys, time

args = dict(a.split("=", 1) for a in sys.argv[1:] if "=" in a and not a.startswith("-"))
root, steps, cut = args["runner.ckpt_root"], int(args["runner.max_steps"]), int(args["runner.cut_step"])
resume = args.get("runner.resume_dir")
start = 0
if resume is not None:
    assert os.path.exists(os.path.join(resume, "actor")), f"resume_dir {resume}/actor does not exist."
    assert os.environ.get("RLARK_RESUME_DIR") == resume, os.environ.get("RLARK_RESUME_DIR")
    start = int(resume.split("global_step_")[-1])
    print(f"Resuming training from checkpoint directory {resume}.", flush=True)
for step in range(start + 1, steps + 1):
    print(f"Global Step: {step}/{steps}", flush=True)
    dcp = os.path.join(root, f"global_step_{step}", "actor", "dcp_checkpoint")
    os.makedirs(dcp, exist_ok=True)
    with open(os.path.join(dcp, "__0_0.distcp"), "wb") as fh:
        fh.write(os.urandom(4096))
    with open(os.path.join(dcp, ".metadata.tmp"), "wb") as fh:
        fh.write(b"metadata")
    if step == cut and resume is None:
        print(f"save of step {step} cut off", flush=True)
        break
    os.rename(os.path.join(dcp, ".metadata.tmp"), os.path.join(dcp, ".metadata"))
    time.sleep(0.5)
if resume is None:
    time.sleep(3600)  # stopped by the test
'''


def _api(client, method: str, path: str, body: dict | None = None):
    call = getattr(client, method)
    if body is None:
        return call(path, HTTP_ACCEPT_LANGUAGE="en")
    return call(path, body, content_type="application/json", HTTP_ACCEPT_LANGUAGE="en")


def _wait_listing(client, name: str, predicate, timeout: float) -> dict:
    deadline = time.monotonic() + timeout
    while True:
        body = _api(client, "get", f"/api/v1/jobs/{name}/checkpoints/").json()
        if predicate(body):
            return body
        if time.monotonic() > deadline:
            raise AssertionError(f"checkpoints never got there: {body}")
        time.sleep(3)


def _head_log(job: Job) -> str:
    log = next((w.log for w in diagnosis.worker_inputs(job) if w.head), "")
    return "\n".join(log) if isinstance(log, list) else str(log)


def test_stopped_run_resumes_from_its_latest_complete_checkpoint(local, admin_user, client):  # noqa: F811
    output = local / "out"
    script = output / "examples" / "ckpt" / "train_ckpt.py"
    script.parent.mkdir(parents=True)
    script.write_text(WRITER)
    output.chmod(0o777)  # the Worker runs as the job's own user (the runtime creates the folder itself otherwise)
    run_script = (
        "python -u /output/examples/ckpt/train_ckpt.py --config-name ckpt "
        'runner.ckpt_root="/output/$RLARK_RUN_ID/checkpoints" runner.max_steps=6 runner.cut_step=5'
    )
    doc = demo_document(output, run_script=run_script, rollouts=0)
    doc["metadata"]["name"] = "ckpt"
    doc["spec"]["tasks"][0]["checkpointDir"] = "/output/$RLARK_RUN_ID/checkpoints"
    job = Job.objects.create(name="ckpt", owner=admin_user, spec=doc)
    controller.request_reconcile(job)
    job = run_until(job, lambda j: "save of step 5 cut off" in _head_log(j) or j.phase == "Failed", 300, "the cut")
    assert job.phase == "Running", explain(job)
    first_run = Pod.objects.get(name="ckpt-header-0").uid

    client.force_login(admin_user)
    body = _wait_listing(  # "being written" for 30 s after the last change, then settled
        client, "ckpt", lambda b: b["checkpoints"] and all(c["state"] != "being_written" for c in b["checkpoints"]), 120
    )
    states = {c["step"]: c["state"] for c in body["checkpoints"]}
    assert states == {1: "complete", 2: "complete", 3: "complete", 4: "complete", 5: "incomplete"}, body
    assert {c["runId"] for c in body["checkpoints"]} == {first_run} and body["runId"] == first_run
    cut = next(c for c in body["checkpoints"] if c["step"] == 5)
    assert "the save was cut off" in " ".join(cut["reasons"])
    latest = f"/output/{first_run}/checkpoints/global_step_4"
    assert body["latestComplete"] == latest

    assert _api(client, "post", "/api/v1/jobs/ckpt/stop/", {}).status_code == 200
    job = run_until(job, lambda j: not j.tasks.filter(pods__phase="Running").exists(), 120, "the stop")
    refused = _api(client, "post", "/api/v1/jobs/ckpt/resume/", {"checkpoint": cut["path"]})
    assert refused.status_code == 400 and "incomplete" in refused.json()["detail"]

    answer = _api(client, "post", "/api/v1/jobs/ckpt/resume/", {"checkpoint": "latest"})
    assert answer.status_code == 200, answer.content
    assert answer.json()["resume"]["dir"] == latest
    assert f"runner.resume_dir={latest}" in answer.json()["resume"]["runScript"]
    job = run_until(job, lambda j: j.phase in ("Succeeded", "Failed"), 300, "the resumed run to end")
    assert job.phase == "Succeeded", explain(job)
    log = _head_log(job)
    steps = [int(m) for m in re.findall(r"Global Step: (\d+)/6", log)]
    assert steps == [5, 6], log[-3000:]
    assert f"Resuming training from checkpoint directory {latest}." in log
    second_run = Pod.objects.get(name="ckpt-header-0").uid
    assert second_run and second_run != first_run
    assert job.attempt == 2 and job.runs[-1]["runId"] == first_run

    after = _api(client, "get", "/api/v1/jobs/ckpt/checkpoints/").json()
    rows = {(c["runId"], c["step"]): c["state"] for c in after["checkpoints"]}
    assert rows[(first_run, 5)] == "incomplete" and rows[(first_run, 4)] == "complete"
    assert {s for (r, s) in rows if r == second_run} == {5, 6}
    assert Path(output / first_run / "checkpoints" / "global_step_4" / "actor").is_dir()  # never moved
