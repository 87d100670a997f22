"""Test helpers of the fake Kubernetes API server that play the parts a real cluster's nodes and kubelets play
(:class:`KubeletHelpers`, a mixin of :class:`tests.fake_k8s.server.FakeKubernetes`): add namespaces, nodes and
events, flip a node's readiness, drive a Pod's phase, node, IP and ``main`` container state (updating its
StatefulSet's status), and set the log text and the shells an exec into a Pod finds."""

from __future__ import annotations

import threading
import uuid
from typing import Any

from tests.fake_k8s.wire import now_iso


class KubeletHelpers:
    """Thread-safe plain methods that change cluster state the way kubelets and node controllers would."""

    lock: threading.RLock
    logs: dict[tuple[str, str], dict[str, str]]
    shells: dict[tuple[str, str], tuple[str, ...]]

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
