"""The WebTerminal over Channels against a real PTY (DirRuntime): commands run in the Worker's
environment and directory, resize, CJK, file transfer, exit reasons, no leaks, back-pressure,
keep-alive and idle timeout (upstream-rlark 9, peers 3.2, 5.2)."""

from __future__ import annotations

import asyncio
import json
import os
import time

import pytest
from asgiref.sync import sync_to_async

from accounts.models import AuditEvent
from terminal.consumers import TerminalConsumer
from terminal.demo_runtime import DirRuntime, seed_job
from terminal.services import sessions, transfer
from terminal.services.runtimes import use_runtime_factory
from tests.terminal_support import session_cookie, ws_communicator

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.timeout(90), pytest.mark.asyncio]
NS = "rlark-jobs"


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
    return seed_job(runtime, alice)


@pytest.fixture(autouse=True)
def _no_grace(monkeypatch):
    """One connection per test here: a dropped socket ends the shell at once. The reconnect grace period has
    its own tests (tests/terminal/test_terminal_hardening.py)."""
    monkeypatch.setattr(TerminalConsumer, "grace_period", 0)


async def eventually(predicate, timeout: float = 10.0) -> bool:
    """Poll ``predicate`` without blocking the event loop the consumer runs on."""
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            return False
        await asyncio.sleep(0.02)
    return True


class Term:
    """A browser-side view of one terminal websocket."""

    def __init__(self, comm):
        self.comm = comm
        self.out = b""
        self.texts: list[dict] = []
        self.closed: dict | None = None

    async def pump(self, timeout: float = 0.1) -> bool:
        try:  # not receive_output(timeout): on a timeout it cancels the application
            msg = await asyncio.wait_for(self.comm.output_queue.get(), timeout)
        except TimeoutError:
            return False
        if msg["type"] == "websocket.close":
            self.closed = msg
        elif msg.get("bytes") is not None:
            self.out += msg["bytes"]
        elif msg.get("text") is not None:
            self.texts.append(json.loads(msg["text"]))
        return True

    async def expect(self, needle: bytes, timeout: float = 10) -> bytes:
        deadline = time.monotonic() + timeout
        while needle not in self.out:
            assert self.closed is None, self.closed
            assert time.monotonic() < deadline, f"{needle!r} not in {self.out[-500:]!r}"
            await self.pump()
        return self.out

    async def run(self, cmd: str, marker: str) -> str:
        """Type ``cmd``; return the output between two echo markers (not the echoed input)."""
        self.out = b""
        await self.comm.send_to(bytes_data=f"echo {marker}-S; {cmd}; echo {marker}-E\r".encode())
        await self.expect(f"\n{marker}-E".encode())
        text = self.out.decode("utf-8", "replace")
        body = "\n" + text.split(f"{marker}-S\r\n", 1)[1]
        return body.split(f"\n{marker}-E", 1)[0].strip()

    async def text(self, kind: str, timeout: float = 20) -> dict:
        deadline = time.monotonic() + timeout
        while True:
            for t in self.texts:
                if t["type"] == kind:
                    self.texts.remove(t)
                    return t
            assert self.closed is None, self.closed
            assert time.monotonic() < deadline, f"no {kind} in {self.texts}"
            await self.pump()

    async def until_closed(self, timeout: float = 10) -> dict:
        deadline = time.monotonic() + timeout
        while self.closed is None:
            assert time.monotonic() < deadline, "socket not closed"
            await self.pump()
        return self.closed


async def _open(user, pod="demo-actor-1", language="en") -> Term:
    cookie = await sync_to_async(session_cookie)(user)
    comm = ws_communicator(f"/ws/terminal/jobs/demo/pods/{pod}/", cookie, language=language)
    connected, _ = await comm.connect()
    assert connected
    return Term(comm)


async def test_commands_run_in_the_workers_environment_resize_and_cjk(runtime, job, alice):
    term = await _open(alice)
    assert await term.run("echo $RLINF_NODE_RANK; pwd", "m1") == (f"1\r\n{runtime.workdir(NS, 'demo-actor-1')}")
    await term.comm.send_to(text_data=json.dumps({"type": "resize", "rows": 40, "cols": 132}))
    assert await term.run("tput cols; tput lines", "m2") == "132\r\n40"
    await term.comm.send_to(text_data=json.dumps({"type": "resize", "rows": 30, "cols": 91}))
    assert await term.run("stty size", "m3") == "30 91"
    assert await term.run("echo 你好，世界 🚀", "m4") == "你好，世界 🚀"
    # unknown text frames are dropped, never typed into the shell
    await term.comm.send_to(text_data=json.dumps({"type": "bogus", "data": "touch HACKED\r"}))
    await term.comm.send_to(text_data="touch HACKED2\r")
    assert await term.run("ls", "m5") == ""
    await term.comm.disconnect()


async def test_exit_closes_with_the_exit_code_and_frees_everything(runtime, job, alice):
    term = await _open(alice)
    await term.run("sleep 300 & echo started", "m1")  # a background child must not leak either
    pids = runtime.live_processes()
    assert len(pids) == 2 and len(sessions.active_sessions()) == 1  # shell + sleep
    await term.comm.send_to(bytes_data=b"exit 3\r")
    closed = await term.until_closed()
    assert closed["code"] == 1000 and closed["reason"] == "terminal exited with code 3"
    assert await eventually(lambda: runtime.live_processes() == [])
    assert await eventually(lambda: sessions.active_sessions() == [])
    event = await sync_to_async(lambda: AuditEvent.objects.get(action="terminal.session"))()
    assert event.actor_name == "alice" and event.object_id == "demo-actor-1"
    assert event.detail["exit_code"] == 3 and event.detail["job"] == "demo"
    assert event.detail["duration_s"] >= 0 and event.detail["started"] < event.detail["ended"]
    assert await sync_to_async(AuditEvent.objects.filter(action="terminal.open").count)() == 1


async def test_browser_going_away_kills_the_shell(runtime, job, alice):
    term = await _open(alice)
    await term.run("echo hi", "m1")
    shell = runtime.execs[-1]
    await term.comm.send_to(bytes_data=b"sleep 1000\r")
    await term.comm.disconnect()
    assert await eventually(lambda: shell.proc.poll() is not None, 10)
    assert runtime.live_processes() == []
    assert await eventually(lambda: sessions.active_sessions() == [])
    event = await sync_to_async(lambda: AuditEvent.objects.get(action="terminal.session"))()
    assert "browser closed" in event.detail["reason"]


async def test_upload_then_download_is_byte_identical(runtime, job, alice):
    term = await _open(alice)
    await term.run("echo ready", "m0")
    payload = os.urandom(100_000) + "中文\x00\x04\x03\r\n".encode() * 100
    await term.comm.send_to(text_data=json.dumps({"type": "file-upload", "path": "./data.bin", "size": len(payload)}))
    for i in range(0, len(payload), transfer.CHUNK_BYTES):
        await term.comm.send_to(bytes_data=payload[i : i + transfer.CHUNK_BYTES])
    await term.comm.send_to(text_data=json.dumps({"type": "file-upload-end"}))
    done = await term.text("file-transfer-done")
    assert done == {"type": "file-transfer-done", "success": True, "error": None}
    assert (runtime.workdir(NS, "demo-actor-1") / "data.bin").read_bytes() == payload
    term.out = b""
    await term.comm.send_to(text_data=json.dumps({"type": "file-download", "path": "./data.bin"}))
    start = await term.text("file-download-start")
    assert start["size"] == len(payload) and start["name"] == "data.bin"
    term.out = b""
    await term.text("file-download-end")
    assert term.out == payload  # binary frames between start and end are the file, nothing else
    assert (await term.text("file-transfer-done"))["success"] is True
    assert await term.run("echo still here", "m9") == "still here"
    await term.comm.disconnect()


@pytest.mark.parametrize(
    "path, error",
    [
        ("../escape.txt", "not allowed"),
        ("./sub/../../x", "not allowed"),
        ("./sub/x", "sub-directories"),
        ("/etc/passwd", "only allowed under /tmp/"),
        ("./$(touch PWNED)", "not allowed"),
        ("./a b", "not allowed"),
    ],
)
async def test_upload_escapes_are_rejected_and_never_typed(runtime, job, alice, path, error):
    term = await _open(alice)
    await term.run("echo ready", "m0")
    await term.comm.send_to(text_data=json.dumps({"type": "file-upload", "path": path, "size": 12}))
    await term.comm.send_to(bytes_data=b"touch OOPS\r\n")
    await term.comm.send_to(text_data=json.dumps({"type": "file-upload-end"}))
    done = await term.text("file-transfer-done")
    assert done["success"] is False and error in done["error"]
    assert await term.run("ls -A", "m1") == ""  # nothing written, chunks not typed into the shell
    await term.comm.disconnect()


async def test_transfer_refusals_are_in_the_pages_language(runtime, job, alice):
    term = await _open(alice, language="zh-CN,zh;q=0.9")
    await term.run("echo ready", "m0")
    await term.comm.send_to(text_data=json.dumps({"type": "file-download", "path": "../../etc/passwd"}))
    done = await term.text("file-transfer-done")
    assert done["success"] is False and done["error"] == "传输路径中不允许出现“..”", done
    await term.comm.disconnect()


async def test_download_rules_and_size_cap(runtime, job, alice):
    work = runtime.workdir(NS, "demo-actor-1")
    (work / "secret-link").symlink_to("/etc/hostname")
    term = await _open(alice)
    await term.run("echo ready", "m0")
    for path, error in [
        ("../../etc/passwd", "'..' is not allowed"),
        ("/etc/passwd", "only allowed under /tmp/"),
        ("secret-link", "symbolic links"),
        ("missing.txt", "no such file"),
    ]:
        await term.comm.send_to(text_data=json.dumps({"type": "file-download", "path": path}))
        done = await term.text("file-transfer-done")
        assert done["success"] is False and error in done["error"], (path, done)
    big = transfer.MAX_TRANSFER_BYTES + 1
    await term.comm.send_to(text_data=json.dumps({"type": "file-upload", "path": "big.bin", "size": big}))
    await term.comm.send_to(text_data=json.dumps({"type": "file-upload-end"}))
    done = await term.text("file-transfer-done")
    assert done["success"] is False and "64 MiB" in done["error"]
    await term.comm.disconnect()


async def test_flood_back_pressure_and_recovery(runtime, job, alice):
    term = await _open(alice)
    await term.run("echo ready", "m0")
    window = 256 * 1024
    await term.comm.send_to(text_data=json.dumps({"type": "flow", "window": window}))
    await term.comm.send_to(bytes_data=b"yes flood-line-0123456789\r")
    received = 0
    deadline = time.monotonic() + 3
    while time.monotonic() < deadline:  # the page stops acknowledging: the server must stop sending
        if await term.pump(0.2):
            received = len(term.out)
    bound = window + TerminalConsumer.max_frame * 2 + 65536
    assert 0 < received <= bound, received
    # and the producer is blocked writing to its PTY, not filling server memory
    yes_pid = next(p for p in runtime.live_processes() if open(f"/proc/{p}/comm").read().strip() == "yes")

    def written() -> int:
        return int(open(f"/proc/{yes_pid}/io").read().split("wchar: ")[1].split()[0])

    first = written()
    await asyncio.sleep(0.5)
    assert written() == first
    await term.comm.send_to(text_data=json.dumps({"type": "ack", "bytes": received}))
    before = received
    deadline = time.monotonic() + 3
    while len(term.out) <= before and time.monotonic() < deadline:
        await term.pump(0.2)
    assert len(term.out) > before  # acknowledging resumes the stream
    await term.comm.send_to(text_data=json.dumps({"type": "flow", "window": 0}))  # flow control off
    await term.comm.send_to(bytes_data=b"\x03")
    await term.comm.send_to(bytes_data=b"echo AFTER-$((40 + 2))\r")
    await term.expect(b"AFTER-42", timeout=30)
    assert term.closed is None
    await term.comm.disconnect()
    assert await eventually(lambda: runtime.live_processes() == [])


async def test_keepalive_pings_and_idle_timeout(runtime, job, alice, monkeypatch):
    monkeypatch.setattr(TerminalConsumer, "ping_interval", 0.2)
    monkeypatch.setattr(TerminalConsumer, "idle_timeout", 2.0)
    term = await _open(alice)
    await term.run("echo ready", "m0")
    t0 = time.monotonic()
    while time.monotonic() - t0 < 1.2:  # idle, but kept alive by pings
        await term.pump(0.1)
    assert sum(1 for t in term.texts if t["type"] == "ping") >= 4 and term.closed is None
    closed = await term.until_closed(5)
    assert closed["code"] == 4408 and closed["reason"] == "idle timeout: no input for 2 seconds"
    assert await eventually(lambda: runtime.live_processes() == [])


async def test_pod_gone_not_running_and_periodic_recheck(runtime, job, alice, bob, monkeypatch):
    runtime.delete_pod(NS, "demo-rollout-0")
    term = await _open(alice, "demo-rollout-0")
    closed = await term.until_closed()
    assert closed["code"] == 4404 and "not found" in closed["reason"]
    runtime.pods[(NS, "demo-actor-0")].phase = "Pending"
    closed = await (await _open(alice, "demo-actor-0")).until_closed()
    assert closed["code"] == 4404 and "is Pending" in closed["reason"]
    term = await _open(alice, "not-a-pod-of-this-job")
    assert (await term.until_closed())["code"] == 4404
    # an open shell is closed once the job is no longer the user's
    monkeypatch.setattr(TerminalConsumer, "recheck_interval", 0.3)
    from jobs.models import Job

    term = await _open(alice)
    await term.run("echo ready", "m0")
    await sync_to_async(lambda: Job.objects.filter(name="demo").update(owner=bob))()
    closed = await term.until_closed(5)
    assert closed["code"] == 4403 and "permission revoked" in closed["reason"]
    assert await eventually(lambda: runtime.live_processes() == [])


async def test_oversized_frames_are_dropped_not_typed(runtime, job, alice):
    term = await _open(alice)
    await term.run("echo ready", "m0")
    await term.comm.send_to(bytes_data=b"touch BIG #" + b"x" * (2 * 1024 * 1024) + b"\r")
    error = await term.text("error")
    assert "frame too large" in error["message"]
    assert await term.run("ls -A", "m1") == ""
    await term.comm.disconnect()


async def test_a_finished_jobs_worker_says_the_job_has_finished(runtime, job, alice):
    """The WebTerminal of a Worker whose job Succeeded names the job's phase, not "it may have been deleted"."""
    from jobs.models import Job

    await sync_to_async(lambda: Job.objects.filter(name="demo").update(phase="Succeeded"))()
    runtime.delete_pod(NS, "demo-rollout-0")
    closed = await (await _open(alice, "demo-rollout-0")).until_closed()
    assert closed["code"] == 4404
    assert closed["reason"] == "job demo has finished (phase Succeeded): Worker demo-rollout-0 no longer runs"
