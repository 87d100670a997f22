"""Wire-level vocabulary shared by the modules of the fake Kubernetes API server: the resource tables of the
served API groups (``core/v1`` in :data:`CORE`, ``apps/v1`` in :data:`APPS`, each resource mapped to its kind and
whether it is namespaced), the terminal Pod phases, RFC 3339 timestamps, and the ``Status`` body every error
answer carries (:func:`status_response`)."""

from __future__ import annotations

from datetime import UTC, datetime

from aiohttp import web

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


def status_response(code: int, reason: str, message: str, details: dict | None = None) -> web.Response:
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
