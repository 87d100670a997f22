"""The WebTerminal's websocket: a shell in a Worker's container."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import secrets
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from urllib.parse import parse_qs

from channels.db import database_sync_to_async
from django.conf import settings

from clusters.runtime.base import PodNotFound, RuntimeFailure
from rlark_console.clientaddr import scope_address
from rlark_console.db_threads import in_thread
from rlark_console.language import scope_language
from terminal.consumers.base import MAX_BINARY_FRAME, JobSocket, text_frame
from terminal.consumers.file_transfer import FileTransfers
from terminal.consumers.kept_shells import KeptShell
from terminal.services import access, logs, sessions, shell_registry, shell_relay, user_sessions
from terminal.services.runtimes import runtime_for

logger = logging.getLogger(__name__)


class TerminalConsumer(KeptShell, JobSocket):
    """``ws/terminal/jobs/<job>/pods/<pod>/``: a shell in the Pod's ``main`` container.

    Protocol (upstream-rlark 9): binary frames = terminal bytes both ways; text JSON ``resize``,
    ``file-upload`` (+ binary chunks + ``file-upload-end``), ``file-download`` ->
    ``file-download-start``/chunks/``file-download-end``, ``file-transfer-done``, ``error``.
    Additions: server ``ping`` every :attr:`ping_interval` s; ``closing`` before every close;
    optional client flow control ``{"type":"flow","window":bytes}`` + ``{"type":"ack","bytes":n}``
    (output pauses while more than ``window`` bytes are unacknowledged). Unknown text frames are
    dropped.

    File transfer: :mod:`.file_transfer`.

    Reconnect grace (:mod:`.kept_shells`): the first frame is ``{"type":"session","id":<token>,"resumed":bool}``.
    When the socket drops without the page's ``{"type":"bye"}`` (a network blip), the shell is kept for
    :attr:`grace_period` seconds (its output buffered, the last ``PARK_BUFFER`` bytes) and a browser of
    the same user that connects with ``?resume=<token>`` gets the same shell back (``resumed: true``, the
    buffered output first), whichever web worker takes the reconnect: a worker that does not hold the shell
    relays it from its owner process over the channel layer (:mod:`terminal.services.shell_relay`, found through
    :mod:`terminal.services.shell_registry`). Otherwise (expired, ended, another user) a new shell is started
    and the frame says ``resumed: false, "previous": true`` so the page can say so plainly.

    Output path: a reader thread does the blocking ``ExecStream.read`` and puts chunks in a
    bounded queue (it blocks when the queue is full, so the process blocks on its PTY: back-
    pressure); a pump task coalesces chunks into frames of up to :attr:`max_frame` bytes, at most
    one frame every :attr:`frame_interval` seconds while output keeps coming (an isolated echo is
    sent at once). Closing frees everything: the exec stream (process group killed), the reader
    thread, the tasks, and writes the audit line.
    """

    ping_interval = 25.0
    idle_timeout = float(settings.RLARK_TERMINAL_IDLE_TIMEOUT)
    queue_size = 64
    max_frame = 64 * 1024
    frame_interval = 1 / 60
    read_timeout = 0.2
    grace_period = float(settings.RLARK_TERMINAL_GRACE_PERIOD)

    async def connect(self):
        self.stream = None
        self.session: sessions.TerminalSession | None = None
        self.finished = False
        self.tasks: list[asyncio.Task] = []
        self.transfers = FileTransfers(self)
        self.stop = threading.Event()
        self.window: int | None = None
        self.sent_bytes = 0
        self.acked = 0
        self.ack_event = asyncio.Event()
        self.send_lock = asyncio.Lock()
        self.goodbye = False
        self.parked_output = bytearray()
        self.resume_token = ""
        self.container, self.exec_kwargs = "main", {}
        self.remote: shell_relay.RemoteShell | None = None  # the shell lives in another web process
        self.proxy: str | None = None  # owner side: the consumer channel relaying this kept shell
        self.pod_name = self.scope["url_route"]["kwargs"]["pod"]
        job = await self._authorize()
        if job is None:
            return
        layout = await database_sync_to_async(logs.load_layout)(job)
        targets, _warnings = await in_thread(logs.resolve_targets, layout)
        await self.accept()
        target = next((t for t in targets if t.pod == self.pod_name), None)
        ended = logs.ended_reason(layout, self.pod_name)  # a finished job's Worker: say so
        if target is None or not target.exists:
            await self._finish(access.CLOSE_GONE, ended or f"pod {self.pod_name} not found (it may have been deleted)")
            return
        if target.phase != "Running":
            reason = ended or f"pod {self.pod_name} is {target.phase}; cannot open a terminal"
            await self._finish(access.CLOSE_GONE, reason)
            return
        query = parse_qs(self.scope.get("query_string", b"").decode("latin-1"))
        self.container = query.get("container", ["main"])[0][:253] or "main"
        if self.container != "main" and self.container not in {c.name for c in target.containers}:
            await self._finish(access.CLOSE_GONE, f"container {self.container} not found in pod {self.pod_name}")
            return
        self.exec_kwargs = {} if self.container == "main" else {"container": self.container}
        wanted = query.get("resume", [""])[0][:100]
        self.target = target
        self.runtime = runtime_for(target.cluster)
        if wanted and shell_registry.valid_token(wanted):
            kept = await self._find_kept(wanted)
            if isinstance(kept, TerminalConsumer):
                await self._adopt(wanted, kept)
                return
            if kept is not None and await self._attach_remote(wanted, kept):
                return
        try:
            self.stream = await in_thread(self.runtime.exec, target.namespace, target.pod, None, **self.exec_kwargs)
        except PodNotFound as exc:
            await self._finish(access.CLOSE_GONE, str(exc))
            return
        except RuntimeFailure as exc:
            await self._finish(access.CLOSE_ERROR, str(exc))
            return
        self.session = await database_sync_to_async(sessions.open_session)(
            self.scope["user"], self.job_name, target.pod, target.namespace, scope_address(self.scope)
        )
        await self._join_user_group()
        self.loop = asyncio.get_running_loop()
        self.out_q: asyncio.Queue = asyncio.Queue(maxsize=self.queue_size)
        self.io = ThreadPoolExecutor(max_workers=1, thread_name_prefix="term-io")
        self.last_input = time.monotonic()
        self.reader = threading.Thread(target=self._read_loop, name=f"term-read-{target.pod}", daemon=True)
        self.resume_token = secrets.token_urlsafe(18)
        await self.send_json({"type": "session", "id": self.resume_token, "resumed": False, "previous": bool(wanted)})
        await self._send_containers(target)
        self.reader.start()
        self.tasks = [asyncio.create_task(self._pump()), asyncio.create_task(self._keepalive())]

    async def _send_containers(self, target: logs.LogTarget) -> None:
        """``{"type":"containers","containers":[{name,kind,state,restarts}],"current":name}`` for the page's picker."""
        await self.send_json(
            {"type": "containers", "containers": [c.as_dict() for c in target.containers], "current": self.container}
        )

    async def _join_user_group(self) -> None:
        if self.channel_layer is not None and self.user_id is not None:  # deactivation closes it at once
            await self.channel_layer.group_add(user_sessions.group_name(self.user_id), self.channel_name)

    # --- output -------------------------------------------------------------------------
    def _read_loop(self) -> None:
        """Reader thread: blocking reads, bounded hand-over to the event loop."""
        stream = self.stream
        while not self.stop.is_set():
            try:
                data = stream.read(self.read_timeout)
            except Exception as exc:  # noqa: BLE001 - reported to the user as the close reason
                item = ("error", str(exc) or exc.__class__.__name__)
            else:
                if data is None:
                    if stream.exit_code is None:
                        continue
                    data = b""  # the shell exited; a background child may still hold the PTY open
                item = ("eof", None) if data == b"" else ("data", data)
            put = self.out_q.put(item)
            try:
                fut = asyncio.run_coroutine_threadsafe(put, self.loop)
            except RuntimeError:  # event loop closed: the consumer is gone
                put.close()
                return
            while True:
                try:
                    fut.result(timeout=0.5)
                    break
                except TimeoutError:
                    if self.stop.is_set():
                        fut.cancel()
                        return
                except Exception:  # noqa: BLE001 - loop closed
                    return
            if item[0] != "data":
                return

    async def _pump(self) -> None:
        pending = None
        try:
            while True:
                item = pending or await self.out_q.get()
                pending = None
                kind, data = item
                if kind == "data":
                    buf = bytearray(data)
                    while len(buf) < self.max_frame:
                        try:
                            nxt = self.out_q.get_nowait()
                        except asyncio.QueueEmpty:
                            break
                        if nxt[0] != "data":
                            pending = nxt
                            break
                        buf += nxt[1]
                    await self.flow_wait()
                    async with self.send_lock:
                        await self.send(bytes_data=bytes(buf))
                    self.sent_bytes += len(buf)
                    if self.remote is not None:
                        await self.remote.ack(len(buf))
                    if pending is None and not self.out_q.empty():
                        # a flood: let output coalesce into the next frame (at most one frame per
                        # frame_interval); interactive echo (queue empty) is never delayed
                        await asyncio.sleep(self.frame_interval)
                elif kind == "eof":
                    code = await in_thread(self._exit_code)
                    reason = f"terminal exited with code {code}" if code is not None else "terminal session ended"
                    await self._finish(1000, reason, code)
                    return
                else:
                    await self._finish(access.CLOSE_ERROR, f"terminal connection lost: {data}")
                    return
        except asyncio.CancelledError:
            pass
        except OSError as exc:  # the web process holding a relayed shell is gone
            await self._finish(access.CLOSE_ERROR, f"terminal connection lost: {exc}")

    def _exit_code(self) -> int | None:
        deadline = time.monotonic() + 2.0
        while self.stream.exit_code is None and time.monotonic() < deadline:
            time.sleep(0.02)
        return self.stream.exit_code

    async def flow_wait(self) -> None:
        while self.window is not None and self.sent_bytes - self.acked > self.window and not self.finished:
            self.ack_event.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.ack_event.wait(), 1.0)

    async def _keepalive(self) -> None:
        tick = max(0.05, min(self.ping_interval, self.recheck_interval, self.idle_timeout) / 2)
        last_ping = last_check = time.monotonic()
        try:
            while not self.finished:
                await asyncio.sleep(tick)
                now = time.monotonic()
                if now - last_ping >= self.ping_interval:
                    last_ping = now
                    await self.send_json({"type": "ping"})
                if now - last_check >= self.recheck_interval:
                    last_check = now
                    denied = await self._recheck()
                    if denied:
                        await self._finish(denied.code, str(denied))
                        return
                if now - self.last_input >= self.idle_timeout:
                    minutes = self.idle_timeout / 60
                    shown = f"{minutes:g} minutes" if minutes >= 1 else f"{self.idle_timeout:g} seconds"
                    await self._finish(access.CLOSE_IDLE, f"idle timeout: no input for {shown}")
                    return
        except asyncio.CancelledError:
            pass

    # --- input --------------------------------------------------------------------------
    async def receive(self, text_data=None, bytes_data=None):
        if self.finished or self.stream is None:
            return
        if bytes_data is not None:
            if len(bytes_data) > MAX_BINARY_FRAME:
                await self.send_json({"type": "error", "message": "frame too large (limit 1 MiB); dropped"})
                self.transfers.chunk_too_large()
                return
            if self.transfers.upload is not None:
                await self.transfers.chunk(bytes_data)
                return
            self.last_input = time.monotonic()
            try:
                if self.remote is not None:
                    await self.remote.write(bytes_data)
                else:
                    await self.loop.run_in_executor(self.io, self.stream.write, bytes_data)
            except (RuntimeFailure, OSError) as exc:
                await self._finish(access.CLOSE_ERROR, f"terminal connection lost: {exc}")
            return
        msg = text_frame(text_data)
        if msg is None:
            return
        kind = msg.get("type")
        if kind == "resize":
            rows, cols = msg.get("rows"), msg.get("cols")
            if isinstance(rows, int) and isinstance(cols, int) and 0 < rows <= 1000 and 0 < cols <= 1000:
                if self.remote is not None:
                    with contextlib.suppress(OSError):
                        await self.remote.resize(rows, cols)
                else:
                    await self.loop.run_in_executor(self.io, self.stream.resize, rows, cols)
        elif kind == "file-upload":
            await self.transfers.start_upload(msg)
        elif kind == "file-upload-end":
            await self.transfers.end_upload()
        elif kind == "file-download":
            await self.transfers.request_download(msg.get("path"))
        elif kind == "bye":  # the page is going away on purpose: no grace period
            self.goodbye = True
        elif kind == "flow":
            window = msg.get("window")
            self.window = window if isinstance(window, int) and window >= 64 * 1024 else None
        elif kind == "ack":
            n = msg.get("bytes")
            if isinstance(n, int) and n > 0:
                self.acked += n
                self.ack_event.set()
        # anything else (including client "ping") is dropped, never typed into the shell

    def page_language(self) -> str:
        """The page's language (cookie, else Accept-Language), for the messages this consumer writes."""
        if getattr(self, "language", None) is None:
            self.language = scope_language(self.scope)
        return self.language

    # --- teardown -----------------------------------------------------------------------
    async def account_deactivated(self, event) -> None:
        """``accounts.signals.user_deactivated`` (via ``terminal.services.user_sessions``): close now."""
        await self._finish(access.CLOSE_AUTH, user_sessions.REASON)

    async def _finish(self, code: int, reason: str, exit_code: int | None = None) -> None:
        if self.finished:
            return
        self.finished = True
        with contextlib.suppress(Exception):
            await self.close_with(code, reason)
        await self._cleanup(reason, exit_code)

    async def disconnect(self, code):
        if not getattr(self, "finished", True):
            self.finished = True
            if self._park():
                return
            await self._cleanup(f"browser closed the connection ({code})", None, keep=not self.goodbye)

    async def _cleanup(self, reason: str, exit_code: int | None, keep: bool = False) -> None:
        """Free the shell and everything of this connection; audit. A relayed shell is ended by its owner, or
        kept there for the grace period when ``keep`` (the browser dropped without ``bye``)."""
        self.stop.set()
        current = asyncio.current_task()
        for task in [*self.tasks, self.transfers.download_task]:
            if task is not None and task is not current and not task.done():
                task.cancel()
        await self.transfers.close()
        if self.remote is not None:
            await self.remote.release(end_shell=not keep, reason=reason)
            self.io.shutdown(wait=False)
            return
        if self.resume_token:
            await self._unpublish()
        if self.stream is not None:
            await in_thread(self.stream.close)
            if exit_code is None:
                exit_code = self.stream.exit_code
            reader = getattr(self, "reader", None)
            if reader is not None:
                await in_thread(reader.join, 2)
            self.io.shutdown(wait=False)
        if self.session is not None:
            await database_sync_to_async(sessions.close_session)(self.session, exit_code, reason)
