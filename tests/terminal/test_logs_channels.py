"""The Logs tab websocket: last 1000 lines, Live refresh with resume (no duplicates, no gaps,
also across a reconnect), merged view, safe ANSI, empty states and periodic permission
re-checks (seed 02, upstream-rlark 8.4, peers L1/L4/L9, 5.2)."""

from __future__ import annotations

import asyncio
import json

import pytest
from asgiref.sync import sync_to_async

from terminal.consumers import LogsConsumer
from terminal.demo_runtime import DirRuntime, seed_job
from terminal.services.runtimes import use_runtime_factory
from tests.terminal_support import session_cookie, ws_communicator

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.timeout(60), pytest.mark.asyncio]
NS = "rlark-jobs"
LOGS = "/ws/terminal/jobs/demo/logs/"


@pytest.fixture
def runtime(tmp_path):
    rt = DirRuntime(tmp_path / "rt")
    use_runtime_factory(lambda cluster: rt)
    yield rt
    use_runtime_factory(None)


@pytest.fixture
def job(runtime, alice):
    return seed_job(runtime, alice)


@pytest.fixture
def fast(monkeypatch):
    monkeypatch.setattr(LogsConsumer, "interval", 0.2)


async def _open(user):
    comm = ws_communicator(LOGS, await sync_to_async(session_cookie)(user))
    connected, _ = await comm.connect()
    assert connected
    msg = json.loads(await comm.receive_from(timeout=5))
    assert msg["type"] == "targets"
    return comm, msg


async def _until_tick(comm, timeout=5.0):
    """Messages up to and including the next ``tick``."""
    out = []
    while True:
        msg = json.loads(await comm.receive_from(timeout=timeout))
        out.append(msg)
        if msg["type"] == "tick":
            return out


def _lines(msgs, pod):
    return [(line["n"], line["t"]) for m in msgs if m["type"] == "lines" and m["pod"] == pod for line in m["lines"]]


async def test_initial_tail_is_1000_lines_per_pod(runtime, job, alice):
    runtime.append_log(NS, "demo-actor-0", "".join(f"step {i}\n" for i in range(1200)))
    comm, _ = await _open(alice)
    await comm.send_to(text_data=json.dumps({"type": "subscribe", "pods": ["demo-actor-0"]}))
    msgs = await _until_tick(comm)
    got = _lines(msgs, "demo-actor-0")
    assert got == [(i, f"step {i}") for i in range(200, 1200)]
    first = next(m for m in msgs if m["type"] == "lines")
    assert first["reset"] and first["cursor"]["n"] == 1200
    await comm.disconnect()


async def test_live_resume_without_duplicates_or_gaps_across_reconnect(runtime, job, alice, fast):
    pod = "demo-actor-0"
    runtime.append_log(NS, pod, "Ray cluster is ready\n")
    comm, _ = await _open(alice)
    await comm.send_to(text_data=json.dumps({"type": "subscribe", "pods": [pod], "live": True}))
    seen = _lines(await _until_tick(comm), pod)
    cursor = None
    for step in range(3):
        runtime.append_log(NS, pod, "".join(f"Global Step {step}.{k}\n" for k in range(50)) + "partial")
        msgs = await _until_tick(comm)
        seen += _lines(msgs, pod)
        cursor = [m for m in msgs if m["type"] == "lines"][-1]["cursor"]
        runtime.append_log(NS, pod, f" line {step}\n")
    await comm.disconnect()
    # written while the page was away; the reconnect resumes from the page's cursor
    runtime.append_log(NS, pod, "".join(f"offline {k}\n" for k in range(10)))
    comm, _ = await _open(alice)
    sub = {"type": "subscribe", "pods": [pod], "live": True, "cursors": {pod: cursor}}
    await comm.send_to(text_data=json.dumps(sub))
    msgs = await _until_tick(comm)
    assert not any(m.get("reset") for m in msgs if m["type"] == "lines")
    seen += _lines(msgs, pod)
    numbers = [n for n, _ in seen]
    assert numbers == list(range(len(seen)))  # contiguous: no duplicates, no gaps
    texts = [t for _, t in seen]
    assert texts[0] == "Ray cluster is ready"
    assert texts.count("partial line 0") == 1 and texts.count("partial line 2") == 1
    assert texts[-10:] == [f"offline {k}" for k in range(10)]
    assert len(texts) == 1 + 3 * 51 + 10
    await comm.disconnect()


async def test_merged_view_restart_and_states(runtime, job, alice, fast):
    runtime.append_log(NS, "demo-actor-0", "head up\n")
    runtime.append_log(NS, "demo-rollout-0", "rollout up\n")
    runtime.pods[(NS, "demo-actor-1")].phase = "Pending"
    comm, targets = await _open(alice)
    pods = [t["pod"] for t in targets["targets"]]
    await comm.send_to(text_data=json.dumps({"type": "subscribe", "pods": pods, "live": True}))
    msgs = await _until_tick(comm)
    assert _lines(msgs, "demo-actor-0") == [(0, "head up")]
    assert _lines(msgs, "demo-rollout-0") == [(0, "rollout up")]
    states = {m["pod"]: m["state"] for m in msgs if m["type"] == "state"}
    assert states == {"demo-actor-1": "pending"}
    # the container restarts and the rollout Pod is deleted
    runtime.restart_container(NS, "demo-actor-0")
    runtime.append_log(NS, "demo-actor-0", "second life\n")
    runtime.delete_pod(NS, "demo-rollout-0")
    msgs = await _until_tick(comm)
    restarted = [m for m in msgs if m["type"] == "lines" and m["pod"] == "demo-actor-0"]
    assert restarted[0]["reset"] and restarted[0]["id"].endswith(":1")
    assert _lines(msgs, "demo-actor-0") == [(0, "second life")]
    new_targets = next(m for m in msgs if m["type"] == "targets")["targets"]
    assert {t["pod"]: t["exists"] for t in new_targets}["demo-rollout-0"] is False
    assert {m["pod"]: m["state"] for m in msgs if m["type"] == "state"}["demo-rollout-0"] == "gone"
    # previous instance (peers L1)
    await comm.send_to(text_data=json.dumps({"type": "subscribe", "pods": ["demo-actor-0"], "previous": True}))
    msgs = await _until_tick(comm)
    assert _lines(msgs, "demo-actor-0") == [(0, "head up")]
    await comm.disconnect()


async def test_ansi_and_html_arrive_escaped(runtime, job, alice):
    runtime.append_log(NS, "demo-actor-0", "\x1b[31m<script>alert('x')</script>\x1b[0m plain <img src=x>\n")
    comm, _ = await _open(alice)
    await comm.send_to(text_data=json.dumps({"type": "subscribe", "pods": ["demo-actor-0"]}))
    msgs = await _until_tick(comm)
    line = next(m for m in msgs if m["type"] == "lines")["lines"][0]
    assert line["t"] == "<script>alert('x')</script> plain <img src=x>"  # shown via textContent
    assert line["h"] == (
        '<span class="ansi-fg-1">&lt;script&gt;alert(&#x27;x&#x27;)&lt;/script&gt;</span> plain &lt;img src=x&gt;'
    )
    await comm.disconnect()


async def test_live_socket_closes_after_logout_and_after_revocation(runtime, job, alice, bob, fast):
    from django.contrib.sessions.models import Session

    from jobs.models import Job

    comm, _ = await _open(alice)
    await comm.send_to(text_data=json.dumps({"type": "subscribe", "pods": ["demo-actor-0"], "live": True}))
    await _until_tick(comm)
    await sync_to_async(lambda: Session.objects.all().delete())()  # alice logs out elsewhere
    while True:
        out = await comm.receive_output(timeout=5)
        if out["type"] == "websocket.close":
            break
    assert out["code"] == 4401 and "log in" in out["reason"]
    # a job that changes hands: the live socket stops within one refresh
    comm, _ = await _open(alice)
    await comm.send_to(text_data=json.dumps({"type": "subscribe", "pods": ["demo-actor-0"], "live": True}))
    await _until_tick(comm)
    await sync_to_async(lambda: Job.objects.filter(name="demo").update(owner=bob))()
    while True:
        out = await comm.receive_output(timeout=5)
        if out["type"] == "websocket.close":
            break
    assert out["code"] == 4403 and "permission revoked" in out["reason"]


async def test_socket_without_live_is_rechecked_too(runtime, job, alice, bob, monkeypatch):
    from jobs.models import Job

    monkeypatch.setattr(LogsConsumer, "recheck_interval", 0.3)
    comm, _ = await _open(alice)
    await comm.send_to(text_data=json.dumps({"type": "subscribe", "pods": ["demo-actor-0"]}))
    await _until_tick(comm)
    await sync_to_async(lambda: Job.objects.filter(name="demo").update(owner=bob))()
    while True:
        out = await comm.receive_output(timeout=5)
        if out["type"] == "websocket.close":
            break
    assert out["code"] == 4403


async def test_throttled_stream_catches_up_without_gaps(runtime, job, alice, monkeypatch):
    from terminal.services import logs as log_service

    monkeypatch.setattr(LogsConsumer, "interval", 3.0)
    monkeypatch.setattr(LogsConsumer, "catch_up", 0.2)
    monkeypatch.setattr(log_service, "MAX_LINES_PER_POLL", 1000)
    pod = "demo-actor-0"
    comm, _ = await _open(alice)
    await comm.send_to(text_data=json.dumps({"type": "subscribe", "pods": [pod], "live": True}))
    await _until_tick(comm)
    runtime.append_log(NS, pod, "".join(f"chatty {i}\n" for i in range(3500)))
    t0 = asyncio.get_running_loop().time()
    seen, more = [], []
    while len(seen) < 3500:
        msgs = await _until_tick(comm, timeout=10)
        seen += _lines(msgs, pod)
        more += [m["more"] for m in msgs if m["type"] == "lines"]
    elapsed = asyncio.get_running_loop().time() - t0
    assert [t for _, t in seen] == [f"chatty {i}" for i in range(3500)]
    assert more[:3] == [True, True, True] and more[-1] is False  # the page shows "throttled" meanwhile
    assert elapsed < 3.0 + 4 * 0.2 + 2  # one regular refresh, then catch-up refreshes
    await comm.disconnect()


async def test_targets_say_when_the_stream_has_ended(runtime, job, alice, fast):
    """``ended`` only once the job is over and no Worker can write more (the page then says "Stream
    ended" instead of "Streaming"); a new run streams again."""
    from jobs.models import Job, Pod

    comm, targets = await _open(alice)
    assert targets["ended"] is False
    pods = [t["pod"] for t in targets["targets"]]
    await comm.send_to(text_data=json.dumps({"type": "subscribe", "pods": pods, "live": True}))
    await _until_tick(comm)

    def finish(phase_of_pods):
        Job.objects.filter(pk=job.pk).update(phase="Succeeded")
        Pod.objects.filter(task__job=job).update(phase=phase_of_pods)

    await sync_to_async(finish)("Running")  # the job ended, the last sync still saw its Pods running
    msgs = await _until_tick(comm)
    assert next(m for m in msgs if m["type"] == "targets")["ended"] is False
    for pod in pods:  # the Workers are scaled down
        runtime.delete_pod(NS, pod)
    await sync_to_async(finish)("Stopped")
    msgs = await _until_tick(comm)
    assert next(m for m in msgs if m["type"] == "targets")["ended"] is True
    await sync_to_async(Job.objects.filter(pk=job.pk).update)(phase="Pending")  # restarted: a new run
    msgs = await _until_tick(comm)
    assert next(m for m in msgs if m["type"] == "targets")["ended"] is False
    await comm.disconnect()
