"""The object store of the fake Kubernetes API server (:class:`ObjectStore`, a mixin of
:class:`tests.fake_k8s.server.FakeKubernetes`): objects keyed by ``(resource, namespace, name)``, the
resourceVersion counter and the bounded watch history every write appends to (waking the open watches), plain
reads (:meth:`ObjectStore.get`, :meth:`ObjectStore.list`), direct test setup (:meth:`ObjectStore.put`), the
create/replace path of the HTTP API that keeps uid, creation time and status, and delete with its cascades
(a StatefulSet's Pods unless orphaned, a namespace's contents, the owning StatefulSet of a deleted Pod)."""

from __future__ import annotations

import asyncio
import copy
import threading
import uuid

from tests.fake_k8s.selectors import label_match
from tests.fake_k8s.wire import APPS, CORE, now_iso


class ObjectStore:
    """Objects, resourceVersions and watch history, guarded by ``lock``; writes to StatefulSets and deletes of
    their Pods call the controller's ``_reconcile_sts`` (:mod:`tests.fake_k8s.statefulsets`)."""

    lock: threading.RLock
    objects: dict[tuple[str, str, str], dict]
    rv: int
    history: list[tuple[int, str, str, dict]]
    compacted_rv: int
    _loop: asyncio.AbstractEventLoop | None
    _watchers: list[asyncio.Queue]

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
