"""A stateful fake Kubernetes API server over real HTTP on 127.0.0.1, for tests and benchmarks.

It speaks enough of the real wire protocol for the official ``kubernetes`` client:

- core/v1: namespaces, nodes, pods (+ ``log`` with tailLines/previous/follow, ``exec`` over websocket with the
  v4/v5 channel protocol), services, configmaps, secrets, persistentvolumeclaims, events;
- apps/v1: statefulsets (+ ``scale``) with a tiny controller that creates/deletes Pods by ordinal;
- authorization.k8s.io/v1 selfsubjectaccessreviews; metrics.k8s.io/v1beta1 pod metrics (when enabled);
- list with labelSelector/fieldSelector, watch with resourceVersion and ``410 Gone`` after :meth:`compact`,
  create, replace, delete (cascading for StatefulSets unless ``propagationPolicy=Orphan``), deletecollection,
  and PATCH: server-side apply (``application/apply-patch+yaml``), merge and strategic-merge patches;
- bearer-token authentication and fault injection (HTTP 500s, slow answers/timeouts, connection refused).

The server runs its own asyncio loop in a daemon thread; all test helpers are thread-safe plain methods.

This module holds :class:`FakeKubernetes` itself (its state, lifecycle, faults and kubeconfig); the rest lives in
mixins next to it:

- :mod:`tests.fake_k8s.store`: the object store, resourceVersions, watch history, create/replace and delete;
- :mod:`tests.fake_k8s.kubelet`: test helpers that add nodes/events and drive Pod status, logs and shells;
- :mod:`tests.fake_k8s.statefulsets`: the StatefulSet controller and the ``scale`` subresource;
- :mod:`tests.fake_k8s.api`: the middleware (auth, faults, request log), path parsing and dispatch by verb;
- :mod:`tests.fake_k8s.watch`: list and watch;
- :mod:`tests.fake_k8s.patching`: server-side apply and merge patches;
- :mod:`tests.fake_k8s.pod_io`: the ``log`` subresource and ``exec`` over websocket;
- :mod:`tests.fake_k8s.selectors` (:func:`label_match`, :func:`field_match`) and :mod:`tests.fake_k8s.wire`
  (resource tables, timestamps, ``Status`` bodies).
"""

from __future__ import annotations

import asyncio
import socket
import threading
from typing import Any

from aiohttp import web

from tests.fake_k8s.api import HttpApi
from tests.fake_k8s.kubelet import KubeletHelpers
from tests.fake_k8s.patching import Patching
from tests.fake_k8s.pod_io import PodIO
from tests.fake_k8s.selectors import field_match, label_match
from tests.fake_k8s.statefulsets import StatefulSetController
from tests.fake_k8s.store import ObjectStore
from tests.fake_k8s.watch import ListWatch
from tests.fake_k8s.wire import APPS, CORE, TERMINAL, now_iso

__all__ = ["APPS", "CORE", "TERMINAL", "FakeKubernetes", "field_match", "label_match", "now_iso"]


class FakeKubernetes(ObjectStore, KubeletHelpers, StatefulSetController, HttpApi, ListWatch, Patching, PodIO):
    """The state and the HTTP server. Use :func:`start` / :meth:`stop`, or the pytest fixtures."""

    def __init__(self, token: str = "fake-token", namespaces: tuple[str, ...] = ("rlark-system",)) -> None:
        self.token = token
        self.lock = threading.RLock()
        self.objects: dict[tuple[str, str, str], dict] = {}  # (resource, namespace, name) -> object
        self.rv = 0
        self.history: list[tuple[int, str, str, dict]] = []  # (rv, resource, type, object)
        self.compacted_rv = 0
        self.logs: dict[tuple[str, str], dict[str, str]] = {}  # (ns, pod) -> {"current": str, "previous": str}
        self.shells: dict[tuple[str, str], tuple[str, ...]] = {}  # (ns, pod) -> available shells
        self.exec_sessions: list[dict] = []
        self.exec_protocols: tuple[str, ...] = ("v5.channel.k8s.io", "v4.channel.k8s.io")
        self.denied: set[tuple[str, str]] = set()  # (verb, resource[/sub]) refused by SelfSubjectAccessReview
        self.metrics_enabled = False
        self._metrics_selector: str | None = None
        self.pod_metrics: dict[tuple[str, str], dict[str, str]] = {}
        self.fault: str | None = None  # "500" | "timeout"
        self.fault_delay = 30.0
        self.fault_count: int | None = None  # None = until cleared
        self.requests: list[tuple[str, str]] = []
        self.request_count = 0
        self.auto_run = False  # new pods go straight to Running/ready
        self.bookmark_interval = 5.0  # seconds between BOOKMARK events of watches that allow them
        self.port = 0
        self.host = "127.0.0.1"
        self._loop: asyncio.AbstractEventLoop | None = None
        self._runner: web.AppRunner | None = None
        self._site: web.TCPSite | None = None
        self._thread: threading.Thread | None = None
        self._watchers: list[asyncio.Queue] = []
        for ns in namespaces:
            self.add_namespace(ns)

    # ------------------------------------------------------------ lifecycle
    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    def start(self, port: int = 0) -> FakeKubernetes:
        if not port:
            with socket.socket() as s:
                s.bind(("127.0.0.1", 0))
                port = s.getsockname()[1]
        self.port = port
        ready = threading.Event()

        def run() -> None:
            self._loop = asyncio.new_event_loop()
            asyncio.set_event_loop(self._loop)
            app = web.Application(middlewares=[self._middleware], client_max_size=64 * 2**20)
            app.router.add_route("*", "/{tail:.*}", self._dispatch)
            self._runner = web.AppRunner(app, shutdown_timeout=0.5, access_log=None)
            self._loop.run_until_complete(self._runner.setup())
            self._loop.run_until_complete(self._start_site())
            ready.set()
            self._loop.run_forever()

        self._thread = threading.Thread(target=run, name=f"fake-k8s-{port}", daemon=True)
        self._thread.start()
        ready.wait(10)
        return self

    async def _start_site(self) -> None:
        self._site = web.TCPSite(self._runner, self.host, self.port, reuse_address=True)
        await self._site.start()

    def _call(self, coro, timeout: float = 10) -> Any:
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result(timeout)

    def refuse_connections(self) -> None:
        """Close the listening socket: clients get ``connection refused`` until :meth:`accept_connections`."""

        async def stop_site() -> None:
            if self._site is not None:
                await self._site.stop()
                self._site = None
            server = self._runner.server if self._runner else None
            for conn in server.connections if server else []:
                conn.force_close()  # like a dead API server: kept-alive connections drop too

        self._call(stop_site())

    def accept_connections(self) -> None:
        if self._site is None:
            self._call(self._start_site())

    def stop(self) -> None:
        if self._loop is None:
            return

        async def shutdown() -> None:
            await self._runner.cleanup()

        try:
            self._call(shutdown())
        finally:
            self._loop.call_soon_threadsafe(self._loop.stop)
            if self._thread:
                self._thread.join(5)

    def kubeconfig(self, namespace: str = "rlark-system", token: str | None = None) -> dict:
        """A kubeconfig dict (token auth) pointing at this server."""
        return {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [{"name": "fake", "cluster": {"server": self.url}}],
            "users": [{"name": "fake-user", "user": {"token": token if token is not None else self.token}}],
            "contexts": [{"name": "fake", "context": {"cluster": "fake", "user": "fake-user", "namespace": namespace}}],
            "current-context": "fake",
        }

    # ------------------------------------------------------------ faults
    def set_fault(self, kind: str | None, count: int | None = None, delay: float = 30.0) -> None:
        """``"500"``: answer every request with HTTP 500; ``"timeout"``: hold each request ``delay`` seconds;
        ``None``: healthy. ``count`` limits the fault to the next N requests."""
        with self.lock:
            self.fault, self.fault_count, self.fault_delay = kind, count, delay

    def compact(self) -> None:
        """Forget the watch history: watches from an older resourceVersion get ``410 Gone``."""
        with self.lock:
            self.compacted_rv = self.rv
            self.history.clear()
