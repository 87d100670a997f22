"""List and watch in the fake Kubernetes API server (:class:`ListWatch`, a mixin of
:class:`tests.fake_k8s.server.FakeKubernetes`): lists filtered by labelSelector and fieldSelector carrying the
current resourceVersion, and watches streamed as newline-delimited JSON events from the store's history, resumed
from a resourceVersion (``410 Expired`` when it is older than the last :meth:`compact`), with synthetic ``ADDED``
events when none is given, ``BOOKMARK`` events every ``bookmark_interval`` seconds when allowed, and
``timeoutSeconds``."""

from __future__ import annotations

import asyncio
import json
import threading
import time

from aiohttp import web

from tests.fake_k8s.selectors import field_match, label_match
from tests.fake_k8s.wire import APPS, CORE, status_response


def _event_line(etype: str, obj: dict) -> bytes:
    return (json.dumps({"type": etype, "object": obj}) + "\n").encode()


class ListWatch:
    """GET of a collection, plain (list) or with ``watch=true``."""

    lock: threading.RLock
    rv: int
    history: list[tuple[int, str, str, dict]]
    compacted_rv: int
    bookmark_interval: float
    _watchers: list[asyncio.Queue]

    def _list(self, request: web.Request, resource: str, namespace: str, kind: str) -> web.Response:
        try:
            items = self.list(resource, namespace or None, request.query.get("labelSelector"))
        except ValueError as exc:
            return status_response(400, "BadRequest", str(exc))
        fs = request.query.get("fieldSelector")
        items = [i for i in items if field_match(fs, i)]
        return web.json_response(
            {
                "kind": f"{kind}List",
                "apiVersion": "apps/v1" if resource in APPS else "v1",
                "metadata": {"resourceVersion": str(self.rv)},
                "items": items,
            }
        )

    async def _watch(self, request: web.Request, resource: str, namespace: str) -> web.StreamResponse:
        since = int(request.query.get("resourceVersion") or 0)
        timeout = float(request.query.get("timeoutSeconds") or 30)
        selector = request.query.get("labelSelector")
        fs = request.query.get("fieldSelector")
        resp = web.StreamResponse(headers={"Content-Type": "application/json"})
        await resp.prepare(request)
        if since and since < self.compacted_rv:
            status = {
                "kind": "Status",
                "apiVersion": "v1",
                "status": "Failure",
                "message": f"too old resource version: {since} ({self.compacted_rv})",
                "reason": "Expired",
                "code": 410,
            }
            await resp.write(_event_line("ERROR", status))
            return resp
        queue: asyncio.Queue = asyncio.Queue()
        self._watchers.append(queue)
        sent = since
        if not since:  # no resourceVersion: synthetic ADDED events for the current state
            for obj in self.list(resource, namespace or None, selector):
                if field_match(fs, obj):
                    await resp.write(_event_line("ADDED", obj))
            sent = self.rv
        deadline = time.monotonic() + timeout
        bookmarks = request.query.get("allowWatchBookmarks") in ("true", "1")
        last_bookmark = time.monotonic()
        try:
            while time.monotonic() < deadline:
                if bookmarks and time.monotonic() - last_bookmark >= self.bookmark_interval:
                    last_bookmark = time.monotonic()
                    mark = {
                        "kind": (CORE.get(resource) or APPS[resource])[0],
                        "metadata": {"resourceVersion": str(sent)},
                    }
                    await resp.write(_event_line("BOOKMARK", mark))
                with self.lock:
                    events = [e for e in self.history if e[0] > sent and e[1] == resource]
                for rv, _res, etype, obj in events:
                    sent = rv
                    ns_ok = not namespace or obj["metadata"].get("namespace") == namespace
                    if ns_ok and label_match(selector, obj["metadata"].get("labels") or {}) and field_match(fs, obj):
                        await resp.write(_event_line(etype, obj))
                try:
                    wait_for = min(1.0, self.bookmark_interval if bookmarks else 1.0, deadline - time.monotonic())
                    await asyncio.wait_for(queue.get(), timeout=max(0.01, wait_for))
                except TimeoutError:
                    pass
        except (ConnectionResetError, asyncio.CancelledError):
            pass
        finally:
            self._watchers.remove(queue)
        return resp
