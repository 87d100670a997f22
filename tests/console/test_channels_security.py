"""Logs and WebTerminal websockets and pages: nothing anonymous, nothing cross-user, Origin checked
(peers 5.2)."""

from __future__ import annotations

import json

import pytest
from asgiref.sync import sync_to_async

from terminal.demo_runtime import DirRuntime, seed_job
from terminal.services.runtimes import use_runtime_factory
from tests.terminal_support import session_cookie, ws_communicator

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.timeout(60)]

LOGS = "/ws/terminal/jobs/demo/logs/"
TERM = "/ws/terminal/jobs/demo/pods/demo-actor-0/"


@pytest.fixture
def runtime(tmp_path):
    rt = DirRuntime(tmp_path / "rt")
    use_runtime_factory(lambda cluster: rt)
    yield rt
    for stream in rt.execs:
        stream.close()
    use_runtime_factory(None)


@pytest.fixture
def job(runtime, alice):
    job = seed_job(runtime, alice)
    runtime.append_log("rlark-jobs", "demo-actor-0", "Ray cluster is ready\n")
    return job


async def _refused(comm, code: int) -> str:
    connected, _ = await comm.connect()
    assert connected  # accepted only to deliver the reason, then closed
    first = await comm.receive_output(timeout=5)  # the reason (daphne drops close-frame reasons) ...
    assert json.loads(first["text"]) == {"type": "closing", "code": code, "reason": first_reason(first)}
    out = await comm.receive_output(timeout=5)
    assert out["type"] == "websocket.close", out  # ... and nothing else before the close
    assert out["code"] == code and out["reason"] == first_reason(first)
    await comm.wait()
    return out["reason"]


def first_reason(message) -> str:
    return json.loads(message["text"])["reason"]


@pytest.mark.asyncio
@pytest.mark.parametrize("path", [LOGS, TERM])
async def test_anonymous_refused_with_reason(job, path):
    reason = await _refused(ws_communicator(path), 4401)
    assert "log in" in reason


@pytest.mark.asyncio
@pytest.mark.parametrize("path", [LOGS, TERM])
async def test_other_user_refused(job, bob, runtime, path):
    cookie = await sync_to_async(session_cookie)(bob)
    reason = await _refused(ws_communicator(path, cookie), 4403)
    assert "permission denied" in reason
    assert runtime.execs == []  # no shell was ever started for bob


@pytest.mark.asyncio
@pytest.mark.parametrize("path", [LOGS, TERM])
@pytest.mark.parametrize("origin", ["http://evil.example", None])
async def test_wrong_or_missing_origin_refused(job, alice, path, origin):
    cookie = await sync_to_async(session_cookie)(alice)
    comm = ws_communicator(path, cookie, origin=origin)
    connected, _ = await comm.connect()
    assert not connected


@pytest.mark.asyncio
async def test_unknown_job_and_owner_and_admin(job, alice, admin_user):
    cookie = await sync_to_async(session_cookie)(alice)
    assert "permission denied" in await _refused(ws_communicator("/ws/terminal/jobs/nope/logs/", cookie), 4403)
    for user in (alice, admin_user):
        comm = ws_communicator(LOGS, await sync_to_async(session_cookie)(user))
        connected, _ = await comm.connect()
        assert connected
        msg = json.loads(await comm.receive_from(timeout=5))
        assert msg["type"] == "targets"
        assert [t["pod"] for t in msg["targets"]] == ["demo-actor-0", "demo-actor-1", "demo-rollout-0"]
        await comm.disconnect()


def test_pages_require_login_and_hide_other_users_jobs(client, job, bob, alice):
    urls = [
        "/terminal/jobs/demo/logs/",
        "/terminal/jobs/demo/logs/panel/",
        "/terminal/jobs/demo/logs/download/?pod=demo-actor-0",
        "/terminal/?job=demo&worker=demo-actor-0",
    ]
    for url in urls:
        resp = client.get(url)
        assert resp.status_code == 302 and "/login/" in resp["Location"], url
    client.force_login(bob)
    for url in urls:
        assert client.get(url).status_code == 404, url
    client.force_login(alice)
    for url in urls:
        assert client.get(url).status_code == 200, url
