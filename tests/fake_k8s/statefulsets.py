"""The tiny StatefulSet controller of the fake Kubernetes API server (:class:`StatefulSetController`, a mixin of
:class:`tests.fake_k8s.server.FakeKubernetes`): it creates the missing Pods ``<name>-<ordinal>`` from the
template (straight to Running when ``auto_run`` is set), deletes Pods whose ordinal is at or above ``replicas``,
keeps ``status.replicas``/``readyReplicas``/``availableReplicas`` in step with the owned Pods, and serves the
``scale`` subresource (GET, PUT and PATCH of ``spec.replicas``)."""

from __future__ import annotations

import copy
import json

from aiohttp import web

from tests.fake_k8s.wire import status_response


class StatefulSetController:
    """Reconciles StatefulSets to their Pods by ordinal; called under the store's lock."""

    auto_run: bool

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
            self.put("pods", namespace, self._sts_pod(sts, template, selector, pod_name))
            if self.auto_run:
                n = ordinal + 1
                self.set_pod(namespace, pod_name, "Running", node=f"node-{n}", ip=f"10.244.0.{n}")
        for pod_name, pod in owned.items():
            ordinal = int(pod_name.rsplit("-", 1)[1])
            if ordinal >= replicas:
                self._store("pods", namespace, pod, "DELETED")
        self._sts_status(namespace, name)

    @staticmethod
    def _sts_pod(sts: dict, template: dict, selector: dict[str, str], pod_name: str) -> dict:
        """The Pending Pod ``pod_name`` the StatefulSet ``sts`` owns, from its template."""
        name = sts["metadata"]["name"]
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
        return pod

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

    async def _scale(self, request: web.Request, namespace: str, name: str) -> web.Response:
        sts = self.get("statefulsets", namespace, name)
        if sts is None:
            return status_response(404, "NotFound", f'statefulsets.apps "{name}" not found')
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
