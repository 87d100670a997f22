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
"""

from __future__ import annotations

import asyncio
import copy
import json
import re
import socket
import threading
import time
import uuid
from datetime import UTC, datetime
from typing import Any

import yaml
from aiohttp import WSMsgType, web

CORE = {
    "namespaces": ("Namespace", False),
    "nodes": ("Node", False),
    "pods": ("Pod", True),
    "services": ("Service", True),
    "configmaps": ("ConfigMap", True),
    "secrets": ("Secret", True),
    "persistentvolumeclaims": ("PersistentVolumeClaim", True),
    "events": ("Event", True),
}
APPS = {"statefulsets": ("StatefulSet", True)}
TERMINAL = ("Succeeded", "Failed")


def now_iso() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _merge(base: Any, patch: Any) -> Any:
    """JSON merge patch (RFC 7386); lists are replaced."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    result = dict(base) if isinstance(base, dict) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = _merge(result.get(key), value)
    return result


# ---------------------------------------------------------------- selectors
_SET_RE = re.compile(r"^\s*(!?)([A-Za-z0-9./_-]+)\s*(?:(notin|in)\s*\(([^)]*)\))?\s*$")


def _split_selector(text: str) -> list[str]:
    parts, depth, current = [], 0, ""
    for ch in text:
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
        if ch == "," and depth == 0:
            parts.append(current)
            current = ""
        else:
            current += ch
    if current.strip():
        parts.append(current)
    return parts


def label_match(selector: str | None, labels: dict[str, str]) -> bool:
    """Kubernetes label selector semantics: ``k=v``, ``k==v``, ``k!=v``, ``k in (a,b)``, ``k notin (..)``,
    ``k``, ``!k``; requirements ANDed."""
    if not selector:
        return True
    labels = labels or {}
    for req in _split_selector(selector):
        req = req.strip()
        if "!=" in req:
            key, value = (s.strip() for s in req.split("!=", 1))
            if labels.get(key) == value:
                return False
            continue
        if "=" in req:
            key, value = (s.strip() for s in req.replace("==", "=").split("=", 1))
            if labels.get(key) != value:
                return False
            continue
        m = _SET_RE.match(req)
        if not m:
            raise ValueError(f"unable to parse requirement: {req}")
        neg, key, op, values = m.groups()
        vals = {v.strip() for v in (values or "").split(",") if v.strip()}
        if op == "in" and labels.get(key) not in vals:
            return False
        if op == "notin" and key in labels and labels[key] in vals:
            return False
        if not op and bool(neg) == (key in labels):
            return False
    return True


def _path_get(obj: dict, dotted: str) -> str:
    cur: Any = obj
    for part in dotted.split("."):
        if not isinstance(cur, dict):
            return ""
        cur = cur.get(part)
    return "" if cur is None else str(cur)


def field_match(selector: str | None, obj: dict) -> bool:
    if not selector:
        return True
    for req in selector.split(","):
        req = req.strip()
        if not req:
            continue
        if "!=" in req:
            key, value = req.split("!=", 1)
            if _path_get(obj, key.strip()) == value.strip():
                return False
        else:
            key, value = req.replace("==", "=").split("=", 1)
            if _path_get(obj, key.strip()) != value.strip():
                return False
    return True


# ---------------------------------------------------------------- the fake
class FakeKubernetes:
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

    # ------------------------------------------------------------ state helpers
    def _meta(self, obj: dict, resource: str, namespace: str) -> dict:
        meta = obj.setdefault("metadata", {})
        meta.setdefault("uid", str(uuid.uuid4()))
        meta.setdefault("creationTimestamp", now_iso())
        if CORE.get(resource, APPS.get(resource, ("", True)))[1]:
            meta["namespace"] = namespace
        meta.setdefault("labels", meta.get("labels") or {})
        return obj

    def _store(self, resource: str, namespace: str, obj: dict, event: str) -> dict:
        with self.lock:
            self.rv += 1
            obj["metadata"]["resourceVersion"] = str(self.rv)
            kind, namespaced = CORE.get(resource) or APPS[resource]
            obj.setdefault("kind", kind)
            obj.setdefault("apiVersion", "apps/v1" if resource in APPS else "v1")
            key = (resource, namespace if namespaced else "", obj["metadata"]["name"])
            if event == "DELETED":
                self.objects.pop(key, None)
            else:
                self.objects[key] = obj
            self.history.append((self.rv, resource, event, copy.deepcopy(obj)))
            if len(self.history) > 5000:
                self.history = self.history[-4000:]
                self.compacted_rv = self.history[0][0] - 1
            for q in list(self._watchers):
                if self._loop is not None:
                    self._loop.call_soon_threadsafe(q.put_nowait, None)
        return obj

    def get(self, resource: str, namespace: str, name: str) -> dict | None:
        with self.lock:
            obj = self.objects.get((resource, namespace, name))
            return copy.deepcopy(obj) if obj else None

    def list(self, resource: str, namespace: str | None = None, label_selector: str | None = None) -> list[dict]:
        with self.lock:
            return [
                copy.deepcopy(o)
                for (r, ns, _), o in sorted(self.objects.items())
                if r == resource
                and (namespace is None or ns == namespace)
                and label_match(label_selector, o["metadata"].get("labels") or {})
            ]

    def put(self, resource: str, namespace: str, obj: dict) -> dict:
        """Create or replace an object directly (test setup)."""
        with self.lock:
            obj = self._meta(copy.deepcopy(obj), resource, namespace)
            existing = self.objects.get((resource, namespace, obj["metadata"]["name"]))
            return self._store(resource, namespace, obj, "MODIFIED" if existing else "ADDED")

    def add_namespace(self, name: str) -> dict:
        return self.put("namespaces", "", {"metadata": {"name": name}, "status": {"phase": "Active"}})

    def add_node(
        self,
        name: str,
        labels: dict[str, str] | None = None,
        capacity: dict[str, Any] | None = None,
        allocatable: dict[str, Any] | None = None,
        ready: bool = True,
        unschedulable: bool = False,
        annotations: dict[str, str] | None = None,
    ) -> dict:
        capacity = {k: str(v) for k, v in (capacity or {"cpu": "8", "memory": "32Gi"}).items()}
        node = {
            "metadata": {
                "name": name,
                "labels": {"kubernetes.io/hostname": name, **(labels or {})},
                "annotations": annotations or {},
            },
            "spec": {"unschedulable": True} if unschedulable else {},
            "status": {
                "capacity": capacity,
                "allocatable": {k: str(v) for k, v in (allocatable or capacity).items()},
                "conditions": [{"type": "Ready", "status": "True" if ready else "False"}],
                "addresses": [{"type": "InternalIP", "address": f"10.0.0.{len(self.list('nodes')) + 1}"}],
            },
        }
        return self.put("nodes", "", node)

    def set_node_ready(self, name: str, ready: bool) -> None:
        with self.lock:
            node = self.get("nodes", "", name)
            node["status"]["conditions"] = [{"type": "Ready", "status": "True" if ready else "False"}]
            self._store("nodes", "", node, "MODIFIED")

    def add_event(
        self, namespace: str, pod: str, reason: str, message: str, type_: str = "Normal", count: int = 1
    ) -> dict:
        with self.lock:
            name = f"{pod}.{uuid.uuid4().hex[:10]}"
            return self.put(
                "events",
                namespace,
                {
                    "metadata": {"name": name},
                    "involvedObject": {"kind": "Pod", "name": pod, "namespace": namespace},
                    "reason": reason,
                    "message": message,
                    "type": type_,
                    "count": count,
                    "firstTimestamp": now_iso(),
                    "lastTimestamp": now_iso(),
                },
            )

    def set_pod(
        self,
        namespace: str,
        name: str,
        phase: str | None = None,
        node: str | None = None,
        ip: str | None = None,
        ready: bool | None = None,
        waiting: str | None = None,
        terminated: tuple[str, int] | None = None,
        last_terminated: tuple[str, int] | None = None,
        restarts: int | None = None,
        message: str = "",
    ) -> dict:
        """Drive a Pod's status like a kubelet would (phase, node, IP, ``main`` container state)."""
        with self.lock:
            pod = self.get("pods", namespace, name)
            if pod is None:
                raise KeyError(f"pod {namespace}/{name} not found")
            status = pod.setdefault("status", {})
            if phase:
                status["phase"] = phase
            if node is not None:
                pod["spec"]["nodeName"] = node
            if ip is not None:
                status["podIP"] = ip
            cs = (status.get("containerStatuses") or [{"name": "main", "restartCount": 0, "ready": False}])[0]
            cs.setdefault("image", self._main_image(pod))
            if phase == "Running" and not waiting and not terminated:
                cs["state"] = {"running": {"startedAt": now_iso()}}
                status.setdefault("startTime", now_iso())
                if ready is None:
                    ready = True
            if waiting:
                cs["state"] = {"waiting": {"reason": waiting, "message": message}}
            if terminated:
                reason, code = terminated
                cs["state"] = {
                    "terminated": {
                        "reason": reason,
                        "exitCode": code,
                        "startedAt": status.get("startTime") or now_iso(),
                        "finishedAt": now_iso(),
                    }
                }
            if last_terminated:
                reason, code = last_terminated
                cs["lastState"] = {"terminated": {"reason": reason, "exitCode": code, "finishedAt": now_iso()}}
            if restarts is not None:
                cs["restartCount"] = restarts
            if ready is not None:
                cs["ready"] = ready
            status["containerStatuses"] = [cs]
            status["conditions"] = [{"type": "Ready", "status": "True" if cs.get("ready") else "False"}]
            if message and not waiting:
                status["message"] = message
            self._store("pods", namespace, pod, "MODIFIED")
            for ref in pod["metadata"].get("ownerReferences", []):
                if ref.get("kind") == "StatefulSet":
                    self._sts_status(namespace, ref["name"])
            return pod

    def set_log(self, namespace: str, pod: str, text: str, previous: str | None = None) -> None:
        with self.lock:
            entry = self.logs.setdefault((namespace, pod), {})
            entry["current"] = text
            if previous is not None:
                entry["previous"] = previous

    def set_shells(self, namespace: str, pod: str, shells: tuple[str, ...]) -> None:
        self.shells[(namespace, pod)] = tuple(shells)

    @staticmethod
    def _main_image(pod: dict) -> str:
        for c in pod.get("spec", {}).get("containers", []):
            if c.get("name") == "main":
                return c.get("image", "")
        return ""

    # ------------------------------------------------------------ statefulset controller
    def _reconcile_sts(self, namespace: str, sts: dict) -> None:
        name = sts["metadata"]["name"]
        replicas = sts.get("spec", {}).get("replicas", 1)
        template = sts.get("spec", {}).get("template", {})
        selector = (sts.get("spec", {}).get("selector") or {}).get("matchLabels") or {}
        owned = {
            p["metadata"]["name"]: p
            for p in self.list("pods", namespace)
            if any(ref.get("uid") == sts["metadata"]["uid"] for ref in p["metadata"].get("ownerReferences", []))
        }
        for ordinal in range(replicas):
            pod_name = f"{name}-{ordinal}"
            if pod_name in owned:
                continue
            labels = {**(template.get("metadata", {}).get("labels") or {}), **selector}
            labels["statefulset.kubernetes.io/pod-name"] = pod_name
            pod = {
                "metadata": {
                    "name": pod_name,
                    "labels": labels,
                    "annotations": dict(template.get("metadata", {}).get("annotations") or {}),
                    "ownerReferences": [
                        {"apiVersion": "apps/v1", "kind": "StatefulSet", "name": name, "uid": sts["metadata"]["uid"]}
                    ],
                },
                "spec": copy.deepcopy(template.get("spec") or {}),
                "status": {"phase": "Pending", "conditions": [{"type": "PodScheduled", "status": "False"}]},
            }
            pod["spec"]["hostname"] = pod_name
            self.put("pods", namespace, pod)
            if self.auto_run:
                n = ordinal + 1
                self.set_pod(namespace, pod_name, "Running", node=f"node-{n}", ip=f"10.244.0.{n}")
        for pod_name, pod in owned.items():
            ordinal = int(pod_name.rsplit("-", 1)[1])
            if ordinal >= replicas:
                self._store("pods", namespace, pod, "DELETED")
        self._sts_status(namespace, name)

    def _sts_status(self, namespace: str, name: str) -> None:
        sts = self.get("statefulsets", namespace, name)
        if not sts:
            return
        pods = [
            p
            for p in self.list("pods", namespace)
            if any(ref.get("uid") == sts["metadata"]["uid"] for ref in p["metadata"].get("ownerReferences", []))
        ]
        ready = sum(
            1
            for p in pods
            if p.get("status", {}).get("phase") == "Running"
            and all(c.get("ready") for c in p["status"].get("containerStatuses") or [{}])
        )
        status = {"replicas": len(pods), "readyReplicas": ready, "availableReplicas": ready}
        if sts.get("status") != status:
            sts["status"] = status
            self._store("statefulsets", namespace, sts, "MODIFIED")

    def _delete(self, resource: str, namespace: str, name: str, propagation: str | None) -> dict | None:
        with self.lock:
            obj = self.get(resource, namespace, name)
            if obj is None:
                return None
            self._store(resource, namespace, obj, "DELETED")
            if resource == "statefulsets" and propagation != "Orphan":
                for pod in self.list("pods", namespace):
                    if any(r.get("uid") == obj["metadata"]["uid"] for r in pod["metadata"].get("ownerReferences", [])):
                        self._store("pods", namespace, pod, "DELETED")
            if resource == "pods":
                owner = next(
                    (r for r in obj["metadata"].get("ownerReferences", []) if r.get("kind") == "StatefulSet"), None
                )
                sts = self.get("statefulsets", namespace, owner["name"]) if owner else None
                if sts is not None:
                    self._reconcile_sts(namespace, sts)
            if resource == "namespaces":
                for (r, ns, n), _o in list(self.objects.items()):
                    if ns == name:
                        self._delete(r, ns, n, None)
            return obj

    # ------------------------------------------------------------ HTTP
    @web.middleware
    async def _middleware(self, request: web.Request, handler):
        with self.lock:
            self.request_count += 1
            self.requests.append((request.method, request.path_qs))
            if len(self.requests) > 2000:
                del self.requests[:1000]
            fault = self.fault
            if fault and self.fault_count is not None:
                self.fault_count -= 1
                if self.fault_count <= 0:
                    self.fault, self.fault_count = None, None
        if fault == "timeout":
            await asyncio.sleep(self.fault_delay)
        elif fault == "500":
            return self._status(500, "InternalError", "etcdserver: request timed out (injected)")
        if request.path in ("/version", "/healthz", "/livez", "/readyz"):
            return await handler(request)
        auth = request.headers.get("Authorization", "")
        if self.token and auth != f"Bearer {self.token}":
            return self._status(401, "Unauthorized", "Unauthorized")
        return await handler(request)

    @staticmethod
    def _status(code: int, reason: str, message: str, details: dict | None = None) -> web.Response:
        body = {
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": message,
            "reason": reason,
            "code": code,
        }
        if details:
            body["details"] = details
        return web.json_response(body, status=code)

    def _parse(self, path: str) -> tuple[str, str, str, str, str] | None:
        """-> (group, resource, namespace, name, subresource)."""
        parts = [p for p in path.split("/") if p]
        if parts[:2] == ["api", "v1"]:
            group, rest = "", parts[2:]
        elif len(parts) >= 3 and parts[0] == "apis":
            group, rest = f"{parts[1]}/{parts[2]}", parts[3:]
        else:
            return None
        namespace = ""
        if len(rest) >= 3 and rest[0] == "namespaces":
            namespace, rest = rest[1], rest[2:]
        elif len(rest) in (1, 2) and rest[0] == "namespaces":
            return group, "namespaces", "", rest[1] if len(rest) == 2 else "", ""
        if not rest:
            return None
        resource = rest[0]
        name = rest[1] if len(rest) > 1 else ""
        sub = rest[2] if len(rest) > 2 else ""
        return group, resource, namespace, name, sub

    async def _dispatch(self, request: web.Request) -> web.StreamResponse:
        if request.path == "/version":
            return web.json_response({"major": "1", "minor": "31", "gitVersion": "v1.31.0-fake"})
        parsed = self._parse(request.path)
        if parsed is None:
            return self._status(404, "NotFound", "the server could not find the requested resource")
        group, resource, namespace, name, sub = parsed
        if group == "authorization.k8s.io/v1" and resource == "selfsubjectaccessreviews":
            return await self._ssar(request)
        if group == "metrics.k8s.io/v1beta1":
            self._metrics_selector = request.query.get("labelSelector")
            return self._metrics(namespace, resource)
        table = CORE if group == "" else APPS if group == "apps/v1" else {}
        if resource not in table:
            return self._status(404, "NotFound", "the server could not find the requested resource")
        kind, namespaced = table[resource]
        if namespaced and namespace and resource != "namespaces" and not self.get("namespaces", "", namespace):
            if request.method in ("POST", "PATCH", "PUT"):
                return self._status(404, "NotFound", f'namespaces "{namespace}" not found')
        if sub == "log":
            return await self._log(request, namespace, name)
        if sub == "exec":
            return await self._exec(request, namespace, name)
        if sub == "scale":
            return await self._scale(request, namespace, name)
        if sub == "status":
            sub = ""
        method = request.method
        if method == "GET" and not name:
            if request.query.get("watch") in ("true", "1"):
                return await self._watch(request, resource, namespace)
            return self._list(request, resource, namespace, kind)
        if method == "GET":
            obj = self.get(resource, namespace if namespaced else "", name)
            if obj is None:
                return self._status(404, "NotFound", f'{resource} "{name}" not found', {"name": name, "kind": resource})
            return web.json_response(obj)
        if method == "POST":
            body = await request.json()
            if self.get(resource, namespace, body["metadata"]["name"]):
                return self._status(409, "AlreadyExists", f'{resource} "{body["metadata"]["name"]}" already exists')
            obj = self._write(resource, namespace if namespaced else "", body)
            return web.json_response(obj, status=201)
        if method == "PUT":
            body = await request.json()
            obj = self._write(resource, namespace if namespaced else "", body)
            return web.json_response(obj)
        if method == "PATCH":
            return await self._patch(request, resource, namespace if namespaced else "", name)
        if method == "DELETE":
            propagation = request.query.get("propagationPolicy")
            try:
                body = await request.json() if request.can_read_body else {}
            except Exception:
                body = {}
            propagation = propagation or (body or {}).get("propagationPolicy")
            if not name:
                items = self.list(resource, namespace or None, request.query.get("labelSelector"))
                for item in items:
                    self._delete(resource, namespace, item["metadata"]["name"], propagation)
                return web.json_response({"kind": f"{kind}List", "apiVersion": "v1", "items": items})
            obj = self._delete(resource, namespace if namespaced else "", name, propagation)
            if obj is None:
                return self._status(404, "NotFound", f'{resource} "{name}" not found', {"name": name, "kind": resource})
            return web.json_response(
                {"kind": "Status", "apiVersion": "v1", "status": "Success", "details": {"name": name}}
            )
        return self._status(405, "MethodNotAllowed", "method not allowed")

    def _write(self, resource: str, namespace: str, body: dict) -> dict:
        with self.lock:
            existing = self.get(resource, namespace, body["metadata"]["name"])
            obj = self._meta(copy.deepcopy(body), resource, namespace)
            if existing:
                obj["metadata"]["uid"] = existing["metadata"]["uid"]
                obj["metadata"]["creationTimestamp"] = existing["metadata"]["creationTimestamp"]
                if "status" in existing and resource != "pods":
                    obj["status"] = existing["status"]
            if resource == "persistentvolumeclaims":
                obj.setdefault("status", {"phase": "Bound"})
            obj = self._store(resource, namespace, obj, "MODIFIED" if existing else "ADDED")
            if resource == "statefulsets":
                self._reconcile_sts(namespace, obj)
                obj = self.get(resource, namespace, obj["metadata"]["name"])
            return obj

    def _list(self, request: web.Request, resource: str, namespace: str, kind: str) -> web.Response:
        try:
            items = self.list(resource, namespace or None, request.query.get("labelSelector"))
        except ValueError as exc:
            return self._status(400, "BadRequest", str(exc))
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
            await resp.write((json.dumps({"type": "ERROR", "object": status}) + "\n").encode())
            return resp
        queue: asyncio.Queue = asyncio.Queue()
        self._watchers.append(queue)
        sent = since
        if not since:  # no resourceVersion: synthetic ADDED events for the current state
            for obj in self.list(resource, namespace or None, selector):
                if field_match(fs, obj):
                    await resp.write((json.dumps({"type": "ADDED", "object": obj}) + "\n").encode())
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
                    await resp.write((json.dumps({"type": "BOOKMARK", "object": mark}) + "\n").encode())
                with self.lock:
                    events = [e for e in self.history if e[0] > sent and e[1] == resource]
                for rv, _res, etype, obj in events:
                    sent = rv
                    ns_ok = not namespace or obj["metadata"].get("namespace") == namespace
                    if ns_ok and label_match(selector, obj["metadata"].get("labels") or {}) and field_match(fs, obj):
                        await resp.write((json.dumps({"type": etype, "object": obj}) + "\n").encode())
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

    async def _patch(self, request: web.Request, resource: str, namespace: str, name: str) -> web.Response:
        ctype = request.content_type
        raw = await request.text()
        with self.lock:
            existing = self.get(resource, namespace, name)
            if ctype == "application/apply-patch+yaml":
                if not request.query.get("fieldManager"):
                    return self._status(400, "BadRequest", "fieldManager is required for apply requests")
                applied = yaml.safe_load(raw)
                manager = request.query["fieldManager"]
                if existing is None:
                    applied.setdefault("metadata", {})["managedFields"] = [{"manager": manager, "operation": "Apply"}]
                    return web.json_response(self._write(resource, namespace, applied), status=201)
                merged = copy.deepcopy(existing)
                for key, value in applied.items():
                    if key == "metadata":
                        for mk in ("labels", "annotations", "ownerReferences"):
                            if mk in value:
                                merged["metadata"][mk] = value[mk]
                    elif key != "status":
                        merged[key] = value
                managers = merged["metadata"].setdefault("managedFields", [])
                if not any(m.get("manager") == manager for m in managers):
                    managers.append({"manager": manager, "operation": "Apply"})
                comparable = ("spec", "data", "stringData", "metadata", "type")
                if all(merged.get(k) == existing.get(k) for k in comparable):
                    return web.json_response(existing)  # no-op apply keeps the resourceVersion
                return web.json_response(self._write(resource, namespace, merged))
            if existing is None:
                return self._status(404, "NotFound", f'{resource} "{name}" not found', {"name": name, "kind": resource})
            patch = json.loads(raw)
            if ctype == "application/json-patch+json":
                return self._status(415, "UnsupportedMediaType", "json-patch not supported by the fake")
            merged = _merge(existing, patch)
            return web.json_response(self._write(resource, namespace, merged))

    async def _scale(self, request: web.Request, namespace: str, name: str) -> web.Response:
        sts = self.get("statefulsets", namespace, name)
        if sts is None:
            return self._status(404, "NotFound", f'statefulsets.apps "{name}" not found')
        if request.method in ("PATCH", "PUT"):
            body = json.loads(await request.text())
            replicas = body.get("spec", {}).get("replicas")
            if replicas is not None:
                sts["spec"]["replicas"] = int(replicas)
                sts = self._write("statefulsets", namespace, sts)
        return web.json_response(
            {
                "kind": "Scale",
                "apiVersion": "autoscaling/v1",
                "metadata": {"name": name, "namespace": namespace},
                "spec": {"replicas": sts["spec"].get("replicas", 1)},
                "status": {"replicas": sts.get("status", {}).get("replicas", 0)},
            }
        )

    async def _ssar(self, request: web.Request) -> web.Response:
        body = await request.json()
        attrs = body.get("spec", {}).get("resourceAttributes", {})
        res = attrs.get("resource", "") + (f"/{attrs['subresource']}" if attrs.get("subresource") else "")
        allowed = (attrs.get("verb", ""), res) not in self.denied
        body["status"] = {"allowed": allowed}
        body.setdefault("metadata", {})
        return web.json_response(body, status=201)

    def _metrics(self, namespace: str, resource: str) -> web.Response:
        if not self.metrics_enabled or resource != "pods":
            return self._status(404, "NotFound", "the server could not find the requested resource")
        items = [
            {"metadata": {"name": pod, "namespace": ns}, "containers": [{"name": "main", "usage": usage}]}
            for (ns, pod), usage in self.pod_metrics.items()
            if ns == namespace
            and label_match(
                self._metrics_selector, ((self.get("pods", ns, pod) or {}).get("metadata") or {}).get("labels") or {}
            )
        ]
        return web.json_response({"kind": "PodMetricsList", "apiVersion": "metrics.k8s.io/v1beta1", "items": items})

    async def _log(self, request: web.Request, namespace: str, name: str) -> web.StreamResponse:
        pod = self.get("pods", namespace, name)
        if pod is None:
            return self._status(404, "NotFound", f'pods "{name}" not found')
        container = request.query.get("container", "main")
        if container != "main":
            return self._status(400, "BadRequest", f"container {container} is not valid for pod {name}")
        entry = self.logs.get((namespace, name), {})
        if request.query.get("previous") == "true":
            if "previous" not in entry:
                return self._status(
                    400, "BadRequest", f'previous terminated container "main" in pod "{name}" not found'
                )
            text = entry["previous"]
        else:
            text = entry.get("current", "")
        tail = request.query.get("tailLines")
        if tail is not None:
            lines = text.splitlines(keepends=True)
            text = "".join(lines[-int(tail) :]) if int(tail) > 0 else ""
        resp = web.StreamResponse(headers={"Content-Type": "text/plain"})
        await resp.prepare(request)
        data = text.encode()
        for i in range(0, len(data), 65536):
            await resp.write(data[i : i + 65536])
        return resp

    async def _exec(self, request: web.Request, namespace: str, name: str) -> web.StreamResponse:
        pod = self.get("pods", namespace, name)
        command = request.query.getall("command", [])
        if pod is None:
            return self._status(404, "NotFound", f'pods "{name}" not found')
        if pod.get("status", {}).get("phase") != "Running":
            return self._status(400, "BadRequest", f'container "main" in pod "{name}" is waiting to start')
        if ("create", "pods/exec") in self.denied:
            return self._status(403, "Forbidden", "pods/exec is forbidden")
        ws = web.WebSocketResponse(protocols=self.exec_protocols)
        await ws.prepare(request)
        session = {"pod": name, "command": command, "protocol": ws.ws_protocol, "resizes": [], "input": b""}
        self.exec_sessions.append(session)

        async def send(channel: int, data: bytes) -> None:
            await ws.send_bytes(bytes([channel]) + data)

        async def finish(code: int) -> None:
            if code == 0:
                status = {"metadata": {}, "status": "Success"}
            else:
                status = {
                    "metadata": {},
                    "status": "Failure",
                    "message": f"command terminated with non-zero exit code: exit status {code}",
                    "reason": "NonZeroExitCode",
                    "details": {"causes": [{"reason": "ExitCode", "message": str(code)}]},
                }
            await send(3, json.dumps(status).encode())
            await ws.close()

        shells = self.shells.get((namespace, name), ("bash", "sh"))
        program = command[0] if command else ""
        if program not in shells and program not in ("echo", "env", "true", "false"):
            msg = (
                "OCI runtime exec failed: exec failed: unable to start container process: "
                f'exec: "{program}": executable file not found in $PATH: unknown'
            )
            await send(
                3,
                json.dumps(
                    {
                        "metadata": {},
                        "status": "Failure",
                        "message": msg,
                        "reason": "InternalError",
                        "details": {"causes": [{"message": msg}]},
                        "code": 500,
                    }
                ).encode(),
            )
            await ws.close()
            return ws
        if program == "echo":
            await send(1, (" ".join(command[1:]) + "\n").encode())
            await finish(0)
            return ws
        if program in ("true", "false"):
            await finish(0 if program == "true" else 1)
            return ws
        env = {
            c["name"]: c.get("value", "")
            for c in next(
                (c.get("env") or [] for c in pod["spec"].get("containers", []) if c.get("name") == "main"), []
            )
        }
        env["POD_NAME"] = name
        await send(1, f"{program}$ ".encode())
        buf = b""
        async for msg in ws:
            if msg.type not in (WSMsgType.BINARY, WSMsgType.TEXT):
                break
            data = msg.data if isinstance(msg.data, bytes) else msg.data.encode()
            channel, payload = data[0], data[1:]
            if channel == 4:
                session["resizes"].append(json.loads(payload))
                continue
            if channel != 0:
                continue
            session["input"] += payload
            buf += payload
            while b"\n" in buf or b"\r" in buf:
                line, buf = re.split(rb"[\r\n]", buf, maxsplit=1)
                text = line.decode(errors="replace").strip()
                await send(1, line + b"\r\n")
                if text.startswith("exit"):
                    parts = text.split()
                    await finish(int(parts[1]) if len(parts) > 1 else 0)
                    return ws
                if text.startswith("echo "):
                    out = " ".join(env.get(w[1:], "") if w.startswith("$") else w for w in text[5:].split())
                    await send(1, out.encode() + b"\r\n")
                elif text:
                    await send(2, f"{program}: {text.split()[0]}: command not found\r\n".encode())
                await send(1, f"{program}$ ".encode())
        return ws
