"""The cluster's Nodes and what it has (namespaces, StorageClasses), as the Kubernetes runtime reads and changes
them: one list call each, read as raw JSON."""

from __future__ import annotations

import logging

from kubernetes import client as k8s

from clusters.runtime.base import NodeInfo, RuntimeFailure, StorageClassInfo
from clusters.runtime.kubernetes.api import KubeApi
from clusters.runtime.kubernetes.parse import TERMINAL_PHASES, node_info, pod_requests

logger = logging.getLogger("rlark.k8s")

DEFAULT_CLASS = "storageclass.kubernetes.io/is-default-class"


def list_nodes_raw(kube: KubeApi) -> tuple[list[dict], list[dict]]:
    """Raw JSON of ``GET nodes`` and of the non-terminal pods of all namespaces (two list calls)."""
    nodes = kube.read_json(kube.core.list_node, what="nodes")["items"]
    pods = kube.read_json(
        kube.core.list_pod_for_all_namespaces,
        what="pods",
        field_selector="status.phase!=Succeeded,status.phase!=Failed",
    )["items"]
    return nodes, pods


def list_nodes(kube: KubeApi) -> list[NodeInfo]:
    """Every Node with the requests of the Pods on it (``used``) and its recent Warning events."""
    nodes, pods = list_nodes_raw(kube)
    events = node_warning_events(kube)
    used: dict[str, dict[str, float]] = {}
    for pod in pods:
        node = (pod.get("spec") or {}).get("nodeName")
        if not node or (pod.get("status") or {}).get("phase") in TERMINAL_PHASES:
            continue
        acc = used.setdefault(node, {})
        for k, v in pod_requests(pod).items():
            acc[k] = acc.get(k, 0) + v
    return [node_info(n, used.get((n.get("metadata") or {}).get("name", "")), events) for n in nodes]


def node_warning_events(kube: KubeApi) -> list[dict]:
    """Warning events about Nodes in every namespace (one list call); [] where RBAC (or the server) does not
    allow it."""
    try:
        raw = kube.read_json(
            kube.core.list_event_for_all_namespaces,
            field_selector="involvedObject.kind=Node,type=Warning",
            what="node events",
        )
    except RuntimeFailure as exc:  # optional: never fail the node sync over events
        logger.debug("node events unavailable: %s", exc)
        return []
    return list(raw.get("items") or [])


def list_namespaces(kube: KubeApi) -> list[str]:
    """``GET /api/v1/namespaces`` (names only); ``forbidden`` where the ClusterRole lacks ``list namespaces``."""
    raw = kube.read_json(kube.core.list_namespace, what="namespaces", limit=1000)
    return sorted((i.get("metadata") or {}).get("name", "") for i in raw.get("items") or [])


def list_storage_classes(kube: KubeApi) -> list[StorageClassInfo]:
    """``GET /apis/storage.k8s.io/v1/storageclasses``; ``forbidden`` where RBAC lacks ``list storageclasses``."""
    raw = kube.read_json(k8s.StorageV1Api(kube.api).list_storage_class, what="storageclasses", limit=1000)
    out = []
    for item in raw.get("items") or []:
        meta = item.get("metadata") or {}
        out.append(
            StorageClassInfo(
                name=meta.get("name", ""),
                provisioner=str(item.get("provisioner") or ""),
                default=(meta.get("annotations") or {}).get(DEFAULT_CLASS) == "true",
            )
        )
    return sorted(out, key=lambda c: c.name)


def cordon(kube: KubeApi, node: str, unschedulable: bool = True) -> None:
    """Set ``spec.unschedulable`` of a node (running pods are not touched)."""
    kube.call(kube.core.patch_node, node, {"spec": {"unschedulable": bool(unschedulable)}}, what=f"node {node}")


def patch_node_labels(kube: KubeApi, node: str, labels: dict[str, str | None]) -> None:
    """Merge-patch ``metadata.labels`` of a node (``None`` removes a label): console-owned labels
    (``clusters.services.node_metadata``) written back so nodeSelectors can use them."""
    kube.call(kube.core.patch_node, node, {"metadata": {"labels": dict(labels)}}, what=f"node {node}")
