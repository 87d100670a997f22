"""Reconnect grace of the WebTerminal: a shell kept for its browser when the socket drops, and relayed to the web
worker the browser reconnects to.

When the socket drops without the page's ``{"type":"bye"}`` (a network blip), the shell is kept for
``grace_period`` seconds (its output buffered, the last :data:`PARK_BUFFER` bytes) and a browser of the same user
that connects with ``?resume=<token>`` gets the same shell back (``resumed: true``, the buffered output first),
whichever web worker takes the reconnect: a worker that does not hold the shell relays it from its owner process
over the channel layer (:mod:`terminal.services.shell_relay`, found through :mod:`terminal.services.shell_registry`).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections import deque
from concurrent.futures import ThreadPoolExecutor

from django.utils import translation
from django.utils.translation import gettext as _

from clusters.runtime.base import RuntimeFailure
from rlark_console.db_threads import in_thread
from terminal.services import shell_registry, shell_relay

logger = logging.getLogger(__name__)

PARK_BUFFER = 256 * 1024  # output kept for a reattaching browser (the most recent bytes)
# Shells whose browser went away without saying goodbye, by resume token, for the grace period (this process).
_parked: dict[str, KeptShell] = {}
# Shells of this process relayed to a browser connected to another web worker, by resume token.
_hosted: dict[str, KeptShell] = {}
FIND_PATIENCE = 1.5  # seconds a reconnect looks for its kept shell (the drop may not have been noticed yet)


class KeptShell:
    """The reconnect grace of a ``TerminalConsumer`` (a mixin: it works on the consumer's shell, its ``stream``,
    ``session``, output queue ``out_q``, ``tasks``, ``resume_token``, ``remote`` and ``proxy``). ``terminal_relay``
    is the Channels handler of the relay's messages."""

    # --- reconnect grace ----------------------------------------------------------------
    def _identity(self) -> dict:
        """Who may reattach this shell: the same user, job, Pod and container."""
        return {"user": self.user_id, "job": self.job_name, "pod": self.pod_name, "container": self.container}

    async def _find_kept(self, token: str) -> KeptShell | str | None:
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
            with translation.override(self.page_language()):
                reason = _("this terminal was reattached in another connection")
            await self._finish(1000, reason)

    async def _adopt(self, token: str, old: KeptShell) -> None:
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
        if self.stream is None or self.session is None or self.transfers.upload is not None or not self.resume_token:
            return False
        if self.remote is not None:  # a relayed shell is kept by its owner (detach), not here
            return False
        self._keep_for_grace([*self.tasks, self.transfers.download_task])
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

    async def _unpublish(self) -> None:
        """The shell ends: no web worker can find or reattach it any more."""
        _hosted.pop(self.resume_token, None)
        shell_relay.mailbox().off(self.resume_token, self._relay_in)
        with contextlib.suppress(Exception):
            await shell_registry.forget(self.resume_token)
