"""Terminal downloads resolve the whole path inside the Worker's root; a reconnecting browser
gets its shell back within the grace period, otherwise a new shell and a plain "new shell" frame."""

from __future__ import annotations

import asyncio
import json
from datetime import UTC, datetime

import pytest
from asgiref.sync import sync_to_async

from accounts.models import AuditEvent
from terminal import consumers
from terminal.consumers import TerminalConsumer
from terminal.services import sessions
from tests.terminal.test_terminal_consumer import NS, Term, eventually, job, runtime  # noqa: F401 (fixtures)
from tests.terminal_support import session_cookie, ws_communicator

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.timeout(90), pytest.mark.asyncio]


_STARTED: list[datetime] = [datetime.now(UTC)]


def _live_sessions() -> list:
    """Sessions opened by the running test (other modules' leftovers are not ours to count)."""
    return [s for s in sessions.active_sessions() if s.started_at >= _STARTED[0]]


def _parked_mine() -> int:
    return sum(1 for c in consumers._parked.values() if c.session and c.session.started_at >= _STARTED[0])


@pytest.fixture(autouse=True)
def _no_parked_shells_left():
    _STARTED[0] = datetime.now(UTC)
    yield
    for parked in list(consumers._parked.values()):  # a test that leaves one: end it with its runtime
        for task in parked.tasks:
            task.cancel()
        if parked.stream is not None:
            parked.stream.close()
        if parked.session is not None:
            sessions._active.pop(parked.session.id, None)
    consumers._parked.clear()


async def _open(user, pod="demo-actor-1", query: str = "") -> Term:
    comm = ws_communicator(f"/ws/terminal/jobs/demo/pods/{pod}/{query}", await sync_to_async(session_cookie)(user))
    connected, _ = await comm.connect()
    assert connected
    return Term(comm)


async def test_symlinked_directory_in_a_download_path_is_refused(runtime, job, alice):  # noqa: F811
    work = runtime.workdir(NS, "demo-actor-1")
    (work / "x").symlink_to("/etc")
    (work / "real").mkdir()
    (work / "real" / "ok.txt").write_text("fine\n")
    (work / "alias").symlink_to(work / "real")
    term = await _open(alice)
    await term.run("echo ready", "m0")
    for path in ("x/hostname", "./x/hostname", "alias/ok.txt"):
        await term.comm.send_to(text_data=json.dumps({"type": "file-download", "path": path}))
        done = await term.text("file-transfer-done")
        assert done["success"] is False and "symbolic links" in done["error"], (path, done)
    await term.comm.send_to(text_data=json.dumps({"type": "file-download", "path": "real/ok.txt"}))
    start = await term.text("file-download-start")
    assert start["size"] == 5
    await term.text("file-download-end")
    assert (await term.text("file-transfer-done"))["success"] is True
    await term.comm.send_to(text_data=json.dumps({"type": "bye"}))
    await term.comm.disconnect()


async def _session_frame(term) -> dict:
    return await term.text("session")


async def test_reconnect_within_the_grace_period_reattaches_the_same_shell(runtime, job, alice):  # noqa: F811
    term = await _open(alice)
    first = await _session_frame(term)
    assert first["resumed"] is False and first["previous"] is False
    await term.run("X=kept-42", "m0")
    shell = runtime.execs[-1]
    await term.comm.disconnect()  # a network blip: no "bye"
    assert await eventually(lambda: _parked_mine() == 1)
    assert shell.proc.poll() is None and len(_live_sessions()) == 1
    again = await _open(alice, query=f"?resume={first['id']}")
    frame = await _session_frame(again)
    assert frame == {"type": "session", "id": first["id"], "resumed": True, "previous": True}
    assert await again.run("echo $X", "m1") == "kept-42"
    assert len(runtime.execs) == 1 and _parked_mine() == 0
    await again.comm.send_to(bytes_data=b"exit 0\r")
    await again.until_closed()
    assert await eventually(lambda: _live_sessions() == [])
    assert await sync_to_async(AuditEvent.objects.filter(action="terminal.session").count)() == 1


async def test_output_while_away_is_replayed(runtime, job, alice):  # noqa: F811
    term = await _open(alice)
    first = await _session_frame(term)
    await term.run("echo ready", "m0")
    await term.comm.send_to(bytes_data=b"sleep 0.5; echo written-while-away\r")
    await term.comm.disconnect()
    await asyncio.sleep(1.5)
    again = await _open(alice, query=f"?resume={first['id']}")
    assert (await _session_frame(again))["resumed"] is True
    await again.expect(b"written-while-away")
    await again.comm.send_to(text_data=json.dumps({"type": "bye"}))
    await again.comm.disconnect()


async def test_expired_or_foreign_token_starts_a_new_shell_and_says_so(
    runtime,  # noqa: F811
    job,  # noqa: F811
    alice,
    monkeypatch,
):
    monkeypatch.setattr(TerminalConsumer, "grace_period", 0.3)
    term = await _open(alice)
    first = await _session_frame(term)
    await term.run("X=old", "m0")
    shell = runtime.execs[-1]
    await term.comm.disconnect()
    assert await eventually(lambda: shell.proc.poll() is not None, 10)  # grace over: the shell is gone
    assert await eventually(lambda: _live_sessions() == [])
    event = await sync_to_async(lambda: AuditEvent.objects.get(action="terminal.session"))()
    assert "did not reconnect within 0.3 s" in event.detail["reason"]
    again = await _open(alice, query=f"?resume={first['id']}")
    frame = await _session_frame(again)
    assert frame["resumed"] is False and frame["previous"] is True and frame["id"] != first["id"]
    assert await again.run("echo x$X", "m1") == "x"
    await again.comm.send_to(text_data=json.dumps({"type": "bye"}))
    await again.comm.disconnect()


async def test_another_user_cannot_take_a_parked_shell(runtime, job, alice, admin_user):  # noqa: F811
    term = await _open(alice)
    first = await _session_frame(term)
    await term.run("X=alices", "m0")
    await term.comm.disconnect()
    assert await eventually(lambda: _parked_mine() == 1)
    other = await _open(admin_user, query=f"?resume={first['id']}")
    frame = await _session_frame(other)
    assert frame["resumed"] is False and frame["id"] != first["id"]
    assert await other.run("echo x$X", "m1") == "x"
    assert _parked_mine() == 1  # alice's shell still waits for alice
    await other.comm.send_to(text_data=json.dumps({"type": "bye"}))
    await other.comm.disconnect()


async def test_bye_ends_the_shell_at_once(runtime, job, alice):  # noqa: F811
    term = await _open(alice)
    await _session_frame(term)
    await term.run("echo hi", "m0")
    shell = runtime.execs[-1]
    await term.comm.send_to(text_data=json.dumps({"type": "bye"}))  # the page leaves on purpose
    await term.comm.disconnect()
    assert await eventually(lambda: shell.proc.poll() is not None, 10)
    assert _parked_mine() == 0
    assert await eventually(lambda: _live_sessions() == [])
    event = await sync_to_async(lambda: AuditEvent.objects.get(action="terminal.session"))()
    assert "browser closed" in event.detail["reason"]
