"""Websocket consumers: live job logs and the WebTerminal.

Both authenticate the session (``AuthMiddlewareStack``; scheme, host and port of the Origin are checked by
``rlark_console.origin.OriginValidator`` in ``launcher.asgi``), authorise the job through
``jobs.policy`` (via :mod:`terminal.services.access`) on connect, i.e. on every reconnect,
and re-check periodically. Refusals are accepted-then-closed with an application close code
and a human reason the page shows. Because daphne drops the close frame's reason text, every close
is preceded by a text frame ``{"type":"closing","code":<code>,"reason":<text>}`` carrying the same
reason (nothing else is sent to a refused client).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import secrets
import threading
import time
from collections import deque
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from urllib.parse import parse_qs

from channels.db import database_sync_to_async
from channels.generic.websocket import AsyncWebsocketConsumer
from django.conf import settings
from django.utils import translation
from django.utils.translation import gettext as _

from clusters.runtime.base import PodNotFound, RuntimeFailure
from rlark_console.clientaddr import scope_address
from rlark_console.db_threads import in_thread
from rlark_console.language import scope_language
from terminal.services import access, logs, sessions, shell_registry, shell_relay, transfer, user_sessions
from terminal.services.runtimes import runtime_for

logger = logging.getLogger(__name__)

MAX_TEXT_FRAME = 64 * 1024
MAX_BINARY_FRAME = 1024 * 1024  # keystrokes/pastes and 32 KiB upload chunks fit easily
PARK_BUFFER = 256 * 1024  # output kept for a reattaching browser (the most recent bytes)
# Shells whose browser went away without saying goodbye, by resume token, for the grace period (this process).
_parked: dict[str, TerminalConsumer] = {}
# Shells of this process relayed to a browser connected to another web worker, by resume token.
_hosted: dict[str, TerminalConsumer] = {}
FIND_PATIENCE = 1.5  # seconds a reconnect looks for its kept shell (the drop may not have been noticed yet)


def _reason(text: str) -> str:
    """Close reasons are limited to 123 bytes by RFC 6455."""
    raw = text.encode()
    return text if len(raw) <= 123 else raw[:120].decode("utf-8", "ignore") + "..."


class _JobSocket(AsyncWebsocketConsumer):
    """Shared connect-time authorisation and periodic re-check."""

    recheck_interval = 30.0

    async def _authorize(self):
        self.job_name = self.scope["url_route"]["kwargs"]["job"]
        user = self.scope.get("user")
        session = self.scope.get("session")
        self.session_key = getattr(session, "session_key", None)
        self.user_id = getattr(user, "pk", None)
        try:
            return await database_sync_to_async(access.check_job)(user, self.job_name)
        except access.AccessDenied as exc:
            await self.accept()
            await self.close_with(exc.code, str(exc))
            return None

    async def close_with(self, code: int, reason: str) -> None:
        """Close with ``code``; the reason goes in a ``closing`` frame and in the close frame."""
        reason = _reason(reason)
        with contextlib.suppress(Exception):
            await self.send_json({"type": "closing", "code": code, "reason": reason})
        await self.close(code=code, reason=reason)

    async def _recheck(self) -> access.AccessDenied | None:
        try:
            await database_sync_to_async(access.recheck)(self.user_id, self.session_key, self.job_name)
        except access.AccessDenied as exc:
            return exc
        return None

    async def send_json(self, data: dict) -> None:
        await self.send(text_data=json.dumps(data, separators=(",", ":"), ensure_ascii=False))


class UnknownPathConsumer(AsyncWebsocketConsumer):
    """Any websocket path no route matches (a mistyped URL, or ``..%2F`` in a job or Pod name, which daphne decodes
    into a ``/`` no route accepts): accepted, then closed with 4404 and a reason in the page's language, as the
    other refusals are. Without it Channels' router raised ``ValueError`` and daphne answered an HTTP 500."""

    async def connect(self) -> None:
        with translation.override(scope_language(self.scope)):
            reason = _reason(_("There is nothing at this address: check the job and Pod names."))
        await self.accept()
        await self.send(text_data=json.dumps({"type": "closing", "code": access.CLOSE_GONE, "reason": reason}))
        await self.close(code=access.CLOSE_GONE, reason=reason)


class LogsConsumer(_JobSocket):
    """``ws/terminal/jobs/<job>/logs/``: the Logs tab's data.

    Client -> server (JSON): ``{"type":"subscribe","pods":[...],"previous":bool,"live":bool,
    "cursors":{pod:{"id","off","n"}}}``, ``{"type":"live","on":bool}``, ``{"type":"refresh"}``.
    Server -> client: ``targets`` (the job's Pods; ``ended`` once the job is over and no Worker can write more),
    ``lines`` (per Pod: ``id``, ``reset``,
    ``first``, ``lines``, ``cursor``, ``more``), ``state`` (``empty``/``pending``/``gone``/
    ``no-previous``/``error`` with a message), ``tick`` after each refresh.
    Live refresh every :data:`terminal.services.logs.LIVE_INTERVAL` seconds (seed 02), each one
    preceded by a permission re-check; lines resume from the page's cursors (no dups/gaps).
    """

    interval = logs.LIVE_INTERVAL
    catch_up = 1.0  # seconds between refreshes while throttled (at most 5000 lines per Pod each)
    max_pods = 64
    frame_lines = 2000

    async def connect(self):
        self.live_task: asyncio.Task | None = None
        self.lock = asyncio.Lock()
        self.pods: list[str] = []
        self.previous = False
        self.cursors: dict[str, logs.LogCursor] = {}
        self.targets: list[logs.LogTarget] = []
        self.container = "main"  # issue 14.6b: the container shown when one Worker is selected
        job = await self._authorize()
        if job is None:
            return
        self.layout = await database_sync_to_async(logs.load_layout)(job)
        await self.accept()
        self.guard_task = asyncio.create_task(self._guard())
        self.more = False
        await self._refresh_targets()

    async def disconnect(self, code):
        for task in (getattr(self, "live_task", None), getattr(self, "guard_task", None)):
            if task:
                task.cancel()

    async def _guard(self) -> None:
        """Re-check access every ``recheck_interval`` even while Live is off (peers 5.2)."""
        try:
            while True:
                await asyncio.sleep(self.recheck_interval)
                denied = await self._recheck()
                if denied:
                    if self.live_task:
                        self.live_task.cancel()
                    await self.close_with(denied.code, str(denied))
                    return
        except asyncio.CancelledError:
            pass

    async def _refresh_targets(self) -> None:
        self.targets, warnings = await in_thread(logs.resolve_targets, self.layout)
        await self.send_json(
            {
                "type": "targets",
                "targets": [t.as_dict() for t in self.targets],
                "warnings": warnings,
                "ended": logs.stream_ended(self.layout, self.targets),
            }
        )

    async def receive(self, text_data=None, bytes_data=None):
        if text_data is None or len(text_data) > MAX_TEXT_FRAME:
            return
        try:
            msg = json.loads(text_data)
        except ValueError:
            return
        if not isinstance(msg, dict):
            return
        kind = msg.get("type")
        if kind in ("subscribe", "refresh"):
            denied = await self._recheck()
            if denied:
                await self.close_with(denied.code, str(denied))
                return
        if kind == "subscribe":
            pods = msg.get("pods") or []
            self.pods = [p for p in pods if isinstance(p, str)][: self.max_pods]
            self.previous = bool(msg.get("previous"))
            container = msg.get("container")
            self.container = container[:253] if isinstance(container, str) and len(self.pods) == 1 else "main"
            raw = msg.get("cursors") if isinstance(msg.get("cursors"), dict) else {}
            self.cursors = {p: c for p in self.pods if (c := logs.LogCursor.from_dict(raw.get(p)))}
            await self._poll(initial=True)
            self._set_live(bool(msg.get("live")))
        elif kind == "live":
            self._set_live(bool(msg.get("on")))
        elif kind == "older":
            await self._older(msg)
        elif kind == "refresh":
            await self._refresh_targets()
            await self._poll()

    def _set_live(self, on: bool) -> None:
        if on and (self.live_task is None or self.live_task.done()):
            self.live_task = asyncio.create_task(self._live_loop())
        elif not on and self.live_task:
            self.live_task.cancel()
            self.live_task = None

    async def _live_loop(self) -> None:
        try:
            while True:
                # throttled (more lines waiting than one refresh may carry): catch up sooner
                await asyncio.sleep(min(self.interval, self.catch_up) if self.more else self.interval)
                denied = await self._recheck()
                if denied:
                    await self.close_with(denied.code, str(denied))
                    return
                layout = await database_sync_to_async(logs.load_layout_named)(self.job_name)
                if layout is not None:
                    self.layout = layout
                await self._refresh_targets()
                await self._poll()
        except asyncio.CancelledError:
            pass
        except Exception:  # pragma: no cover - keep the socket informative rather than silent
            logger.exception("live log refresh failed")
            await self.close_with(access.CLOSE_ERROR, "log refresh failed; reconnecting")

    async def _poll(self, initial: bool = False) -> None:
        async with self.lock:
            wanted = set(self.pods)
            selected = [t.with_container(self.container) for t in self.targets if t.pod in wanted]
            stamp = datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")
            started = time.perf_counter()
            results = await asyncio.gather(*(self._read_one(t, initial, stamp) for t in selected))
            read_ms = round((time.perf_counter() - started) * 1000, 3)
            self.more = any(batch is not None and batch.more for batch, _ in results)
            for target, (batch, error) in zip(selected, results, strict=True):
                if batch is None:
                    state, message = logs.empty_state(target, self.previous, error)
                    self.cursors.pop(target.pod, None)
                    await self.send_json({"type": "state", "pod": target.pod, "state": state, "message": message})
                    continue
                self.cursors[target.pod] = batch.cursor
                await self._send_batch(batch)
                if batch.reset and not batch.lines:
                    state, message = logs.empty_state(target, self.previous)
                    await self.send_json({"type": "state", "pod": target.pod, "state": state, "message": message})
            await self.send_json({"type": "tick", "at": stamp, "live": bool(self.live_task), "readMs": read_ms})

    async def _older(self, msg: dict) -> None:
        """``{"type":"older","pod":p,"before":n}`` -> ``{"type":"older","pod","id","first","lines"}``:
        the lines before line ``n`` of the Pod's instance (issue 14.5 "load older")."""
        pod, before = msg.get("pod"), msg.get("before")
        target = next((t for t in self.targets if t.pod == pod), None)
        if target is None or pod not in self.pods or not isinstance(before, int) or before <= 0:
            return
        target = target.with_container(self.container)

        def work():
            batch = logs.read_before(runtime_for(target.cluster), target, before, self.previous)
            return batch, batch.payload()

        try:
            batch, payload = await in_thread(work)
        except RuntimeFailure:
            return
        await self.send_json(
            {"type": "older", "pod": pod, "id": batch.identity, "first": batch.first, "lines": payload}
        )

    async def _read_one(self, target: logs.LogTarget, initial: bool, stamp: str):
        if not target.exists and target.archive_path(self.previous) is None:
            return None, PodNotFound(target.pod)
        if self.previous and not target.has_previous and target.archive_path(True) is None:
            return None, RuntimeFailure("no previous instance", "not_found")
        cursor = self.cursors.get(target.pod)

        def work():
            runtime = runtime_for(target.cluster)
            if cursor is None:
                batch = logs.read_tail(runtime, target, self.previous)
            else:
                batch = logs.read_since(runtime, target, cursor, self.previous, received_at=None if initial else stamp)
            batch.rendered = batch.payload()  # ANSI rendering off the event loop
            return batch

        try:
            return await in_thread(work), None
        except RuntimeFailure as exc:
            return None, exc

    async def _send_batch(self, batch: logs.LogBatch) -> None:
        payload = batch.rendered if batch.rendered is not None else batch.payload()
        step = self.frame_lines
        for i in range(0, max(len(payload), 1), step):
            part = payload[i : i + step]
            if not part and not batch.reset:
                return
            await self.send_json(
                {
                    "type": "lines",
                    "pod": batch.pod,
                    "id": batch.identity,
                    "reset": batch.reset and i == 0,
                    "first": batch.first + i,
                    "lines": part,
                    "cursor": batch.cursor.as_dict(),
                    "more": batch.more,
                    "rotated": batch.rotated and i == 0,
                }
            )


class _Upload:
    """An upload in progress (or a refused one whose chunks are swallowed until ``file-upload-end``)."""

    def __init__(self, expected: int, path: str = "", stream=None, error: str | None = None) -> None:
        self.expected = expected
        self.received = 0
        self.path = path
        self.stream = stream
        self.error = error
        self.encoder = transfer.Base64Lines()
        self.output = bytearray()
        self.reader: threading.Thread | None = None


class TerminalConsumer(_JobSocket):
    """``ws/terminal/jobs/<job>/pods/<pod>/``: a shell in the Pod's ``main`` container.

    Protocol (upstream-rlark 9): binary frames = terminal bytes both ways; text JSON ``resize``,
    ``file-upload`` (+ binary chunks + ``file-upload-end``), ``file-download`` ->
    ``file-download-start``/chunks/``file-download-end``, ``file-transfer-done``, ``error``.
    Additions: server ``ping`` every :attr:`ping_interval` s; ``closing`` before every close;
    optional client flow control ``{"type":"flow","window":bytes}`` + ``{"type":"ack","bytes":n}``
    (output pauses while more than ``window`` bytes are unacknowledged). Unknown text frames are
    dropped.

    Reconnect grace (issue 16): the first frame is ``{"type":"session","id":<token>,"resumed":bool}``. When the
    socket drops without the page's ``{"type":"bye"}`` (a network blip), the shell is kept for
    :attr:`grace_period` seconds (its output buffered, the last :data:`PARK_BUFFER` bytes) and a browser of
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
    idle_timeout = float(getattr(settings, "RLARK_TERMINAL_IDLE_TIMEOUT", 3600))
    queue_size = 64
    max_frame = 64 * 1024
    frame_interval = 1 / 60
    read_timeout = 0.2
    grace_period = float(getattr(settings, "RLARK_TERMINAL_GRACE_PERIOD", 60))

    async def connect(self):
        self.stream = None
        self.session: sessions.TerminalSession | None = None
        self.finished = False
        self.tasks: list[asyncio.Task] = []
        self.upload: _Upload | None = None
        self.download_task: asyncio.Task | None = None
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
        if target is None or not target.exists:
            await self._finish(access.CLOSE_GONE, f"pod {self.pod_name} not found (it may have been deleted)")
            return
        if target.phase != "Running":
            await self._finish(access.CLOSE_GONE, f"pod {self.pod_name} is {target.phase}; cannot open a terminal")
            return
        query = parse_qs(self.scope.get("query_string", b"").decode("latin-1"))
        self.container = query.get("container", ["main"])[0][:253] or "main"  # issue 14.6b
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

    # --- reconnect grace ----------------------------------------------------------------
    def _identity(self) -> dict:
        """Who may reattach this shell: the same user, job, Pod and container."""
        return {"user": self.user_id, "job": self.job_name, "pod": self.pod_name, "container": self.container}

    async def _find_kept(self, token: str) -> TerminalConsumer | str | None:
        """The kept shell ``token`` names for this browser: its consumer when this process holds it, the owner's
        mailbox channel when another web process does, else None. Waits up to :data:`FIND_PATIENCE` s, since a
        reconnect can arrive before the dropped socket's end has been noticed."""
        deadline = time.monotonic() + FIND_PATIENCE
        while True:
            old = _parked.get(token) or _hosted.get(token)
            if old is not None:
                return old if old._identity() == self._identity() else None
            if self.channel_layer is not None:
                try:
                    record = await shell_registry.lookup(token)
                except Exception:  # noqa: BLE001 - Redis unreachable: a new shell, and the page says so
                    logger.exception("kept shell lookup failed")
                    return None
                if record is not None:
                    owner = record.get("owner")
                    mine = {k: record.get(k) for k in ("user", "job", "pod", "container")} == self._identity()
                    return owner if mine and isinstance(owner, str) else None
            if time.monotonic() > deadline:
                return None
            await asyncio.sleep(0.1)

    async def _join_user_group(self) -> None:
        if self.channel_layer is not None and self.user_id is not None:  # deactivation closes it at once
            await self.channel_layer.group_add(user_sessions.group_name(self.user_id), self.channel_name)

    async def _attach_remote(self, token: str, owner: str) -> bool:
        """Relay the shell kept in another web process (the owner's mailbox ``owner``); False if it refused."""
        mine = self._identity()
        if not await shell_relay.request_attach(self.channel_layer, owner, token, self.channel_name, mine):
            return False
        self.remote = shell_relay.RemoteShell(self.channel_layer, owner, token, self.channel_name)
        self.stream = self.remote
        self.loop = asyncio.get_running_loop()
        self.out_q = asyncio.Queue()  # bounded by the owner's window (shell_relay.WINDOW)
        self.io = ThreadPoolExecutor(max_workers=1, thread_name_prefix="term-io")
        self.resume_token = token
        self.last_input = time.monotonic()
        await self._join_user_group()
        await self.send_json({"type": "session", "id": token, "resumed": True, "previous": True})
        await self._send_containers(self.target)
        self.remote.start()
        self.tasks = [asyncio.create_task(self._pump()), asyncio.create_task(self._keepalive())]
        return True

    async def terminal_relay(self, event: dict) -> None:
        """Channel messages from the owner of the relayed shell (``output``, ``end``, ``taken``)."""
        remote = self.remote
        if remote is None or remote.done and event.get("op") != "end" or event.get("token") != remote.token:
            return
        op = event.get("op")
        if op == "output":
            data = event.get("data")
            if isinstance(data, bytes) and len(data) <= shell_relay.MAX_CHUNK:
                self.out_q.put_nowait(("data", data))
        elif op == "end":
            code = event.get("code")
            remote.exit_code = code if isinstance(code, int) and not isinstance(code, bool) else None
            remote.done = True
            error = event.get("error")
            self.out_q.put_nowait(("error", error[:500]) if isinstance(error, str) else ("eof", None))
        elif op == "taken":
            remote.done = True
            with translation.override(self._language()):
                reason = _("this terminal was reattached in another connection")
            await self._finish(1000, reason)

    async def _adopt(self, token: str, old: TerminalConsumer) -> None:
        """Take over ``old``'s parked shell (same user, job and pod): buffered output first, then live."""
        _parked.pop(token, None)
        _hosted.pop(token, None)
        await old._drop_proxy()
        shell_relay.mailbox().off(token, old._relay_in)
        for task in old.tasks:
            task.cancel()
        for name in ("target", "runtime", "stream", "session", "loop", "out_q", "io", "reader", "stop"):
            setattr(self, name, getattr(old, name))
        buffered = bytes(old.parked_output)
        old.stream = old.session = None  # nothing of the shell is the old consumer's to close any more
        old.tasks = []
        self.resume_token = token
        self.last_input = time.monotonic()
        with contextlib.suppress(Exception):
            await shell_registry.forget(token)
        await self._join_user_group()
        await self.send_json({"type": "session", "id": token, "resumed": True, "previous": True})
        await self._send_containers(self.target)
        for i in range(0, len(buffered), self.max_frame):
            await self.send(bytes_data=buffered[i : i + self.max_frame])
        self.tasks = [asyncio.create_task(self._pump()), asyncio.create_task(self._keepalive())]

    def _park(self) -> bool:
        """Keep the shell for ``grace_period`` s after the socket dropped; False when it cannot be kept."""
        if self.grace_period <= 0 or self.goodbye or self.stream is not None and self.stream.exit_code is not None:
            return False
        if self.stream is None or self.session is None or self.upload is not None or not self.resume_token:
            return False
        if self.remote is not None:  # a relayed shell is kept by its owner (detach), not here
            return False
        self._keep_for_grace([*self.tasks, self.download_task])
        return True

    async def _publish(self, ttl: float) -> None:
        """Let every web worker find this kept shell for ``ttl`` s (its owner is this process's mailbox)."""
        if self.channel_layer is None:
            return
        box = shell_relay.mailbox()
        try:
            owner = await box.address(self.channel_layer)
            box.on(self.resume_token, self._relay_in)
            await shell_registry.register(self.resume_token, {"owner": owner, **self._identity()}, ttl)
        except asyncio.CancelledError:
            raise
        except Exception:  # noqa: BLE001 - then only this process can reattach it
            logger.exception("could not publish a kept shell")

    # --- relaying a kept shell to another web worker (owner side) -----------------------------
    async def _relay_in(self, msg: dict) -> None:
        """A proxy's message from the mailbox (see :mod:`terminal.services.shell_relay`); sizes re-checked."""
        proxy, op = msg.get("proxy"), msg.get("op")
        if not isinstance(proxy, str) or len(proxy) > 200:
            return
        if op == "attach":
            await self._relay_attach(msg, proxy)
            return
        if self.stream is None:
            return
        if proxy != self.proxy:
            return
        self.proxy_heard = time.monotonic()
        try:
            if op == "input":
                data = msg.get("data")
                if isinstance(data, bytes) and 0 < len(data) <= shell_relay.MAX_CHUNK:
                    await self.loop.run_in_executor(self.io, self.stream.write, data)
            elif op == "resize":
                rows, cols = msg.get("rows"), msg.get("cols")
                if isinstance(rows, int) and isinstance(cols, int) and 0 < rows <= 1000 and 0 < cols <= 1000:
                    await self.loop.run_in_executor(self.io, self.stream.resize, rows, cols)
            elif op == "ack":
                n = msg.get("bytes")
                if isinstance(n, int) and 0 < n <= shell_relay.WINDOW:
                    self.relay_acked += n
                    self.ack_event.set()
            elif op == "alive":
                await self._publish(self.grace_period + shell_relay.LEASE)
            elif op == "detach":
                await self._repark()
            elif op == "close":
                reason = msg.get("reason")
                self.proxy = None
                _hosted.pop(self.resume_token, None)
                await self._cleanup(reason[:500] if isinstance(reason, str) else "terminal session ended", None)
        except (RuntimeFailure, OSError) as exc:
            await self._relay_end(None, f"terminal connection lost: {exc}")

    async def _relay_attach(self, msg: dict, proxy: str) -> None:
        token = self.resume_token
        kept = _parked.get(token) is self or _hosted.get(token) is self
        identity = {k: msg.get(k) for k in ("user", "job", "pod", "container")}
        ok = kept and self.stream is not None and self.stream.exit_code is None and identity == self._identity()
        if ok:
            await self._drop_proxy()
            current = asyncio.current_task()
            for task in self.tasks:
                if task is not current:
                    task.cancel()
            _parked.pop(token, None)
            _hosted[token] = self
            self.proxy, self.proxy_heard = proxy, time.monotonic()
            self.relay_sent = self.relay_acked = 0
            self.relay_marks: deque[int] = deque()
            buffered, self.parked_output = bytes(self.parked_output), bytearray()
        reply = msg.get("reply")
        if isinstance(reply, str) and len(reply) <= 200:
            await shell_relay.send(self.channel_layer, reply, {"type": shell_relay.TYPE, "op": "attached", "ok": ok})
        if ok:
            self.tasks = [asyncio.create_task(self._forward(buffered)), asyncio.create_task(self._lease())]
            await self._publish(self.grace_period + shell_relay.LEASE)

    async def _drop_proxy(self) -> None:
        """Tell the proxy relaying this shell (if any) that another connection took it."""
        proxy, self.proxy = self.proxy, None
        if proxy is not None:
            message = {"type": shell_relay.TYPE, "op": "taken", "token": self.resume_token}
            with contextlib.suppress(Exception):
                await self.channel_layer.send(proxy, message)

    async def _repark(self) -> None:
        """The proxy's browser dropped (or the proxy went silent): keep the shell for the grace period again."""
        if self.proxy is None or self.stream is None:
            return
        self.proxy = None
        _hosted.pop(self.resume_token, None)
        self._keep_for_grace(self.tasks)

    def _keep_for_grace(self, running: list) -> None:
        """Keep this shell for its grace period: cancel ``running`` (not the calling task), start buffering its
        output, make it findable for a reconnect here and through the registry (drain, expiry, publish tasks)."""
        current = asyncio.current_task()
        for task in running:
            if task is not None and task is not current and not task.done():
                task.cancel()
        self.parked_output = bytearray()
        _parked[self.resume_token] = self
        self.tasks = [
            asyncio.create_task(self._drain()),
            asyncio.create_task(self._expire()),
            asyncio.create_task(self._publish(self.grace_period)),
        ]

    async def _relay_out(self, data: bytes) -> bool:
        """Send output to the proxy within the window; False (shell kept again) when the proxy cannot take it."""
        while self.proxy is not None:
            while self.relay_marks and self.relay_marks[0] <= self.relay_acked:
                self.relay_marks.popleft()
            full = len(self.relay_marks) >= shell_relay.WINDOW_MESSAGES
            if not full and self.relay_sent - self.relay_acked <= shell_relay.WINDOW:
                break
            self.ack_event.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.ack_event.wait(), 1.0)
        proxy = self.proxy
        message = {"type": shell_relay.TYPE, "op": "output", "token": self.resume_token, "data": data}
        if proxy is None or not await shell_relay.send(self.channel_layer, proxy, message):
            await self._repark()
            return False
        self.relay_sent += len(data)
        self.relay_marks.append(self.relay_sent)
        return True

    async def _forward(self, buffered: bytes) -> None:
        """While relayed: the kept output, then the shell's output, to the proxy; the end as ``end``."""
        try:
            for i in range(0, len(buffered), shell_relay.MAX_CHUNK):
                if not await self._relay_out(buffered[i : i + shell_relay.MAX_CHUNK]):
                    self.parked_output += buffered[i:]
                    return
            pending = None
            while True:
                kind, data = pending or await self.out_q.get()
                pending = None
                if kind != "data":
                    code = await in_thread(self._exit_code) if kind == "eof" else None
                    await self._relay_end(code, None if kind == "eof" else f"terminal connection lost: {data}")
                    return
                buf = bytearray(data)
                while len(buf) < shell_relay.MAX_CHUNK:
                    try:
                        nxt = self.out_q.get_nowait()
                    except asyncio.QueueEmpty:
                        break
                    if nxt[0] != "data" or len(buf) + len(nxt[1]) > shell_relay.MAX_CHUNK:
                        pending = nxt
                        break
                    buf += nxt[1]
                if not await self._relay_out(bytes(buf)):
                    self.parked_output += buf
                    return
        except asyncio.CancelledError:
            pass

    async def _relay_end(self, code: int | None, error: str | None) -> None:
        """The relayed shell ended: tell the proxy, then close it here (audit)."""
        proxy, self.proxy = self.proxy, None
        _hosted.pop(self.resume_token, None)
        if proxy is not None:
            message = {"type": shell_relay.TYPE, "op": "end", "token": self.resume_token, "code": code}
            if error:
                message["error"] = error[:500]
            with contextlib.suppress(Exception):
                await shell_relay.send(self.channel_layer, proxy, message)
        reason = error or (f"terminal exited with code {code}" if code is not None else "terminal session ended")
        await self._cleanup(reason, code)

    async def _lease(self) -> None:
        """Keep the shell again when the proxy has been silent for :data:`shell_relay.LEASE` s (its process
        died)."""
        try:
            while self.proxy is not None:
                await asyncio.sleep(min(5.0, shell_relay.LEASE / 4))
                if time.monotonic() - self.proxy_heard > shell_relay.LEASE:
                    await self._repark()
                    return
        except asyncio.CancelledError:
            pass

    async def _drain(self) -> None:
        """While parked: keep reading (the shell never blocks on a full PTY), keep the newest output."""
        try:
            while True:
                kind, data = await self.out_q.get()
                if kind == "data":
                    self.parked_output += data
                    if len(self.parked_output) > PARK_BUFFER:
                        del self.parked_output[: len(self.parked_output) - PARK_BUFFER]
                    continue
                _parked.pop(self.resume_token, None)
                code = await in_thread(self._exit_code) if kind == "eof" else None
                await self._cleanup("the shell ended while the browser was away", code)
                return
        except asyncio.CancelledError:
            pass

    async def _expire(self) -> None:
        try:
            await asyncio.sleep(self.grace_period)
        except asyncio.CancelledError:
            return
        if _parked.get(self.resume_token) is self:
            del _parked[self.resume_token]
            await self._cleanup(f"browser did not reconnect within {self.grace_period:g} s", None)

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
                    await self._flow_wait()
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

    async def _flow_wait(self) -> None:
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
                if self.upload is not None:
                    self.upload.error = self.upload.error or "upload chunk too large"
                return
            if self.upload is not None:
                await self._upload_chunk(bytes_data)
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
        if text_data is None or len(text_data) > MAX_TEXT_FRAME:
            return
        try:
            msg = json.loads(text_data)
        except ValueError:
            return
        if not isinstance(msg, dict):
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
            await self._upload_start(msg)
        elif kind == "file-upload-end":
            await self._upload_end()
        elif kind == "file-download":
            if self.download_task and not self.download_task.done() or self.upload is not None:
                await self._transfer_done(False, "another file transfer is in progress")
            else:
                self.last_input = time.monotonic()
                self.download_task = asyncio.create_task(self._download(msg.get("path")))
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

    # --- file transfer ------------------------------------------------------------------
    async def _transfer_done(self, success: bool, error: str | None = None) -> None:
        await self.send_json({"type": "file-transfer-done", "success": success, "error": error})

    async def _upload_start(self, msg: dict) -> None:
        with translation.override(self._language()):  # the refusals below are shown on the user's page
            if self.upload is not None:  # its chunks and ours are indistinguishable: fail the running one
                self.upload.error = self.upload.error or _("another upload started before this one finished")
                return
            if self.download_task and not self.download_task.done():
                self.upload = _Upload(0, error=_("another file transfer is in progress"))
                return
            size = msg.get("size")
            try:
                path = transfer.upload_path(msg.get("path"))
                mode = transfer.upload_mode(msg.get("mode"))
                if not isinstance(size, int) or isinstance(size, bool) or size < 0:
                    raise transfer.TransferError(_("upload size is missing"))
                if size > transfer.MAX_TRANSFER_BYTES:
                    raise transfer.TransferError(
                        _("file is larger than the %(mib)d MiB limit")
                        % {"mib": transfer.MAX_TRANSFER_BYTES // (1024 * 1024)}
                    )
            except transfer.TransferError as exc:
                self.upload = _Upload(0, error=str(exc))
                return
        self.last_input = time.monotonic()
        try:
            stream = await in_thread(
                self.runtime.exec,
                self.target.namespace,
                self.target.pod,
                transfer.upload_command(path, size, mode),
                **self.exec_kwargs,
            )
        except RuntimeFailure as exc:
            self.upload = _Upload(0, error=str(exc))
            return
        up = _Upload(size, path, stream)

        def drain() -> None:
            while True:
                data = stream.read(0.2)
                if data is None:
                    if up.stream is None:
                        return
                    continue
                if not data:
                    return
                up.output += data
                del up.output[:-65536]

        up.reader = threading.Thread(target=drain, daemon=True, name="term-upload")
        up.reader.start()
        self.upload = up

    async def _upload_chunk(self, data: bytes) -> None:
        up = self.upload
        if up.error:
            return
        up.received += len(data)
        if up.received > up.expected:
            up.error = "received more bytes than the announced size"
            return
        encoded = up.encoder.feed(data)
        if encoded:
            try:
                await self.loop.run_in_executor(self.io, up.stream.write, encoded)
            except RuntimeFailure as exc:
                up.error = str(exc)

    async def _upload_end(self) -> None:
        up, self.upload = self.upload, None
        if up is None:
            return
        self.last_input = time.monotonic()
        if up.error is None and up.received != up.expected:
            up.error = f"upload incomplete: received {up.received} of {up.expected} bytes"
        if up.error is None:
            try:
                await self.loop.run_in_executor(self.io, up.stream.write, up.encoder.finish())
            except RuntimeFailure as exc:
                up.error = str(exc)
        if up.stream is not None:
            timeout = 30 + up.expected / (1024 * 1024)
            if up.error is None:
                await in_thread(up.reader.join, timeout)
            await in_thread(up.stream.close)
            stream, up.stream = up.stream, None
            await in_thread(up.reader.join, 2)
            if up.error is None:
                out = bytes(up.output)
                if b"RLARK-OK" not in out:
                    marker = out.rfind(b"RLARK-ERR")
                    line = out[marker + 9 :].split(b"\n", 1)[0].strip() if marker >= 0 else b""
                    up.error = line.decode("utf-8", "replace") or "the file could not be written"
            del stream
        await self._transfer_done(up.error is None, up.error)

    def _language(self) -> str:
        """The page's language (cookie, else Accept-Language), for the messages this consumer writes."""
        if getattr(self, "language", None) is None:
            self.language = scope_language(self.scope)
        return self.language

    async def _download(self, raw_path: object) -> None:
        try:
            with translation.override(self._language()):
                path = transfer.download_path(raw_path)
        except transfer.TransferError as exc:
            await self._transfer_done(False, str(exc))
            return
        try:
            stream = await in_thread(
                self.runtime.exec,
                self.target.namespace,
                self.target.pod,
                transfer.download_command(path),
                **self.exec_kwargs,
            )
        except RuntimeFailure as exc:
            await self._transfer_done(False, str(exc))
            return
        parser = transfer.DownloadParser()
        started = False
        error: str | None = None
        try:
            async with self.send_lock:  # no terminal bytes between file-download-start and -end
                deadline = time.monotonic() + 15
                while not parser.done:
                    data = await in_thread(stream.read, 0.5)
                    if data is None:
                        if not started and time.monotonic() > deadline:
                            error = "the download did not start"
                            break
                        continue
                    if not data:
                        break
                    parser.feed(data)
                    if parser.size is not None and not started and not parser.error:
                        started = True
                        name = path.rsplit("/", 1)[-1]
                        await self.send_json({"type": "file-download-start", "size": parser.size, "name": name})
                    for chunk in parser.take(final=parser.done):
                        await self._flow_wait()
                        await self.send(bytes_data=chunk)
                        self.sent_bytes += len(chunk)
                error = error or parser.error or (None if parser.done else "the download was interrupted")
                if started:
                    await self.send_json({"type": "file-download-end"})
        finally:
            await in_thread(stream.close)
        await self._transfer_done(error is None, error)

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
        for task in [*self.tasks, self.download_task]:
            if task is not None and task is not current and not task.done():
                task.cancel()
        if self.upload is not None and self.upload.stream is not None:
            await in_thread(self.upload.stream.close)
            self.upload = None
        if self.remote is not None:
            await self.remote.release(end_shell=not keep, reason=reason)
            self.io.shutdown(wait=False)
            return
        if self.resume_token:
            _hosted.pop(self.resume_token, None)
            shell_relay.mailbox().off(self.resume_token, self._relay_in)
            with contextlib.suppress(Exception):
                await shell_registry.forget(self.resume_token)
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
