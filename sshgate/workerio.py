"""asyncio over the runtime's blocking :class:`clusters.runtime.base.ExecStream`, and the agent's line protocol.

:class:`WorkerStream` moves bytes between an exec stream and the event loop with one reader and one writer
thread, through bounded queues (a slow SSH client or a slow Worker blocks its side instead of buffering without
limit). :class:`AgentLink` speaks :mod:`sshgate.agent`'s ``<tag><base64>`` lines on top of it.
"""

from __future__ import annotations

import asyncio
import base64
import threading
from collections.abc import AsyncIterator

from clusters.runtime.base import ExecStream
from rlark_console.db_threads import in_thread

QUEUE_CHUNKS = 32
READ_TIMEOUT = 0.2  # s per blocking read of the exec stream; bounds how fast a close is noticed
MAX_LINE = 4 << 20  # bytes of one agent line (a 1 MiB read is ~1.4 MiB of base64)


class WorkerStream:
    """One exec stream in a Worker, as async ``read``/``write``. ``read`` returns ``b""`` at the end."""

    def __init__(self, stream: ExecStream, loop: asyncio.AbstractEventLoop, name: str = "worker") -> None:
        self.stream = stream
        self.loop = loop
        self._out: asyncio.Queue[bytes] = asyncio.Queue(QUEUE_CHUNKS)
        self._in: asyncio.Queue[bytes | None] = asyncio.Queue(QUEUE_CHUNKS)
        self._closed = threading.Event()
        self.error: str = ""
        threading.Thread(target=self._reader, name=f"ssh-read-{name}", daemon=True).start()
        threading.Thread(target=self._writer, name=f"ssh-write-{name}", daemon=True).start()

    def _hand_over(self, coro) -> bool:
        try:
            asyncio.run_coroutine_threadsafe(coro, self.loop).result()
            return True
        except (RuntimeError, asyncio.CancelledError):  # loop closed
            coro.close()
            return False

    def _reader(self) -> None:
        while not self._closed.is_set():
            try:
                data = self.stream.read(READ_TIMEOUT)
            except Exception as exc:  # the stream broke (Pod gone, API server away)
                self.error = str(exc)
                data = b""
            if data is None:
                continue
            if not self._hand_over(self._out.put(data)) or not data:
                return
        self._hand_over(self._out.put(b""))

    def _writer(self) -> None:
        while True:
            fut = asyncio.run_coroutine_threadsafe(self._in.get(), self.loop)
            try:
                data = fut.result()
            except (RuntimeError, asyncio.CancelledError):
                return
            if data is None or self._closed.is_set():
                return
            try:
                self.stream.write(data)
            except Exception as exc:
                self.error = str(exc)
                return

    async def read(self) -> bytes:
        return await self._out.get()

    async def write(self, data: bytes) -> None:
        if data and not self._closed.is_set():
            await self._in.put(data)

    async def resize(self, rows: int, cols: int) -> None:
        if rows > 0 and cols > 0:
            await in_thread(self.stream.resize, rows, cols)

    @property
    def exit_code(self) -> int | None:
        return self.stream.exit_code

    async def close(self) -> None:
        """Stop both threads and close the exec (kills what still runs). Idempotent."""
        if self._closed.is_set():
            return
        self._closed.set()
        try:
            self._in.put_nowait(None)
        except asyncio.QueueFull:
            pass  # the writer sees _closed after its current chunk
        await in_thread(self.stream.close)


class AgentError(Exception):
    """The agent could not start what was asked (``str(exc)`` is its one-line reason)."""


class AgentLink:
    """:mod:`sshgate.agent` frames over a :class:`WorkerStream`."""

    def __init__(self, stream: WorkerStream) -> None:
        self.stream = stream
        self._buf = b""

    async def _line(self) -> bytes | None:
        while b"\n" not in self._buf:
            data = await self.stream.read()
            if not data:
                return None
            self._buf += data
            if len(self._buf) > MAX_LINE and b"\n" not in self._buf:
                raise AgentError("the Worker sent an over-long line")
        line, self._buf = self._buf.split(b"\n", 1)
        return line.strip()

    async def frames(self) -> AsyncIterator[tuple[bytes, bytes]]:
        """``(tag, payload)`` until the agent ends; lines that are no frames are skipped."""
        while True:
            line = await self._line()
            if line is None:
                return
            if not line:
                continue
            try:
                yield line[:1], base64.b64decode(line[1:], validate=True)
            except ValueError:
                continue

    async def ready(self) -> None:
        """Wait for ``R``; raises AgentError with the agent's ``E`` reason, or when it ended first."""
        async for tag, payload in self.frames():
            if tag == b"R":
                return
            if tag == b"E":
                raise AgentError(payload.decode(errors="replace"))
        detail = self.stream.error or "python3 is needed in the Worker image for this"
        raise AgentError(f"the Worker ended the session before it started ({detail})")

    async def send(self, tag: bytes, data: bytes = b"") -> None:
        await self.stream.write(tag + base64.b64encode(data) + b"\n")
