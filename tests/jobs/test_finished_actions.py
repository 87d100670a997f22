"""A finished job (Succeeded or Failed) cannot be started or stopped, wherever the action is asked for: the API
answers 409 ``job_finished`` with the reason, the real ``rlark`` executable prints it and fails, the page's form
refuses it with the same words; Restart still begins a new run, and a Stopped job still starts
(``upstream-rlark.md`` 6.1 and 8.2; the rule is ``jobs.control.lifecycle``)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from accounts.authentication import issue_token
from jobs.control import lifecycle
from jobs.models import Job, Phase
from tests.spec_fixtures import base_doc, seed_db

pytestmark = pytest.mark.django_db(transaction=True)

REASON_EN = "This job has finished (Succeeded or Failed): it cannot be started or stopped. Restart begins a new run."
REASON_ZH = "任务已结束（成功或失败），无法启动或停止；重启会开始新的一次运行。"


@pytest.fixture
def finished(alice, monkeypatch):
    """Job ``ppo-job`` of alice, Succeeded; the controller's runtime side is not part of these tests."""
    from jobs.control import controller

    monkeypatch.setattr(controller, "request_reconcile", lambda _job: None)
    seed_db(alice)
    job = Job.objects.create(name="ppo-job", owner=alice, spec=base_doc(), phase=Phase.SUCCEEDED)
    return job


def test_the_rule():
    for phase in (Phase.SUCCEEDED, Phase.FAILED):
        job = Job(name="x", phase=phase)
        allowed = lifecycle.allowed_actions(job)
        assert not allowed["start"].allowed and not allowed["stop"].allowed
        assert allowed["restart"].allowed and allowed["delete"].allowed
        assert allowed["start"].reason == REASON_EN
    for phase in (Phase.PENDING, Phase.RUNNING, Phase.STOPPED):
        assert all(a.allowed for a in lifecycle.allowed_actions(Job(name="x", phase=phase)).values())


@pytest.mark.parametrize(("lang", "reason"), [("en", REASON_EN), ("zh-hans", REASON_ZH)])
def test_api_refuses_start_and_stop_of_a_finished_job(client, alice, finished, lang, reason):
    client.force_login(alice)
    for action in ("start", "stop"):
        r = client.post(f"/api/v1/jobs/ppo-job/{action}/", HTTP_ACCEPT_LANGUAGE=lang)
        assert r.status_code == 409, r.content
        assert r.json() == {"code": "job_finished", "detail": reason}
    job = Job.objects.get(name="ppo-job")
    assert (job.phase, job.attempt, job.stopped) == (Phase.SUCCEEDED, 1, False)  # nothing changed
    r = client.post("/api/v1/jobs/ppo-job/restart/")
    assert r.status_code == 200
    assert Job.objects.get(name="ppo-job").attempt == 2  # Restart begins a new run


def test_a_stopped_job_still_starts(client, alice, finished):
    Job.objects.filter(name="ppo-job").update(phase=Phase.STOPPED, stopped=True)
    client.force_login(alice)
    assert client.post("/api/v1/jobs/ppo-job/start/").status_code == 200
    assert Job.objects.get(name="ppo-job").stopped is False


def test_page_shows_start_disabled_with_the_reason_and_refuses_the_post(client, alice, finished):
    client.force_login(alice)
    client.cookies["django_language"] = "en"
    for url in ("/jobs/", "/jobs/ppo-job/"):
        html = client.get(url).content.decode()
        assert 'data-testid="action-start-refused"' in html, url
        assert f'title="{REASON_EN}"' in html and 'disabled aria-disabled="true" data-testid="action-start"' in html
        assert 'data-testid="action-stop"' not in html
    r = client.post("/jobs/ppo-job/start/", {"next": "/jobs/"}, follow=True)
    assert REASON_EN in r.content.decode()
    assert Job.objects.get(name="ppo-job").attempt == 1


def test_rlark_start_of_a_finished_job_fails_with_the_reason(live_server, alice, finished, tmp_path):
    _, key = issue_token(alice, "cli")
    script = Path(sys.executable).parent / "rlark"
    env = {"RLARK_URL": live_server.url, "RLARK_TOKEN": key, "RLARK_LANG": "en", "PATH": "/usr/bin:/bin"}
    env["RLARK_CONFIG"] = str(tmp_path / "none.yaml")
    proc = subprocess.run([str(script), "start", "ppo-job"], capture_output=True, text=True, timeout=60, env=env)
    assert proc.returncode != 0
    assert "start ppo-job failed: HTTP 409" in proc.stderr and REASON_EN in proc.stderr, proc.stderr
    assert Job.objects.get(name="ppo-job").attempt == 1
