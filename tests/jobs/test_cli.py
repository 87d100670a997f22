"""The ``rlark`` CLI against a live console (HTTP only): same codes as the API, apply/get/describe/stop/start/
delete/plan, readable failures and exit codes."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from accounts.authentication import issue_token
from jobs.models import Job, Pod
from rlark_cli.main import main
from tests.jobs.test_metrics import job  # noqa: F401 - the fixture of the Succeeded-job test
from tests.shared_spec import RLINF_CONFIGS
from tests.spec_fixtures import INVALID_CODES, base_doc, invalid_doc, seed_db

pytestmark = pytest.mark.django_db(transaction=True)
CONFIGS = RLINF_CONFIGS


@pytest.fixture
def env(live_server, alice, monkeypatch, tmp_path):
    """A live console with the test inventory; the controller's runtime side is not part of these tests."""
    from jobs.control import controller

    monkeypatch.setattr(controller, "request_reconcile", lambda _job: None)
    seed_db(alice)
    _, key = issue_token(alice, "cli")
    monkeypatch.setenv("RLARK_URL", live_server.url)
    monkeypatch.setenv("RLARK_TOKEN", key)
    monkeypatch.setenv("RLARK_LANG", "en")
    monkeypatch.setenv("RLARK_CONFIG", str(tmp_path / "none.yaml"))
    return tmp_path


def write(tmp: Path, name: str, doc) -> str:
    path = tmp / name
    path.write_text(doc if isinstance(doc, str) else yaml.safe_dump(doc, allow_unicode=True))
    return str(path)


def test_validate_gives_the_api_codes(env, capsys):
    path = write(env, "bad.yaml", invalid_doc())
    assert main(["validate", "-f", path, "-o", "json"]) == 5  # invalid
    body = json.loads(capsys.readouterr().out)
    assert {e["code"] for e in body["errors"]} == INVALID_CODES
    assert main(["validate", "-f", path]) == 5
    out = capsys.readouterr().out
    assert out.startswith("invalid")
    assert "error [header_replicas_not_one] spec.tasks[0].kubernetes.workload.replicas:" in out
    assert "The header role must have exactly 1 worker." in out
    assert main(["validate", "-f", write(env, "ok.yaml", base_doc())]) == 0
    assert capsys.readouterr().out.startswith("valid (3 workers)")


def test_apply_get_describe_stop_start_delete(env, capsys):
    path = write(env, "job.yaml", base_doc())
    assert main(["apply", "-f", path]) == 0
    assert capsys.readouterr().out.strip() == "job/ppo-job created"
    doc = base_doc()
    doc["spec"]["tasks"][1]["prepareScript"] = "echo v2"
    assert main(["apply", "-f", write(env, "job.yaml", doc)]) == 0
    assert capsys.readouterr().out.strip() == "job/ppo-job configured"
    assert Job.objects.get(name="ppo-job").spec["spec"]["tasks"][1]["prepareScript"] == "echo v2"

    assert main(["get", "jobs"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split()[:2] == ["NAME", "DISPLAY"] and lines[1].split()[0] == "ppo-job"
    assert main(["get", "jobs", "-o", "json"]) == 0
    assert [r["name"] for r in json.loads(capsys.readouterr().out)] == ["ppo-job"]

    assert main(["describe", "job", "ppo-job"]) == 0
    out = capsys.readouterr().out
    assert "Name:         ppo-job" in out and "  apiVersion: rlinf.io/v1alpha1" in out
    assert main(["describe", "job", "ppo-job", "-o", "yaml"]) == 0
    assert yaml.safe_load(capsys.readouterr().out)["name"] == "ppo-job"

    assert main(["stop", "ppo-job"]) == 0
    assert capsys.readouterr().out.strip() == "job/ppo-job stopped"
    assert Job.objects.get(name="ppo-job").stopped is True
    assert main(["start", "ppo-job"]) == 0
    assert Job.objects.get(name="ppo-job").stopped is False
    capsys.readouterr()
    assert main(["delete", "ppo-job"]) == 0
    assert capsys.readouterr().out.strip() == "job/ppo-job deleted"
    assert main(["describe", "job", "ppo-job"]) == 3  # not found
    assert "HTTP 404" in capsys.readouterr().err


def test_apply_invalid_reports_errors(env, capsys):
    assert main(["apply", "-f", write(env, "bad.yaml", invalid_doc())]) == 5  # invalid
    err = capsys.readouterr().err
    assert "apply failed: HTTP 400" in err
    for code in INVALID_CODES:
        assert f"[{code}]" in err
    assert main(["apply", "-f", write(env, "broken.yaml", "a: [")]) == 5
    assert "[yaml_invalid]" in capsys.readouterr().err


def test_plan(env, capsys):
    assert main(["plan", "-f", str(CONFIGS / "emb_realworld_charger_sac_cnn_async.yaml")]) == 0
    out = capsys.readouterr().out
    assert "num_nodes: 2  workers: 2" in out
    assert "4090 (header): 1 worker(s), ranks 0" in out and "franka: 1 worker(s), ranks 1" in out
    assert main(["plan", "-f", str(CONFIGS / "emb_realworld_dual_franka_dagger_openpi.yaml")]) == 5
    assert "[node_ranks_mismatch]" in capsys.readouterr().out


def test_readable_failures(env, capsys, monkeypatch):
    assert main(["validate", "-f", str(env / "missing.yaml")]) == 1
    assert "cannot read" in capsys.readouterr().err
    monkeypatch.setenv("RLARK_TOKEN", "rlk_wrong")
    assert main(["get", "jobs"]) == 4  # refused
    err = capsys.readouterr().err
    assert ("HTTP 401" in err or "HTTP 403" in err) and "Invalid or revoked token." in err
    monkeypatch.delenv("RLARK_TOKEN")
    assert main(["get", "jobs"]) == 1
    assert "no token" in capsys.readouterr().err
    assert main(["get", "jobs", "--url", "http://127.0.0.1:9", "--token", "x"]) == 1
    assert "cannot reach http://127.0.0.1:9" in capsys.readouterr().err


def test_config_file_and_console_script(env, live_server, monkeypatch):
    from django.contrib.auth import get_user_model

    _, key = issue_token(get_user_model().objects.get(username="alice"), "file")
    cfg = env / "config.yaml"
    cfg.write_text(yaml.safe_dump({"url": live_server.url, "token": key}))
    monkeypatch.delenv("RLARK_URL")
    monkeypatch.delenv("RLARK_TOKEN")
    monkeypatch.setenv("RLARK_CONFIG", str(cfg))
    script = Path(sys.executable).parent / "rlark"
    proc = subprocess.run(
        [str(script), "validate", "-f", write(env, "bad.yaml", invalid_doc()), "-o", "json"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 5, proc.stderr  # 5: invalid (rlark --help, exit codes)
    assert {e["code"] for e in json.loads(proc.stdout)["errors"]} == INVALID_CODES


@pytest.mark.parametrize(
    ("argv", "worker", "command"),
    [
        (["ssh", "demo", "--", "hostname"], None, ["hostname"]),  # the Header runs `hostname` (trial finding)
        (["ssh", "demo", "rollout-1", "--", "ls", "-a"], "rollout-1", ["ls", "-a"]),
        (["ssh", "demo", "rollout-1"], "rollout-1", []),
        (["ssh", "demo"], None, []),
    ],
)
def test_rlark_ssh_takes_what_follows_double_dash_as_the_command(argv, worker, command):
    from rlark_cli.main import parse_args

    args = parse_args(argv)
    assert (args.name, args.worker, args.command) == ("demo", worker, command)


def test_describe_names_a_succeeded_jobs_workers_as_the_workers_tab_does(
    live_server,
    admin_user,
    client,
    job,  # noqa: F811 - tests.jobs.test_metrics: header + worker Pods
    monkeypatch,
    tmp_path,
    capsys,
):
    """The Workers of a Succeeded job (one Pod succeeded, one scaled down to "Stopped") are Completed
    in ``rlark describe`` exactly as on the Workers tab, in each language."""
    job, _ = job
    job.phase, job.message = "Succeeded", "Run script exited with code 0"
    job.save()
    Pod.objects.filter(name="job-header-0").update(phase="Succeeded", container_state={"state": "terminated"})
    Pod.objects.filter(name="job-worker-0").update(phase="Stopped", container_state={})
    _, key = issue_token(admin_user, "cli")
    monkeypatch.setenv("RLARK_URL", live_server.url)
    monkeypatch.setenv("RLARK_TOKEN", key)
    monkeypatch.setenv("RLARK_CONFIG", str(tmp_path / "none.yaml"))
    client.force_login(admin_user)
    for lang, accept, word in [("en", "en", "Completed"), ("zh", "zh-hans", "已完成")]:
        page = client.get("/jobs/job/?tab=workers", HTTP_ACCEPT_LANGUAGE=accept).content.decode()
        web = re.findall(r'data-testid="worker-phase" data-phase="[^"]+">([^<]+)<', page)
        assert web == [word, word]
        monkeypatch.setenv("RLARK_LANG", lang)
        assert main(["describe", "job", "job"]) == 0
        out = capsys.readouterr().out
        rows = out.split("Workers:\n", 1)[1].split("YAML:", 1)[0].splitlines()
        assert [row.split()[3] for row in rows] == web, out
        assert "Stopped" not in out.split("Workers:\n", 1)[1]
