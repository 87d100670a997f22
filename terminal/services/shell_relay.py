"""Relaying a kept WebTerminal shell between web workers over the channel layer.

The owner (the web process whose consumer started the shell) listens on one channel per process, its
*mailbox* (:class:`Mailbox`); a kept shell registers ``token -> mailbox`` in :mod:`shell_registry`. A reconnect
that lands on another worker becomes a *proxy*: it asks the owner to ``attach`` (:func:`request_attach`), then
forwards the browser's input to the owner (:class:`RemoteShell`) and receives the shell's output on its own
consumer channel. Every message is a dict ``{"type": "terminal.relay", "op": ..., "token": ...}``:

Proxy -> owner mailbox (all carry ``token`` and ``proxy``, the proxy consumer's channel name):
  ``attach {user, job, pod, container, reply}`` (the owner answers ``{"op": "attached", "ok": bool}`` on
  ``reply``), ``input {data: bytes <= MAX_CHUNK}``, ``resize {rows, cols}`` (1..1000), ``ack {bytes}`` (output
  bytes the proxy delivered to its browser), ``alive`` (every :data:`ALIVE_INTERVAL` s), ``detach`` (the browser
  dropped: keep the shell for the grace period again), ``close {reason}`` (end the shell).
Owner -> proxy channel: ``output {data: bytes <= MAX_CHUNK}``, ``end {code, reason}`` (the shell ended),
  ``taken`` (another connection took the shell over).

The owner sends at most :data:`WINDOW` unacknowledged bytes and :data:`WINDOW_MESSAGES` messages, so neither a
slow browser nor a full channel grows any buffer: the shell blocks on its PTY as it would with a local browser.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
import weakref
from collections.abc import Awaitable, Callable

from channels.exceptions import ChannelFull

logger = logging.getLogger("rlark.terminal")

TYPE = "terminal.relay"
MAX_CHUNK = 64 * 1024  # bytes of terminal data in one message
WINDOW = 1024 * 1024  # unacknowledged output bytes per relayed shell
WINDOW_MESSAGES = 32  # unacknowledged output messages per relayed shell (the channel holds 100)
ALIVE_INTERVAL = 10.0  # seconds between a proxy's ``alive`` messages
LEASE = 35.0  # seconds without any message from its proxy after which the owner keeps the shell again
ATTACH_TIMEOUT = 5.0  # seconds a proxy waits for the owner's answer
SEND_PATIENCE = 10.0  # seconds a send retries while the receiving channel is full
PROXY_OPS = frozenset({"attach", "input", "resize", "ack", "alive", "detach", "close"})

Handler = Callable[[dict], Awaitable[None]]


async def send(layer, channel: str, message: dict) -> bool:
    """``layer.send`` that waits (up to :data:`SEND_PATIENCE` s) while ``channel`` is full; False if it stayed
    full. Other channel-layer errors propagate."""
    deadline = time.monotonic() + SEND_PATIENCE
    delay = 0.01
    while True:
        try:
            await layer.send(channel, message)
            return True
        except ChannelFull:
            if time.monotonic() > deadline:
                return False
            await asyncio.sleep(delay)
            delay = min(delay * 2, 0.25)


class Mailbox:
    """This process's owner channel: receives the proxies' messages and hands each to its token's handler.

    One per event loop (daphne runs one). :meth:`address` starts it on first use."""

    def __init__(self) -> None:
        self.channel: str | None = None
        self.task: asyncio.Task | None = None
        self.handlers: dict[str, Handler] = {}

    async def address(self, layer) -> str:
        """The mailbox's channel name (started on the running loop when needed)."""
        loop = asyncio.get_running_loop()
        if self.channel is None or self.task is None or self.task.done() or self.task.get_loop() is not loop:
            self.channel = await layer.new_channel()
            self.task = loop.create_task(self._run(layer, self.channel))
        return self.channel

    def on(self, token: str, handler: Handler) -> None:
        """Route ``token``'s messages to ``handler`` (replacing an earlier one)."""
        self.handlers[token] = handler

    def off(self, token: str, handler: Handler | None = None) -> None:
        """Stop routing ``token`` (only if it still goes to ``handler``, when given)."""
        if handler is None or self.handlers.get(token) == handler:
            self.handlers.pop(token, None)

    async def _run(self, layer, channel: str) -> None:
        while True:
            try:
                message = await layer.receive(channel)
            except asyncio.CancelledError:
                raise
            except Exception:  # noqa: BLE001 - a Redis hiccup: try again shortly
                logger.exception("terminal relay mailbox receive failed")
                await asyncio.sleep(1.0)
                continue
            if not isinstance(message, dict) or message.get("op") not in PROXY_OPS:
                continue
            handler = self.handlers.get(message.get("token"))
            if handler is None:
                if message.get("op") == "attach" and isinstance(message.get("reply"), str):
                    with contextlib.suppress(Exception):
                        await layer.send(message["reply"], {"type": TYPE, "op": "attached", "ok": False})
                continue
            try:
                await handler(message)
            except Exception:  # noqa: BLE001 - one shell's failure must not stop the mailbox
                logger.exception("terminal relay message failed")


_mailboxes: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()  # event loop -> Mailbox


def mailbox() -> Mailbox:
    """The running event loop's :class:`Mailbox`."""
    loop = asyncio.get_running_loop()
    box = _mailboxes.get(loop)
    if box is None:
        box = _mailboxes[loop] = Mailbox()
    return box


async def request_attach(layer, owner: str, token: str, proxy: str, identity: dict) -> bool:
    """Ask ``owner`` to relay ``token``'s shell to the consumer channel ``proxy``; True once it agreed.

    ``identity``: ``{user, job, pod, container}`` of the reconnecting browser; the owner compares it with the
    shell's own. False on refusal, on no answer within :data:`ATTACH_TIMEOUT` s or a channel-layer error."""
    try:
        reply = await layer.new_channel()
        message = {"type": TYPE, "op": "attach", "token": token, "proxy": proxy, "reply": reply, **identity}
        if not await send(layer, owner, message):
            return False
        answer = await asyncio.wait_for(layer.receive(reply), ATTACH_TIMEOUT)
    except (TimeoutError, OSError) as exc:
        logger.info("terminal relay: no answer from the owner of a kept shell (%s)", exc.__class__.__name__)
        return False
    except Exception:  # noqa: BLE001 - the reconnect then gets a new shell, and says so
        logger.exception("terminal relay attach failed")
        return False
    return isinstance(answer, dict) and answer.get("op") == "attached" and answer.get("ok") is True


class RemoteShell:
    """The proxy's handle on a shell that lives in another web process (the same calls a consumer makes on a
    local shell, as messages to its owner). ``exit_code`` is set when the owner reports the end."""

    def __init__(self, layer, owner: str, token: str, proxy: str) -> None:
        self.layer = layer
        self.owner = owner
        self.token = token
        self.proxy = proxy
        self.exit_code: int | None = None
        self.done = False  # ended, detached or taken over: nothing more is sent
        self.alive_task: asyncio.Task | None = None

    async def _send(self, op: str, **fields) -> None:
        if self.done:
            return
        message = {"type": TYPE, "op": op, "token": self.token, "proxy": self.proxy, **fields}
        if not await send(self.layer, self.owner, message):
            raise OSError("the web process holding this shell does not answer")

    def start(self) -> None:
        """Tell the owner every :data:`ALIVE_INTERVAL` s that this proxy still has its browser."""
        self.alive_task = asyncio.create_task(self._alive())

    async def _alive(self) -> None:
        with contextlib.suppress(asyncio.CancelledError, OSError):
            while not self.done:
                await asyncio.sleep(ALIVE_INTERVAL)
                await self._send("alive")

    async def write(self, data: bytes) -> None:
        """Type ``data`` (any length; sent in :data:`MAX_CHUNK` pieces). OSError if the owner is gone."""
        for i in range(0, len(data), MAX_CHUNK):
            await self._send("input", data=bytes(data[i : i + MAX_CHUNK]))

    async def resize(self, rows: int, cols: int) -> None:
        await self._send("resize", rows=rows, cols=cols)

    async def ack(self, n: int) -> None:
        """``n`` output bytes reached the browser."""
        await self._send("ack", bytes=n)

    async def release(self, end_shell: bool, reason: str) -> None:
        """The browser left: ``end_shell`` ends the shell (``close``), else the owner keeps it (``detach``)."""
        if self.alive_task is not None:
            self.alive_task.cancel()
        with contextlib.suppress(Exception):
            await self._send("close" if end_shell else "detach", reason=reason[:500])
        self.done = True
