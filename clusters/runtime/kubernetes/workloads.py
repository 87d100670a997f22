"""A Task's objects in the cluster: applied, scaled, restarted and deleted by the Kubernetes runtime.

Objects are written with server-side apply (field manager ``rlark-console``, ``force=True``), so re-applying
an unchanged manifest is a no-op and applying a changed one updates exactly our fields. Deleting something
already gone is not an error.
"""

from __future__ import annotations

import json
import logging
from typing import Any

from kubernetes import client as k8s
from kubernetes.client.exceptions import ApiException

from clusters import tracking_secret
from clusters.host_paths import HostPathRefused, check_cluster_host_paths
from clusters.runtime.base import RuntimeFailure, TaskManifest
from clusters.runtime.kubernetes.api import KubeApi, finish

logger = logging.getLogger("rlark.k8s")

FIELD_MANAGER = "rlark-console"
APPLY = "application/apply-patch+yaml"


# Where server-side apply writes each kind this runtime writes (``{namespace}``, ``{name}``: the object's).
APPLY_PATHS = {
    "StatefulSet": "/apis/apps/v1/namespaces/{namespace}/statefulsets/{name}",
    "Service": "/api/v1/namespaces/{namespace}/services/{name}",
    "ConfigMap": "/api/v1/namespaces/{namespace}/configmaps/{name}",
    "Secret": "/api/v1/namespaces/{namespace}/secrets/{name}",
    "PersistentVolumeClaim": "/api/v1/namespaces/{namespace}/persistentvolumeclaims/{name}",
}


def apply(kube: KubeApi, obj: dict, field_manager: str = FIELD_MANAGER) -> None:
    """Server-side apply of ``obj`` (StatefulSet, Service, ConfigMap, Secret or PersistentVolumeClaim; in its own
    namespace, else the cluster's). Raises RuntimeFailure(``invalid``) for another kind, RuntimeFailure for what
    the API server refuses (``clusters.runtime.kubernetes.client.translate``).

    The body is sent as UTF-8 JSON (JSON is YAML) by :func:`_send_apply`: the client's own ``json.dumps`` escapes a
    character outside the BMP (an emoji in a run script) as a surrogate pair, which the API server's YAML decoder
    refuses ("found invalid Unicode character escape code")."""
    kind = obj.get("kind")
    path = APPLY_PATHS.get(str(kind))
    if path is None:
        raise RuntimeFailure(f"unsupported object kind {kind!r}", reason="invalid")
    name = obj["metadata"]["name"]
    ns = obj["metadata"].get("namespace") or kube.namespace
    body = json.dumps(obj, ensure_ascii=False, separators=(",", ":")).encode()
    kube.call(_send_apply, kube.api, path, name, ns, body, field_manager, what=f"{kind} {name}")


def _send_apply(
    api: k8s.ApiClient, path: str, name: str, ns: str, body: bytes, field_manager: str, _request_timeout: Any
) -> None:
    """One ``PATCH`` (apply-patch+yaml, ``force``) of ``body`` at ``path``; the response is read whole (its
    connection goes back to the pool). Raises ApiException for a status of 300 or more."""
    method, url, headers, body, _post = api.param_serialize(
        method="PATCH",
        resource_path=path,
        path_params={"namespace": ns, "name": name},
        query_params=[("fieldManager", field_manager), ("force", "true")],
        header_params={"Content-Type": APPLY, "Accept": "application/json"},
        body=body,
        auth_settings=["BearerToken"],
    )
    resp = api.call_api(method, url, header_params=headers, body=body, _request_timeout=_request_timeout)
    resp.read()
    if resp.status >= 300:
        raise ApiException(http_resp=resp)


def apply_secret_data(kube: KubeApi, namespace: str, name: str, data: dict[str, str], field_manager: str) -> None:
    """Server-side apply of ``data`` (base64 values) into Secret ``name`` under ``field_manager`` (the
    network-domain members; another manager than the Task's, so re-applying the Task keeps these keys)."""
    obj = {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": name, "namespace": namespace}, "data": data}
    apply(kube, obj, field_manager)


def apply_task(kube: KubeApi, manifest: TaskManifest) -> None:
    """The Task's extra objects (a tracking Secret no longer among them is deleted), then its workload. Raises
    RuntimeFailure(reason="invalid") for a hostPath the cluster does not allow, before anything is written."""
    try:
        check_cluster_host_paths(kube.cluster, manifest.workload)
    except HostPathRefused as exc:
        raise RuntimeFailure(f"hostPath refused: {exc}", "invalid") from None
    for obj in manifest.extra_objects:
        apply(kube, obj)
    if not any(tracking_secret.values_of(obj) is not None for obj in manifest.extra_objects):
        # an edit that dropped the job's tracking credentials takes their Secret away as well
        name = tracking_secret.secret_name(manifest.task)
        kube.ignore_404(kube.core.delete_namespaced_secret, name, manifest.namespace, what="secret")
    apply(kube, manifest.workload)
    logger.info("applied task %s/%s (%d objects)", manifest.namespace, manifest.task, len(manifest.extra_objects) + 1)


def scale_task(kube: KubeApi, namespace: str, task: str, replicas: int) -> None:
    """Scale the Task's StatefulSet; scaling a missing one to 0 is a no-op."""
    try:
        resp = kube.call(
            kube.apps.patch_namespaced_stateful_set_scale,
            task,
            namespace,
            {"spec": {"replicas": int(replicas)}},
            what=f"StatefulSet {task}",
            _preload_content=False,
        )
        finish(resp)
    except RuntimeFailure as exc:
        if exc.reason == "not_found" and int(replicas) == 0:
            return
        raise


def delete_task(kube: KubeApi, namespace: str, task: str, delete_storage: bool = False) -> None:
    """StatefulSet (cascading to its Pods), head Service, scripts ConfigMap, Ray token and tracking Secrets, PVCs
    whose policy annotation is ``Delete`` (all of them with ``delete_storage``), and registry Secrets no remaining
    workload uses."""
    core = kube.core
    body = k8s.V1DeleteOptions(propagation_policy="Background")
    kube.ignore_404(kube.apps.delete_namespaced_stateful_set, task, namespace, body=body, what=f"sts {task}")
    kube.ignore_404(core.delete_namespaced_service, f"{task}-ray-head", namespace, what="service")
    kube.ignore_404(core.delete_namespaced_config_map, f"{task}-rlark-scripts", namespace, what="configmap")
    kube.ignore_404(core.delete_namespaced_secret, f"{task}-ray-auth", namespace, what="secret")
    kube.ignore_404(core.delete_namespaced_secret, tracking_secret.secret_name(task), namespace, what="secret")
    selector = f"rlinf.io/task={task}"
    pvcs = kube.read_json(core.list_namespaced_persistent_volume_claim, namespace, label_selector=selector)
    for pvc in pvcs.get("items") or []:
        policy = ((pvc["metadata"].get("annotations") or {}).get("rlark.io/pvc-reclaim")) or "Retain"
        if delete_storage or policy == "Delete":
            kube.ignore_404(
                core.delete_namespaced_persistent_volume_claim, pvc["metadata"]["name"], namespace, what="pvc"
            )
    kube.ignore_404(core.delete_collection_namespaced_pod, namespace, label_selector=selector, what="pods")
    gc_registry_secrets(kube, namespace)


def gc_registry_secrets(kube: KubeApi, namespace: str) -> None:
    """Delete the console's image-registry Secrets that no console StatefulSet of ``namespace`` pulls with."""
    sets = kube.read_json(
        kube.apps.list_namespaced_stateful_set,
        namespace,
        label_selector="app.kubernetes.io/managed-by=rlark-console",
        what="statefulsets",
    )
    used = {
        s.get("name")
        for sts in sets.get("items") or []
        for s in ((sts.get("spec") or {}).get("template") or {}).get("spec", {}).get("imagePullSecrets") or []
    }
    secrets = kube.read_json(
        kube.core.list_namespaced_secret,
        namespace,
        label_selector="rlark.io/image-registry=true,app.kubernetes.io/managed-by=rlark-console",
        what="secrets",
    )
    for secret in secrets.get("items") or []:
        name = secret["metadata"]["name"]
        if name not in used:
            kube.ignore_404(kube.core.delete_namespaced_secret, name, namespace, what="secret")


def restart_pods(kube: KubeApi, namespace: str, task: str) -> None:
    """Delete the Task's Pods; its StatefulSet makes them again."""
    resp = kube.call(
        kube.core.delete_collection_namespaced_pod,
        namespace,
        label_selector=f"rlinf.io/task={task}",
        what=f"pods of {task}",
        _preload_content=False,
    )
    finish(resp)
