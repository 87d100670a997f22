"""The Logs tab's websocket: the job's Pods and their log lines, refreshed live."""

from __future__ import annotations

import asyncio
import logging
import time
from datetime import UTC, datetime

from channels.db import database_sync_to_async

from clusters.runtime.base import PodNotFound, RuntimeFailure
from rlark_console.db_threads import in_thread
from terminal.consumers.base import JobSocket, text_frame
from terminal.services import access, logs
from terminal.services.runtimes import runtime_for

logger = logging.getLogger(__name__)


class LogsConsumer(JobSocket):
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
        self.container = "main"  # the container shown when one Worker is selected
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
        msg = text_frame(text_data)
        if msg is None:
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
        the lines before line ``n`` of the Pod's instance ("load older")."""
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
