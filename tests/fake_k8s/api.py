"""HTTP routing of the fake Kubernetes API server (:class:`HttpApi`, a mixin of
:class:`tests.fake_k8s.server.FakeKubernetes`): the middleware that counts and records requests, injects faults
(HTTP 500s, slow answers) and checks the bearer token; the parsing of ``/api/v1`` and ``/apis/<group>/<version>``
paths; the dispatch to the subresources (log, exec, scale, status), SelfSubjectAccessReviews, pod metrics and the
verbs GET (get, list, watch), POST, PUT, PATCH and DELETE (one object or a collection by labelSelector)."""

from __future__ import annotations

import asyncio
import threading

from aiohttp import web

from tests.fake_k8s.selectors import label_match
from tests.fake_k8s.wire import APPS, CORE, status_response


def _not_found(resource: str, name: str) -> web.Response:
    return status_response(404, "NotFound", f'{resource} "{name}" not found', {"name": name, "kind": resource})


class HttpApi:
    """The aiohttp middleware and the single catch-all handler :meth:`_dispatch`."""

    lock: threading.RLock
    token: str
    fault: str | None
    fault_delay: float
    fault_count: int | None
    requests: list[tuple[str, str]]
    request_count: int
    denied: set[tuple[str, str]]
    metrics_enabled: bool
    _metrics_selector: str | None
    pod_metrics: dict[tuple[str, str], dict[str, str]]

    _status = staticmethod(status_response)

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
            return status_response(500, "InternalError", "etcdserver: request timed out (injected)")
        if request.path in ("/version", "/healthz", "/livez", "/readyz"):
            return await handler(request)
        auth = request.headers.get("Authorization", "")
        if self.token and auth != f"Bearer {self.token}":
            return status_response(401, "Unauthorized", "Unauthorized")
        return await handler(request)

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
            return status_response(404, "NotFound", "the server could not find the requested resource")
        group, resource, namespace, name, sub = parsed
        if group == "authorization.k8s.io/v1" and resource == "selfsubjectaccessreviews":
            return await self._ssar(request)
        if group == "metrics.k8s.io/v1beta1":
            self._metrics_selector = request.query.get("labelSelector")
            return self._metrics(namespace, resource)
        table = CORE if group == "" else APPS if group == "apps/v1" else {}
        if resource not in table:
            return status_response(404, "NotFound", "the server could not find the requested resource")
        kind, namespaced = table[resource]
        if namespaced and namespace and resource != "namespaces" and not self.get("namespaces", "", namespace):
            if request.method in ("POST", "PATCH", "PUT"):
                return status_response(404, "NotFound", f'namespaces "{namespace}" not found')
        if sub == "log":
            return await self._log(request, namespace, name)
        if sub == "exec":
            return await self._exec(request, namespace, name)
        if sub == "scale":
            return await self._scale(request, namespace, name)
        return await self._verb(request, resource, namespace, name, kind, namespaced)

    async def _verb(
        self, request: web.Request, resource: str, namespace: str, name: str, kind: str, namespaced: bool
    ) -> web.StreamResponse:
        """The resource (or its ``status``) answered by HTTP method."""
        method = request.method
        if method == "GET" and not name:
            if request.query.get("watch") in ("true", "1"):
                return await self._watch(request, resource, namespace)
            return self._list(request, resource, namespace, kind)
        if method == "GET":
            obj = self.get(resource, namespace if namespaced else "", name)
            if obj is None:
                return _not_found(resource, name)
            return web.json_response(obj)
        if method == "POST":
            body = await request.json()
            if self.get(resource, namespace, body["metadata"]["name"]):
                return status_response(409, "AlreadyExists", f'{resource} "{body["metadata"]["name"]}" already exists')
            obj = self._write(resource, namespace if namespaced else "", body)
            return web.json_response(obj, status=201)
        if method == "PUT":
            body = await request.json()
            obj = self._write(resource, namespace if namespaced else "", body)
            return web.json_response(obj)
        if method == "PATCH":
            return await self._patch(request, resource, namespace if namespaced else "", name)
        if method == "DELETE":
            return await self._delete_request(request, resource, namespace, name, kind, namespaced)
        return status_response(405, "MethodNotAllowed", "method not allowed")

    async def _delete_request(
        self, request: web.Request, resource: str, namespace: str, name: str, kind: str, namespaced: bool
    ) -> web.Response:
        """DELETE of one object, or of the collection matching labelSelector when ``name`` is empty."""
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
            return _not_found(resource, name)
        return web.json_response({"kind": "Status", "apiVersion": "v1", "status": "Success", "details": {"name": name}})

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
            return status_response(404, "NotFound", "the server could not find the requested resource")
        items = [
            {"metadata": {"name": pod, "namespace": ns}, "containers": [{"name": "main", "usage": usage}]}
            for (ns, pod), usage in self.pod_metrics.items()
            if ns == namespace
            and label_match(
                self._metrics_selector, ((self.get("pods", ns, pod) or {}).get("metadata") or {}).get("labels") or {}
            )
        ]
        return web.json_response({"kind": "PodMetricsList", "apiVersion": "metrics.k8s.io/v1beta1", "items": items})
