"""PATCH in the fake Kubernetes API server (:class:`Patching`, a mixin of
:class:`tests.fake_k8s.server.FakeKubernetes`): server-side apply (``application/apply-patch+yaml``, which needs a
``fieldManager``, records it in ``managedFields`` and keeps the resourceVersion when nothing changes), JSON merge
patch (RFC 7386, :func:`merge_patch`) for both merge and strategic-merge content types, and ``415`` for JSON
patch, which the fake does not implement."""

from __future__ import annotations

import copy
import json
import threading
from typing import Any

import yaml
from aiohttp import web

from tests.fake_k8s.wire import status_response

APPLY_COMPARED = ("spec", "data", "stringData", "metadata", "type")


def merge_patch(base: Any, patch: Any) -> Any:
    """JSON merge patch (RFC 7386); lists are replaced."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    result = dict(base) if isinstance(base, dict) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = merge_patch(result.get(key), value)
    return result


def apply_onto(existing: dict, applied: dict, manager: str) -> dict:
    """``existing`` with the applied configuration of ``manager`` laid over it: top-level fields but ``status``
    replaced, of ``metadata`` only labels, annotations and ownerReferences; ``manager`` listed in managedFields."""
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
    return merged


class Patching:
    """The PATCH verb on any stored resource."""

    lock: threading.RLock

    async def _patch(self, request: web.Request, resource: str, namespace: str, name: str) -> web.Response:
        ctype = request.content_type
        raw = await request.text()
        with self.lock:
            existing = self.get(resource, namespace, name)
            if ctype == "application/apply-patch+yaml":
                return self._apply(request, resource, namespace, existing, raw)
            if existing is None:
                return status_response(
                    404, "NotFound", f'{resource} "{name}" not found', {"name": name, "kind": resource}
                )
            patch = json.loads(raw)
            if ctype == "application/json-patch+json":
                return status_response(415, "UnsupportedMediaType", "json-patch not supported by the fake")
            merged = merge_patch(existing, patch)
            return web.json_response(self._write(resource, namespace, merged))

    def _apply(
        self, request: web.Request, resource: str, namespace: str, existing: dict | None, raw: str
    ) -> web.Response:
        """Server-side apply of the YAML ``raw``: create when absent, else lay it over ``existing``."""
        if not request.query.get("fieldManager"):
            return status_response(400, "BadRequest", "fieldManager is required for apply requests")
        applied = yaml.safe_load(raw)
        manager = request.query["fieldManager"]
        if existing is None:
            applied.setdefault("metadata", {})["managedFields"] = [{"manager": manager, "operation": "Apply"}]
            return web.json_response(self._write(resource, namespace, applied), status=201)
        merged = apply_onto(existing, applied, manager)
        if all(merged.get(k) == existing.get(k) for k in APPLY_COMPARED):
            return web.json_response(existing)  # no-op apply keeps the resourceVersion
        return web.json_response(self._write(resource, namespace, merged))
