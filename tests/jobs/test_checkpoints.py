"""Checkpoints of a run and the resume from one: where RLinf writes them (both layouts of RLinf 0.3.0), the states a
scan tells apart on real files (complete, incomplete: no ``actor/``, a zero-byte file, a leftover ``.metadata.tmp``,
a DCP directory without ``.metadata``; being written), the same answer from the script a Worker runs, the API, the
tab, the refusal of an incomplete checkpoint (localized 400, disabled button) and what a resume changes (a new
attempt, ``RLARK_RESUME_DIR``, ``runner.resume_dir`` in the run script of this run only, the audit record)."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from accounts.authentication import issue_token
from accounts.models import AuditEvent
from jobs.control import controller
from jobs.explain import runcheck
from jobs.jobspec import checkpoints as spec
from jobs.models import Job, Pod
from jobs.observe import checkpoint_scan
from rlark_cli.main import main
from tests.jobs.test_metrics import ReportingRuntime, job, use_runtime  # noqa: F401 - the fixture

RUN, EARLIER = "1111aaaa-run", "0000ffff-old"
SCRIPT = (
    "cd /opt/rlinf\npython -u examples/embodiment/train_embodied_agent.py --config-name maniskill 2>&1 | tee /data/l\n"
)


def _write(root: Path, step: int, *, cut: str = "", age: float = 120.0) -> Path:
    """A checkpoint as RLinf's FSDP writer leaves it (``actor/dcp_checkpoint/{__0_0.distcp,.metadata}``,
    ``actor/model_state_dict/full_weights.pt``), or cut off: ``metadata_tmp``, ``zero``, ``no_actor``."""
    path = root / f"global_step_{step}"
    dcp = path / "actor" / "dcp_checkpoint"
    dcp.mkdir(parents=True)
    (dcp / "__0_0.distcp").write_bytes(b"s" * (100 + step))
    if cut == "metadata_tmp":
        (dcp / ".metadata.tmp").write_bytes(b"m")
    else:
        (dcp / ".metadata").write_bytes(b"m" * 10)
    (path / "actor" / "model_state_dict").mkdir()
    (path / "actor" / "model_state_dict" / "full_weights.pt").write_bytes(b"" if cut == "zero" else b"w" * 50)
    if cut == "no_actor":
        os.rename(path / "actor", path / "critic")
    stamp = time.time() - age
    for base, dirs, files in os.walk(path):
        for name in dirs + files:
            os.utime(os.path.join(base, name), (stamp, stamp))
    os.utime(path, (stamp, stamp))
    return path


def test_the_checkpoint_directory_of_both_rlinf_layouts():
    embodied = "runner:\n  logger:\n    log_path: /results\n    experiment_name: ppo\n"
    reasoning = "runner:\n  output_dir: ${base}/out\n  experiment_name: math\nbase: /data\n"
    assert spec.config_checkpoint_dir(embodied) == "/results/ppo/checkpoints"
    assert spec.config_checkpoint_dir(reasoning) == "/data/out/math/checkpoints"
    assert spec.config_checkpoint_dir("runner:\n  logger:\n    log_path: ../results\n    experiment_name: x\n") == ""
    assert spec.config_checkpoint_dir("runner:\n  output_dir: ${oc.env:HOME}\n  experiment_name: x\n") == ""
    head = {"name": "h", "head": True, "checkpointDir": "/ck/$RLARK_RUN_ID/"}
    assert spec.checkpoint_dir({"tasks": [head]}, embodied) == ("/ck/$RLARK_RUN_ID", "template")
    assert spec.checkpoint_dir({"tasks": [{"name": "h", "head": True}]}, embodied) == (
        "/results/ppo/checkpoints",
        "rlinf",
    )


def test_runner_resume_dir_goes_on_the_rlinf_command_only():
    out = spec.resume_run_script(SCRIPT, "/data/a b/global_step_3")
    assert "--config-name maniskill runner.resume_dir='/data/a b/global_step_3' 2>&1 | tee /data/l" in out
    assert out.startswith("cd /opt/rlinf\n")
    again = spec.resume_run_script(out, "/data/global_step_4")  # an earlier override is replaced, not doubled
    assert again.count("runner.resume_dir=") == 1 and "runner.resume_dir=/data/global_step_4 2>&1" in again
    multi = "python \\\n  -m rlinf.run --config-name x\necho done"
    assert spec.resume_run_script(multi, "/c/global_step_1") == (
        "python \\\n  -m rlinf.run --config-name x runner.resume_dir=/c/global_step_1\necho done"
    )
    assert spec.resume_run_script("bash examples/run.sh cfg", "/c/global_step_1") == "bash examples/run.sh cfg"
    assert not spec.is_rlinf_command("python -u train.py --steps 3") and spec.is_rlinf_command(SCRIPT)


def test_scan_states_on_real_files_and_the_same_answer_from_the_worker_script(tmp_path):
    root = tmp_path / "checkpoints"
    _write(root, 1)
    _write(root, 2, cut="zero")
    _write(root, 3, cut="metadata_tmp")
    _write(root, 4, cut="no_actor")
    _write(root, 5, age=2)  # just written: being written, whatever it holds
    (root / "not_a_step").mkdir()
    here = checkpoint_scan.scan([str(root), str(tmp_path / "missing")])
    found = {c["step"]: c for c in here["roots"][0]["checkpoints"]}
    assert set(found) == {1, 2, 3, 4, 5} and here["roots"][1]["state"] == "missing"
    assert found[1]["state"] == "complete" and found[1]["reasons"] == [] and found[1]["files"] == 3
    assert found[1]["size"] == 101 + 10 + 50
    assert found[2]["state"] == "incomplete"
    assert found[2]["reasons"] == ["empty_file:actor/model_state_dict/full_weights.pt"]
    assert found[3]["reasons"] == [
        "temp_file:actor/dcp_checkpoint/.metadata.tmp",
        "no_dcp_metadata:actor/dcp_checkpoint",
    ]
    assert found[4]["state"] == "incomplete" and found[4]["reasons"][0] == "no_actor"
    assert found[5]["state"] == "being_written"
    source = Path(checkpoint_scan.__file__).read_text()
    out = subprocess.run(
        [sys.executable, "-c", source, f'["{root}"]'], capture_output=True, text=True, timeout=60, check=True
    )
    there = checkpoint_scan.decode("$ python3 -c ...\r\n" + out.stdout.replace("\n", "\r\n"))
    assert {c["step"]: (c["state"], c["listSha"]) for c in there["roots"][0]["checkpoints"]} == {
        s: (c["state"], c["listSha"]) for s, c in found.items()
    }
    assert checkpoint_scan.decode("bash: python3: command not found") is None


@pytest.fixture
def ckjob(job, monkeypatch, settings):  # noqa: F811
    """The metrics fixture's job (local cluster, ``/data`` on a host folder) with ``checkpointDir`` per run, the
    current run ``RUN`` (steps 1 complete, 2 cut off) and an earlier run ``EARLIER`` (step 7 complete)."""
    settings.CELERY_TASK_ALWAYS_EAGER = False  # a resume enqueues its reconcile; nothing runs Workers here
    job, data = job
    use_runtime(monkeypatch, ReportingRuntime(None))
    for t in job.spec["spec"]["tasks"]:
        t["cluster"] = "local"
    head = job.spec["spec"]["tasks"][0]
    head["checkpointDir"] = "/data/$RLARK_RUN_ID/checkpoints"
    head["runScript"] = SCRIPT
    job.runs = [{"attempt": 1, "runId": EARLIER, "startedAt": None, "finishedAt": None, "resumedFrom": ""}]
    job.attempt = 2
    job.save(update_fields=["spec", "runs", "attempt"])
    Pod.objects.filter(name="job-header-0").update(uid=RUN)
    _write(data / RUN / "checkpoints", 1)
    _write(data / RUN / "checkpoints", 2, cut="metadata_tmp")
    _write(data / EARLIER / "checkpoints", 7, age=3600)
    return job, data


def test_api_lists_this_run_and_the_earlier_one_with_states(ckjob, client, admin_user):
    job, _data = ckjob  # noqa: F811
    client.force_login(admin_user)
    body = client.get(f"/api/v1/jobs/{job.name}/checkpoints/", HTTP_ACCEPT_LANGUAGE="en").json()
    assert body["directory"] == "/data/$RLARK_RUN_ID/checkpoints" and body["source"] == "template"
    assert body["runId"] == RUN and body["reason"] == ""
    rows = [(c["path"], c["current"], c["attempt"], c["state"]) for c in body["checkpoints"]]
    assert rows == [
        (f"/data/{RUN}/checkpoints/global_step_2", True, 2, "incomplete"),
        (f"/data/{RUN}/checkpoints/global_step_1", True, 2, "complete"),
        (f"/data/{EARLIER}/checkpoints/global_step_7", False, 1, "complete"),
    ]
    cut = body["checkpoints"][0]
    assert cut["stateLabel"] == "incomplete" and "the save was cut off" in cut["reasons"][0]
    assert body["latestComplete"] == f"/data/{RUN}/checkpoints/global_step_1"  # the complete one written last
    assert body["checkpoints"][1]["sizeBytes"] == 161 and len(body["checkpoints"][1]["listSha256"]) == 64
    zh = client.get(f"/api/v1/jobs/{job.name}/checkpoints/", HTTP_ACCEPT_LANGUAGE="zh-hans").json()
    assert zh["checkpoints"][0]["stateLabel"] == "不完整"


def test_an_incomplete_checkpoint_is_refused_and_its_button_disabled(ckjob, client, admin_user):
    job, _data = ckjob  # noqa: F811
    client.force_login(admin_user)
    cut = f"/data/{RUN}/checkpoints/global_step_2"
    for lang, text in (("en", "is incomplete: only a complete checkpoint"), ("zh-hans", "不完整")):
        answer = client.post(
            f"/api/v1/jobs/{job.name}/resume/",
            {"checkpoint": cut},
            content_type="application/json",
            HTTP_ACCEPT_LANGUAGE=lang,
        )
        assert answer.status_code == 400 and answer.json()["field"] == "checkpoint"
        assert text in answer.json()["detail"] and cut in answer.json()["detail"]
    unknown = client.post(f"/api/v1/jobs/{job.name}/resume/", {"checkpoint": "/etc"}, content_type="application/json")
    assert unknown.status_code == 400
    job.refresh_from_db()
    assert job.attempt == 2 and job.resume == {}
    page = client.get(f"/jobs/{job.name}/checkpoints/", HTTP_ACCEPT_LANGUAGE="en").content.decode()
    row = page[page.index('data-step="2"') :].split("</tr>")[0]
    assert "disabled" in row and "Resume from here" in row and 'data-state="incomplete"' in row
    good = page[page.index('data-step="1"') :].split("</tr>")[0]
    assert "?resume=" in good and "disabled" not in good
    refused = client.get(f"/jobs/{job.name}/checkpoints/?resume={cut}", HTTP_ACCEPT_LANGUAGE="en")
    assert refused.status_code == 400 and "resume-dialog" not in refused.content.decode()


def test_resume_starts_a_new_run_with_the_resume_dir_and_is_audited(ckjob, client, admin_user):
    job, _data = ckjob  # noqa: F811
    client.force_login(admin_user)
    chosen = f"/data/{RUN}/checkpoints/global_step_1"
    dialog = client.get(f"/jobs/{job.name}/checkpoints/?resume={chosen}", HTTP_ACCEPT_LANGUAGE="en").content.decode()
    assert 'data-testid="resume-dialog"' in dialog and f"runner.resume_dir={chosen} 2&gt;&amp;1 | tee" in dialog
    answer = client.post(f"/api/v1/jobs/{job.name}/resume/", {"checkpoint": chosen}, content_type="application/json")
    assert answer.status_code == 200, answer.content
    job = Job.objects.get(pk=job.pk)
    assert job.attempt == 3 and job.phase == "Pending"
    assert job.resume["dir"] == chosen and job.resume["step"] == 1 and job.resume["fromRun"] == RUN
    assert f"--config-name maniskill runner.resume_dir={chosen} 2>&1" in job.resume["runScript"]
    assert job.runs[-1]["runId"] == RUN and job.runs[-1]["attempt"] == 2  # the run that ended
    assert job.spec["spec"]["tasks"][0]["runScript"] == SCRIPT  # the stored document is unchanged
    event = AuditEvent.objects.filter(action="job.resume").get()
    assert event.actor_name == admin_user.username and event.object_id == job.name
    assert event.detail["checkpoint"] == chosen and event.detail["fromRun"] == RUN and event.detail["attempt"] == 3

    head = controller._manifests(job, {"local": job.tasks.first().cluster})["job-header"]
    env = {e["name"]: e.get("value") for e in head.workload["spec"]["template"]["spec"]["containers"][0]["env"]}
    assert env["RLARK_RESUME_DIR"] == chosen and env["RLARK_RUN_SCRIPT"] == job.resume["runScript"]
    worker = controller._manifests(job, {"local": job.tasks.first().cluster})["job-worker"]
    worker_env = worker.workload["spec"]["template"]["spec"]["containers"][0]["env"]
    assert "RLARK_RESUME_DIR" not in {e["name"] for e in worker_env}

    controller.restart(job)  # a plain restart is a fresh run again
    job.refresh_from_db()
    assert job.resume == {} and job.runs[-1]["resumedFrom"] == chosen


def test_resume_needs_the_right_to_change_and_a_usable_run_script(ckjob, client, django_user_model):
    job, _data = ckjob  # noqa: F811
    other = django_user_model.objects.create_user("other", password="x")
    client.force_login(other)
    assert client.post(f"/api/v1/jobs/{job.name}/resume/", {"checkpoint": "latest"}).status_code == 404
    client.force_login(job.owner)
    empty = client.post(
        f"/api/v1/jobs/{job.name}/resume/",
        {"checkpoint": "latest", "runScript": "  "},
        content_type="application/json",
    )
    assert empty.status_code == 400 and empty.json()["field"] == "runScript"
    big = "x" * (controller.MAX_RUN_SCRIPT_BYTES + 1)
    answer = client.post(
        f"/api/v1/jobs/{job.name}/resume/", {"checkpoint": "latest", "runScript": big}, content_type="application/json"
    )
    assert answer.status_code == 400 and answer.json()["field"] == "runScript"


def test_no_checkpoint_directory_says_how_to_set_one(job, client, admin_user):  # noqa: F811
    job, _data = job
    client.force_login(admin_user)
    body = client.get(f"/api/v1/jobs/{job.name}/checkpoints/", HTTP_ACCEPT_LANGUAGE="en").json()
    assert body["reason"] == "unset" and "checkpointDir" in body["reasonText"] and body["checkpoints"] == []
    answer = client.post(f"/api/v1/jobs/{job.name}/resume/", {"checkpoint": "latest"}, content_type="application/json")
    assert answer.status_code == 400


def test_the_cli_lists_refuses_and_resumes_over_http(ckjob, live_server, admin_user, monkeypatch, tmp_path, capsys):
    job, _data = ckjob  # noqa: F811
    monkeypatch.setattr(controller, "request_reconcile", lambda _job: None)  # no Workers run in this test
    _, key = issue_token(admin_user, "cli")
    for name, value in {"RLARK_URL": live_server.url, "RLARK_TOKEN": key, "RLARK_LANG": "en"}.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("RLARK_CONFIG", str(tmp_path / "none.yaml"))
    assert main(["checkpoints", "job"]) == 0
    out = capsys.readouterr().out
    assert "step 2  incomplete" in out and "step 1  complete" in out and "(latest complete)" in out
    cut = f"/data/{RUN}/checkpoints/global_step_2"
    assert main(["resume", "job", "--checkpoint", cut]) == 5  # invalid (400)
    assert "HTTP 400" in capsys.readouterr().err
    edited = tmp_path / "run.sh"
    edited.write_text("echo resumed from $RLARK_RESUME_DIR\n")
    assert main(["resume", "job", "--run-script", str(edited)]) == 0
    assert capsys.readouterr().out.strip() == (
        f"job/job resuming from /data/{RUN}/checkpoints/global_step_1 (step 1) in a new run"
    )
    job.refresh_from_db()
    assert job.resume["runScript"] == "echo resumed from $RLARK_RESUME_DIR\n" and job.attempt == 3


def test_the_run_record_names_the_latest_complete_checkpoint(ckjob):
    job, data = ckjob  # noqa: F811
    results = runcheck.job_run_check(job, "en")
    text = runcheck.markdown_record(job, results, recorder="root", lang="en")
    row5 = next(line for line in text.splitlines() if line.startswith("| 5. "))
    step1 = checkpoint_scan.checkpoint(str(data / RUN / "checkpoints" / "global_step_1"), 1, time.monotonic() + 9, 0)
    assert f"Latest complete checkpoint: /data/{RUN}/checkpoints/global_step_1 (161 bytes, 3 files," in row5
    assert f"file list sha256 {step1['listSha']}" in row5
    zh = runcheck.markdown_record(job, results, recorder="root", lang="zh-hans")
    assert "最新完整 checkpoint：" in zh
