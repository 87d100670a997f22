"""``rlark approve`` and ``rlark start`` on a robot job (the safety gate, jobs.control.safety) against a live
console: start says exactly what is missing, the submitter cannot approve, a safety approver's flags and stop plan
open the gate."""

from __future__ import annotations

import os

import pytest
import yaml
from django.contrib.auth.models import Permission

from accounts.authentication import issue_token
from clusters.models import Node
from jobs.models import Job
from rlark_cli.main import main
from tests.spec_fixtures import base_doc, seed_db

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def env(live_server, alice, django_user_model, monkeypatch, tmp_path):
    """A live console with the test inventory, nodes gpu-1 and gpu-2 (pool=rollout) of category robot; alice's
    token set; returns ``(tmp_path, carol's token)`` (carol: a safety approver)."""
    from jobs.control import controller

    monkeypatch.setattr(controller, "request_reconcile", lambda _job: None)
    seed_db(alice)
    Node.objects.filter(name__in=["gpu-1", "gpu-2"]).update(category="robot")
    carol = django_user_model.objects.create_user("carol", "", "carol-pass-1")
    carol.user_permissions.add(Permission.objects.get(codename="approve_robot_job"))
    alice.user_permissions.add(Permission.objects.get(codename="approve_robot_job"))
    _, key = issue_token(alice, "cli")
    _, carol_key = issue_token(carol, "cli")
    monkeypatch.setenv("RLARK_URL", live_server.url)
    monkeypatch.setenv("RLARK_TOKEN", key)
    monkeypatch.setenv("RLARK_LANG", "en")
    monkeypatch.setenv("RLARK_CONFIG", str(tmp_path / "none.yaml"))
    return tmp_path, carol_key


def test_rlark_start_says_what_is_missing_and_rlark_approve_opens_the_gate(env, capsys, monkeypatch):
    tmp, carol_key = env
    alice_key = os.environ["RLARK_TOKEN"]
    path = tmp / "job.yaml"
    path.write_text(yaml.safe_dump(base_doc(), allow_unicode=True))
    assert main(["apply", "-f", str(path)]) == 0
    out = capsys.readouterr().out
    assert "job/ppo-job created" in out and "stored stopped" in out and "robot_job" in out
    assert main(["start", "ppo-job"]) == 4  # refused (409)
    err = capsys.readouterr().err
    assert "HTTP 409" in err and "has no safety approval" in err and "rlark approve ppo-job" in err
    # The submitter holds the permission too, but cannot approve their own job.
    assert main(["approve", "ppo-job", "--all", "--stop-plan", "E-stop"]) == 4  # refused (403)
    assert "another safety approver" in capsys.readouterr().err
    monkeypatch.setenv("RLARK_TOKEN", carol_key)
    assert main(["approve", "ppo-job", "--compatibility", "--site", "--stop-plan", "E-stop"]) == 5  # invalid (400)
    err = capsys.readouterr().err
    assert "Not confirmed yet" in err and "Speed, force, travel and workspace limits" in err
    flags = ["--compatibility", "--site", "--stop", "--limits", "--data"]
    assert main(["approve", "ppo-job", *flags, "--stop-plan", "E-stop at the cell; operator Wang"]) == 0
    assert "job/ppo-job approved by carol" in capsys.readouterr().out
    monkeypatch.setenv("RLARK_TOKEN", alice_key)
    assert main(["start", "ppo-job"]) == 0
    assert Job.objects.get(name="ppo-job").stopped is False
