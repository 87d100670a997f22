"""The SSH bastion, on asyncssh.

Two SSH servers in one process:

1. **The bastion** (``RLARK_SSH_HOST:RLARK_SSH_PORT``, default ``127.0.0.1:2222``): public-key authentication
   against the user's registered keys (:func:`sshgate.access.authenticate`), then only ``direct-tcpip`` to
   ``<pod>:22`` (what ``ssh -J`` / ProxyJump asks for). Refusals are channel-open failures with one clear line.
2. **The Worker stand-in**: for each such channel the bastion itself terminates the client's inner SSH
   connection (over a socketpair), with the Worker's own host key (:mod:`sshgate.hostkeys`). It serves shell,
   exec, PTY and window changes (the runtime's exec, a terminal), exec without PTY, ``direct-tcpip`` to the
   Worker's own ports and the ``sftp`` subsystem and ``scp`` (both through :mod:`sshgate.agent` in the Worker,
   over the runtime's exec). Nothing runs in the Worker but what the runtime's exec starts: no sshd in the image.

Sessions are re-checked every ``RLARK_SSH_CHECK_INTERVAL`` s: a stopped or gone Worker, a deleted key or a
revoked permission closes them with a message; stopping the console closes them with a message too.
"""

from __future__ import annotations

import asyncio
import logging
import os
import socket
import threading
import time
from collections.abc import Callable
from typing import Any

import asyncssh
from asgiref.sync import sync_to_async
from django.db import close_old_connections

from rlark_console.db_threads import in_thread
from rlark_console.sshserver import KeysOnlyServer
from sshgate import access, hostkeys, sessions
from sshgate.agent import agent_argv
from sshgate.workerio import AgentError, AgentLink, WorkerStream
from terminal.services.runtimes import runtime_for

logger = logging.getLogger("rlark.sshgate")

LOOPBACK = {"localhost", "127.0.0.1", "::1", "ip6-localhost"}
READ_SIZE = 64 * 1024
ENDED_PATIENCE = 5.0  # s to learn why a Worker ended a command without an exit status (see _why_ended)
SHELL = 'export TERM="$1"; command -v bash >/dev/null 2>&1 && exec bash -l; exec sh -l'
COMMAND = 'export TERM="$1"; exec /bin/sh -c "$2"'


def _settings() -> dict[str, float]:
    return {
        "keepalive": float(os.environ.get("RLARK_SSH_KEEPALIVE", "30")),
        "check": float(os.environ.get("RLARK_SSH_CHECK_INTERVAL", "5")),
    }


def _db_call(fn: Callable, *args: Any) -> Any:
    try:
        return fn(*args)
    finally:
        close_old_connections()


async def db(fn: Callable, *args: Any) -> Any:
    """Run a synchronous database function from the event loop."""
    return await sync_to_async(_db_call, thread_sensitive=False)(fn, *args)


def _peer(conn: asyncssh.SSHServerConnection) -> str:
    peer = conn.get_extra_info("peername") or ("", 0)
    return f"{peer[0]}:{peer[1]}" if peer and peer[0] else ""


class _Pipe(asyncio.Protocol):
    """The bastion's end of the socketpair: bytes to/from the client's ``direct-tcpip`` channel."""

    def __init__(self, chan: asyncssh.SSHTCPChannel) -> None:
        self.chan = chan
        self.transport: asyncio.Transport | None = None

    def connection_made(self, transport) -> None:
        self.transport = transport

    def data_received(self, data: bytes) -> None:
        self.chan.write(data)

    def eof_received(self) -> bool:
        self.chan.write_eof()
        return False

    def connection_lost(self, exc) -> None:
        self.chan.close()

    def pause_writing(self) -> None:
        self.chan.pause_reading()

    def resume_writing(self) -> None:
        self.chan.resume_reading()


class WorkerTunnel(asyncssh.SSHTCPSession):
    """The outer ``direct-tcpip`` channel to ``<pod>:22``: runs the Worker stand-in server over a socketpair."""

    def __init__(self, gate: Gate, identity: access.Identity, target: access.WorkerTarget, remote: str) -> None:
        self.gate, self.identity, self.target, self.remote = gate, identity, target, remote
        self.pipe: _Pipe | None = None
        self.buffer: list[bytes] = []

    def connection_made(self, chan) -> None:
        self.chan = chan
        self.gate.spawn(self._start())

    async def _start(self) -> None:
        ours, theirs = socket.socketpair()
        loop = asyncio.get_running_loop()
        _transport, self.pipe = await loop.connect_accepted_socket(lambda: _Pipe(self.chan), sock=ours)
        for data in self.buffer:
            self.pipe.transport.write(data)
        self.buffer.clear()
        key = await in_thread(hostkeys.worker_key, self.target.pod)
        conf = _settings()
        try:
            await asyncssh.run_server(
                theirs,
                server_factory=lambda: WorkerServer(self.gate, self.identity, self.target, self.remote),
                server_host_keys=[key],
                process_factory=_serve_process,
                sftp_factory=_sftp_factory(),
                allow_scp=True,
                line_editor=False,
                encoding=None,
                keepalive_interval=conf["keepalive"],
                login_timeout=60,
                agent_forwarding=False,
                x11_forwarding=False,
                allow_pty=True,
            )
        except (OSError, asyncssh.Error) as exc:
            logger.info("inner SSH connection to %s ended before login: %s", self.target.pod, exc)
            self.chan.close()

    def data_received(self, data: bytes, datatype) -> None:
        if self.pipe is None or self.pipe.transport is None:
            self.buffer.append(data)
        else:
            self.pipe.transport.write(data)

    def eof_received(self) -> bool:
        if self.pipe is not None and self.pipe.transport is not None and self.pipe.transport.can_write_eof():
            self.pipe.transport.write_eof()
        return True

    def connection_lost(self, exc) -> None:
        if self.pipe is not None and self.pipe.transport is not None:
            self.pipe.transport.close()

    def pause_writing(self) -> None:
        if self.pipe is not None and self.pipe.transport is not None:
            self.pipe.transport.pause_reading()

    def resume_writing(self) -> None:
        if self.pipe is not None and self.pipe.transport is not None:
            self.pipe.transport.resume_reading()


def _sftp_factory():
    from sshgate.sftp import WorkerSFTP

    return WorkerSFTP


class BastionServer(KeysOnlyServer):
    """The outer connection: authenticates the console user, then opens tunnels to the Workers they may reach."""

    def __init__(self, gate: Gate) -> None:
        self.gate = gate
        self.identity: access.Identity | None = None
        self._candidate: access.Identity | None = None
        self._bannered = False

    async def validate_public_key(self, username: str, key: asyncssh.SSHKey) -> bool:
        # asyncssh calls this for the query and again for the signed request; the last call before success is
        # the key that signed, so the identity comes from it (auth_completed)
        self._candidate = await db(access.authenticate, username, key.get_fingerprint("sha256"))
        if self._candidate is None and not self._bannered:
            self._bannered = True
            self.conn.send_auth_banner(
                f"rlark: this key is not a registered SSH key of {username} in RLark Console "
                "(add it on the SSH keys page)\n"
            )
        return self._candidate is not None

    def auth_completed(self) -> None:
        self.identity = self._candidate

    def connection_requested(self, dest_host: str, dest_port: int, orig_host: str, orig_port: int):
        return self._open(dest_host, dest_port)

    async def _open(self, host: str, port: int) -> WorkerTunnel:
        if self.identity is None:
            raise asyncssh.ChannelOpenError(asyncssh.OPEN_ADMINISTRATIVELY_PROHIBITED, "not authenticated")
        try:
            target = await db(access.resolve_worker, self.identity, host, port)
        except access.Denied as exc:
            logger.info("ssh: %s refused for %s: %s", self.identity.username, host, exc)
            raise asyncssh.ChannelOpenError(asyncssh.OPEN_ADMINISTRATIVELY_PROHIBITED, f"rlark: {exc}") from None
        return WorkerTunnel(self.gate, self.identity, target, _peer(self.conn))

    def server_requested(self, listen_host: str, listen_port: int):
        return False  # no remote forwarding on the bastion


async def _help(process: asyncssh.SSHServerProcess) -> None:
    """A session on the bastion itself: explain ``ssh -J`` instead."""
    user = process.get_extra_info("username") or "<user>"
    host, port = process.get_extra_info("sockname")[:2]
    process.stderr.write(
        (
            "This is the RLark Console SSH bastion: it only forwards to Workers.\n"
            f"  ssh -J {user}@{host}:{port} <worker-pod-name>\n"
            "The job page's Workers tab shows the command for each Worker.\n"
        ).encode()
    )
    process.exit(1)


class WorkerServer(KeysOnlyServer):
    """The inner SSH connection, standing in for one Worker: its sessions run through the runtime's exec."""

    def __init__(self, gate: Gate, identity: access.Identity, target: access.WorkerTarget, remote: str) -> None:
        self.gate, self.identity, self.target, self.remote = gate, identity, target, remote
        self.runtime = runtime_for(target.cluster)
        self.row_id: int | None = None
        self.bytes_in = 0
        self.bytes_out = 0
        self.ports: list[int] = []
        self.kinds: list[str] = []
        self.exit_code: int | None = None
        self.streams: set[WorkerStream] = set()
        self.processes: set[asyncssh.SSHServerProcess] = set()
        self.ended = False
        self.reason = "client disconnected"
        self.conn: asyncssh.SSHServerConnection | None = None
        self.opening: asyncio.Task | None = None
        self.watch: asyncio.Task | None = None

    # --- authentication: the same user's registered keys, again ------------------------------------------
    async def validate_public_key(self, username: str, key: asyncssh.SSHKey) -> bool:
        found = await db(access.authenticate, self.identity.username, key.get_fingerprint("sha256"))
        return found is not None

    def auth_completed(self) -> None:
        self.opening = self.gate.spawn(self._opened())

    async def _opened(self) -> None:
        """Create the audit row, then re-check the Worker periodically. The row is created in a thread; a
        session that ends before it exists (``ssh -tt <pod> "exit 5"``) waits for it in :meth:`_finish`, so
        every row is closed."""
        self.row_id = await db(sessions.open_row, self.identity, self.target, self.remote)
        self.gate.live.add(self)
        if not self.ended:
            self.watch = self.gate.spawn(self._watch())

    async def _watch(self) -> None:
        interval = _settings()["check"]
        while not self.ended:
            await asyncio.sleep(interval)
            if self.ended:
                return
            try:
                reason = await db(access.worker_running, self.target)
                if not reason and not await db(access.still_valid, self.identity):
                    reason = "your SSH key or account is no longer valid"
            except Exception as exc:  # a database hiccup is no reason to cut the session
                logger.warning("ssh: re-check of %s failed: %s", self.target.pod, exc)
                continue
            if reason:
                await self.shut(reason)
                return

    async def shut(self, reason: str) -> None:
        """Close every session of this connection with ``reason`` (printed on the client's stderr)."""
        self.reason = reason
        for process in list(self.processes):
            try:
                process.stderr.write(f"\r\nrlark: {reason}; closing the session\r\n".encode())
                process.exit(255)
            except Exception:
                pass
        for stream in list(self.streams):
            await stream.close()
        await asyncio.sleep(0.2)
        if self.conn is not None:
            self.conn.disconnect(asyncssh.DISC_BY_APPLICATION, f"rlark: {reason}")

    def connection_lost(self, exc) -> None:
        self.gate.spawn(self._finish())

    async def _finish(self) -> None:
        if self.ended:
            return
        self.ended = True
        if self.watch is not None and self.watch is not asyncio.current_task():
            self.watch.cancel()
        for stream in list(self.streams):
            await stream.close()
        if self.opening is not None:  # the row may still be being created: close it, not leave it open
            await asyncio.gather(self.opening, return_exceptions=True)
        if self.row_id is not None:
            await db(
                sessions.close_row,
                self.row_id,
                self.exit_code,
                self.bytes_in,
                self.bytes_out,
                self.ports,
                self.kinds,
                self.reason,
            )
        self.gate.live.discard(self)

    # --- exec through the runtime -------------------------------------------------------------------------
    async def open_stream(self, argv: list[str]) -> WorkerStream:
        """A :class:`WorkerStream` on ``argv`` in the Worker (closed with the connection)."""
        raw = await in_thread(self.runtime.exec, self.target.namespace, self.target.pod, argv)
        stream = WorkerStream(raw, asyncio.get_running_loop(), self.target.pod)
        self.streams.add(stream)
        return stream

    async def open_agent(self, mode: str, *args: str) -> AgentLink:
        """:mod:`sshgate.agent` in ``mode``, ready for input; raises AgentError."""
        stream = await self.open_stream(agent_argv(mode, *args))
        link = AgentLink(stream)
        try:
            await asyncio.wait_for(link.ready(), 30)
        except (AgentError, TimeoutError) as exc:
            await self.drop(stream)
            raise AgentError(str(exc) or "the Worker did not answer within 30 s") from None
        return link

    async def drop(self, stream: WorkerStream) -> None:
        self.streams.discard(stream)
        await stream.close()

    # --- direct-tcpip: the Worker's own ports -------------------------------------------------------------
    def connection_requested(self, dest_host: str, dest_port: int, orig_host: str, orig_port: int):
        if dest_host not in LOOPBACK and dest_host != self.target.pod:
            raise asyncssh.ChannelOpenError(
                asyncssh.OPEN_ADMINISTRATIVELY_PROHIBITED,
                f"rlark: only the Worker's own ports can be forwarded (localhost:<port>), not {dest_host}",
            )
        return self._forward(dest_port)

    async def _forward(self, port: int) -> ForwardSession:
        try:
            link = await self.open_agent("tcp", "127.0.0.1", str(int(port)))
        except (AgentError, Exception) as exc:
            raise asyncssh.ChannelOpenError(asyncssh.OPEN_CONNECT_FAILED, f"rlark: {exc}") from None
        self.ports.append(int(port))
        self.kinds.append("forward")
        return ForwardSession(self, link)

    # --- shell / exec ---------------------------------------------------------------------------------------
    async def run(self, process: asyncssh.SSHServerProcess) -> None:
        self.processes.add(process)
        try:
            if process.subsystem:
                process.stderr.write(f"rlark: subsystem {process.subsystem} is not served\n".encode())
                process.exit(1)
                return
            term = process.get_terminal_type()
            self.kinds.append("shell" if not process.command else "exec")
            try:
                code = await (self._pty(process, term) if term else self._pipes(process))
            except (AgentError, Exception) as exc:
                if isinstance(exc, asyncio.CancelledError):
                    raise
                logger.info("ssh session on %s failed: %s", self.target.pod, exc)
                process.stderr.write(f"rlark: {exc}\n".encode())
                code = 255
            if code is None or not 0 <= code < 128:  # no exit status, or killed by a signal: did the Worker stop?
                killed = (code is None and not term) or (code is not None and code < 0)  # the Worker may be going
                reason = await self._why_ended(patience=ENDED_PATIENCE if killed else 0)
                if reason:
                    self.exit_code = 255
                    await self.shut(reason)
                    return
                code = _exit_status(code, term)
            self.exit_code = code
            process.exit(code)
        finally:
            self.processes.discard(process)

    async def _why_ended(self, patience: float) -> str:
        """Why the Worker's side of a session ended early: the reason its sessions close (job stopped or deleted,
        Worker gone or no longer Running), or "" when it still runs. Stopping a job kills the Workers within a
        reconcile, often before the periodic re-check (``RLARK_SSH_CHECK_INTERVAL``) sees it, so this looks at
        once and then for up to ``patience`` s while the runtime catches up."""
        deadline = time.monotonic() + patience
        while True:
            try:
                reason = await db(access.worker_running, self.target)
            except Exception as exc:
                logger.warning("ssh: check of %s failed: %s", self.target.pod, exc)
                reason = ""
            if reason or time.monotonic() >= deadline:
                return reason
            await asyncio.sleep(0.5)

    async def _pty(self, process: asyncssh.SSHServerProcess, term: str) -> int | None:
        cmd = process.command
        script = [COMMAND, "rlark-ssh", term, cmd] if cmd else [SHELL, "rlark-ssh", term]
        argv = ["/bin/sh", "-c", *script]
        stream = await self.open_stream(argv)
        cols, rows, _, _ = process.get_terminal_size()
        await stream.resize(rows, cols)

        async def out() -> None:
            while data := await stream.read():
                self.bytes_out += len(data)
                process.stdout.write(data)
                await process.stdout.drain()

        reader = asyncio.create_task(out())
        feeder = asyncio.create_task(self._feed_pty(process, stream))
        await reader
        feeder.cancel()
        for _ in range(50):  # the exit code follows the end of output within a moment
            if stream.exit_code is not None:
                break
            await asyncio.sleep(0.05)
        code = stream.exit_code
        await self.drop(stream)
        return code

    async def _feed_pty(self, process, stream: WorkerStream) -> None:
        while True:
            try:
                data = await process.stdin.read(READ_SIZE)
            except asyncssh.TerminalSizeChanged as change:
                await stream.resize(change.height, change.width)
                continue
            except (asyncssh.BreakReceived, asyncssh.SignalReceived):
                continue
            if not data:
                return
            self.bytes_in += len(data)
            await stream.write(data)

    async def _pipes(self, process: asyncssh.SSHServerProcess) -> int | None:
        """The command's exit code from the agent's ``x`` frame; None when the agent ended without one."""
        cmd = process.command
        argv = ["/bin/sh", "-c", cmd] if cmd else ["/bin/sh", "-c", SHELL, "rlark-ssh", "dumb"]
        link = await self.open_agent("cmd", *argv)
        code: int | None = None

        async def out() -> None:
            nonlocal code
            async for tag, data in link.frames():
                if tag == b"o":
                    self.bytes_out += len(data)
                    process.stdout.write(data)
                    await process.stdout.drain()
                elif tag == b"e":
                    self.bytes_out += len(data)
                    process.stderr.write(data)
                elif tag == b"x":
                    code = int(data or b"255")
                    await link.send(b"y")  # the agent may end now (sshgate.agent)
                    return

        async def feed() -> None:
            while True:
                try:
                    data = await process.stdin.read(READ_SIZE)
                except asyncssh.SignalReceived as sig:
                    number = getattr(__import__("signal"), f"SIG{sig.signal}", None)
                    if number is not None:
                        await link.send(b"k", str(int(number)).encode())
                    continue
                except (asyncssh.BreakReceived, asyncssh.TerminalSizeChanged):
                    continue
                if not data:
                    await link.send(b"c")
                    return
                self.bytes_in += len(data)
                await link.send(b"i", data)

        reader = asyncio.create_task(out())
        feeder = asyncio.create_task(feed())
        await reader
        feeder.cancel()
        await self.drop(link.stream)
        return code


def _exit_status(code: int | None, term: str) -> int:
    """The SSH exit status for a runtime's exit code: a signal's ``-N`` is ``128 + N`` as a shell reports it; no
    status is 0 with a PTY (kwok's exec reports none, tests/README.md), 255 without one."""
    if code is None:
        return 0 if term else 255
    return 128 - code if code < 0 else min(code, 255)


class ForwardSession(asyncssh.SSHTCPSession):
    """``ssh -L``: one TCP connection made inside the Worker by the agent."""

    def __init__(self, server: WorkerServer, link: AgentLink) -> None:
        self.server, self.link = server, link
        self.queue: asyncio.Queue[bytes | None] = asyncio.Queue()

    def connection_made(self, chan) -> None:
        self.chan = chan
        self.tasks = [asyncio.create_task(self._out()), asyncio.create_task(self._in())]

    async def _out(self) -> None:
        async for tag, data in self.link.frames():
            if tag == b"o":
                self.server.bytes_out += len(data)
                self.chan.write(data)
            elif tag == b"x":
                break
        self.chan.write_eof()
        self.chan.close()

    async def _in(self) -> None:
        while (data := await self.queue.get()) is not None:
            await self.link.send(b"i", data)
            if self.queue.qsize() < 8:
                self.chan.resume_reading()
        await self.link.send(b"c")

    def data_received(self, data: bytes, datatype) -> None:
        self.server.bytes_in += len(data)
        self.queue.put_nowait(data)
        if self.queue.qsize() >= 32:
            self.chan.pause_reading()

    def eof_received(self) -> bool:
        self.queue.put_nowait(None)
        return True

    def connection_lost(self, exc) -> None:
        for task in self.tasks:
            task.cancel()
        self.server.gate.spawn(self.server.drop(self.link.stream))


async def _serve_process(process: asyncssh.SSHServerProcess) -> None:
    server = process.get_extra_info("connection").get_owner()
    await server.run(process)


class Gate:
    """The running bastion: ``await start()``, ``await stop(reason)``."""

    def __init__(self, host: str, port: int) -> None:
        self.host, self.port = host, port
        self.live: set[WorkerServer] = set()
        self.tasks: set[asyncio.Task] = set()
        self.listener: asyncssh.SSHAcceptor | None = None

    def spawn(self, coro) -> asyncio.Task:
        """A task on the bastion's loop, kept referenced until it ends (asyncio holds tasks only weakly)."""
        task = asyncio.get_running_loop().create_task(coro)
        self.tasks.add(task)
        task.add_done_callback(self.tasks.discard)
        return task

    async def start(self) -> None:
        closed = await db(sessions.close_stale)
        if closed:
            logger.info("ssh: closed %d session rows a previous bastion left open", closed)
        key = await in_thread(hostkeys.bastion_key)
        self.listener = await asyncssh.listen(
            self.host,
            self.port,
            server_factory=lambda: BastionServer(self),
            server_host_keys=[key],
            process_factory=_help,
            encoding=None,
            keepalive_interval=_settings()["keepalive"],
            login_timeout=60,
            agent_forwarding=False,
            x11_forwarding=False,
            allow_pty=False,
            reuse_address=True,
        )
        self.port = self.listener.get_port()

    async def stop(self, reason: str = "the console is stopping") -> None:
        """Close every Worker session with ``reason`` and their audit rows, then the listener."""
        if self.listener is not None:
            self.listener.close()
        await asyncio.gather(*(s.shut(reason) for s in list(self.live)), return_exceptions=True)
        deadline = time.monotonic() + 5
        while self.live and time.monotonic() < deadline:
            await asyncio.sleep(0.1)
        if self.listener is not None:
            await self.listener.wait_closed()


async def _cancel_the_rest() -> None:
    """Cancel every other task of the running loop and wait for them (as ``asyncio.run`` does at its end), so no
    session task is left pending when the loop stops ("Task was destroyed but it is pending" at exit)."""
    rest = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
    for task in rest:
        task.cancel()
    await asyncio.gather(*rest, return_exceptions=True)


def serve_in_thread(host: str = "127.0.0.1", port: int = 0, timeout: float = 60) -> tuple[Gate, Callable[[], None]]:
    """The bastion on an event loop of its own in a daemon thread (tests, ``bench/ssh.py``): ``(gate, stop)``.
    ``port`` 0 takes a free one (``gate.port`` after the start); ``stop()`` (idempotent) closes the sessions, with
    the message "the console is stopping", and the loop.
    Raises TimeoutError when the bastion did not listen within ``timeout`` s."""
    loop = asyncio.new_event_loop()
    gate = Gate(host, port)
    started = threading.Event()

    def serve() -> None:
        asyncio.set_event_loop(loop)
        loop.run_until_complete(gate.start())
        started.set()
        loop.run_forever()

    thread = threading.Thread(target=serve, name="sshgate", daemon=True)
    thread.start()
    if not started.wait(timeout):
        raise TimeoutError(f"the SSH bastion did not start within {timeout} s")

    def stop() -> None:  # idempotent
        if not thread.is_alive():
            return
        asyncio.run_coroutine_threadsafe(gate.stop(), loop).result(30)
        asyncio.run_coroutine_threadsafe(_cancel_the_rest(), loop).result(10)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(10)

    return gate, stop
