"""Node views shared by the Nodes page, ``GET /api/v1/nodes/`` and ``GET /api/v1/clusters/``.

Source: upstream-rlark 10.2 (categories, GPU key, device keys, business nodes) and 10.3 (resource summary:
``<free> / <total>``, total = capacity else allocatable, free = max(0, allocatable - used)). The selector
"match count" uses ``clusters.selectors`` - the same parsing and matching the wizard and the validator use
(keys ANDed, comma values = any of).
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Iterable, Mapping
from typing import Any

from clusters.models import Cluster, Node
from clusters.selectors import matches, parse_selector
from clusters.system_nodes import is_system_node

GPU_DEFAULT = "nvidia.com/gpu"
_GPU_TOKEN = re.compile(r"(^|[./-])gpu($|[./-])")
_GPU_EXCLUDE = re.compile(r"share|spot|virtual|v-gpu|gpu-core|gpu-mem|gpu-memory")


def gpu_key(*maps: Mapping[str, Any]) -> str:
    """``nvidia.com/gpu`` if present; else the first key ending ``/gpu``; else the first key with a gpu token
    (not share/spot/virtual/v-gpu, not gpu-core/mem/memory); else ``nvidia.com/gpu``."""
    keys = [k for m in maps for k in (m or {})]
    if GPU_DEFAULT in keys:
        return GPU_DEFAULT
    for k in keys:
        if k.endswith("/gpu"):
            return k
    for k in keys:
        if _GPU_TOKEN.search(k) and not _GPU_EXCLUDE.search(k):
            return k
    return GPU_DEFAULT


def device_keys(*maps: Mapping[str, Any]) -> list[str]:
    """``rlinf.io/device`` and ``rlinf.io/device-<name>`` keys, sorted."""
    return sorted({k for m in maps for k in (m or {}) if k == "rlinf.io/device" or k.startswith("rlinf.io/device-")})


def _num(value: Any) -> float:
    try:
        return float(value or 0)
    except (TypeError, ValueError):
        return 0.0


def total_free(node: Node, key: str) -> tuple[float, float]:
    """``(total, free)`` of one resource: total = capacity else allocatable; free = max(0, allocatable - used).

    A node that is not online (NotReady, or its cluster offline: ``node_sync.mark_offline`` marks every node of an
    offline cluster) has nothing free: nothing can be placed there, so its GPUs are never shown as free."""
    cap, alloc, used = node.capacity or {}, node.allocatable or {}, node.used or {}
    total = _num(cap.get(key, alloc.get(key, 0)))
    free = max(0.0, _num(alloc.get(key, cap.get(key, 0))) - _num(used.get(key, 0)))
    return total, free if node.online else 0.0


def _fmt(value: float) -> int | float:
    return int(value) if float(value).is_integer() else round(value, 3)


def node_summary(node: Node) -> dict[str, Any]:
    """JSON-ready summary of one node (never any cluster credential)."""
    key = gpu_key(node.capacity, node.allocatable, node.used)
    gpu_total, gpu_free = total_free(node, key)
    dev_total = dev_free = 0.0
    for d in device_keys(node.capacity, node.allocatable):
        t, f = total_free(node, d)
        dev_total, dev_free = dev_total + t, dev_free + f
    cpu_total, cpu_free = total_free(node, "cpu")
    mem_total, mem_free = total_free(node, "memory")
    return {
        "cluster": node.cluster.name,
        "name": node.name,
        "labels": node.labels or {},
        "category": node.category or "unknown",
        "gpu_model": node.gpu_model,
        "gpu_key": key,
        "gpus": {"total": _fmt(gpu_total), "free": _fmt(gpu_free)},
        "devices": {
            "keys": device_keys(node.capacity, node.allocatable),
            "total": _fmt(dev_total),
            "free": _fmt(dev_free),
        },
        "cpu": {"total": _fmt(cpu_total), "free": _fmt(cpu_free)},
        "memory": {"total": _fmt(mem_total), "free": _fmt(mem_free)},
        "online": node.online,
        "cordoned": node.unschedulable,
        "schedulable": node.online and not node.unschedulable,
        "control_plane": is_system_node(node.labels),
        "last_seen": node.last_seen.isoformat() if node.last_seen else None,
    }


@dataclasses.dataclass
class MatchResult:
    """Nodes matching a selector across all clusters. ``per_cluster``: ``[{cluster, count, schedulable}]``."""

    selector: dict[str, str]
    nodes: list[Node]
    per_cluster: list[dict[str, Any]]

    @property
    def count(self) -> int:
        return len(self.nodes)

    @property
    def schedulable(self) -> int:
        return sum(1 for n in self.nodes if n.online and not n.unschedulable)

    def as_dict(self, with_nodes: bool = True) -> dict[str, Any]:
        out: dict[str, Any] = {
            "selector": self.selector,
            "count": self.count,
            "schedulable": self.schedulable,
            "clusters": self.per_cluster,
        }
        if with_nodes:
            out["nodes"] = [node_summary(n) for n in self.nodes]
        return out


def filter_nodes(
    nodes: Iterable[Node],
    *,
    category: str = "",
    gpu_model: str = "",
    label: str = "",
    cluster: str = "",
    system: bool = False,
) -> list[Node]:
    """Page filters: category, GPU model (exact), a label ``key`` or ``key=value`` and cluster name.
    System (control-plane) nodes are left out unless ``system`` (the admins' "show system nodes" switch)."""
    out = []
    lkey, _, lval = (label or "").partition("=")
    lkey, lval = lkey.strip(), lval.strip()
    for n in nodes:
        if not system and is_system_node(n.labels):
            continue
        if category and (n.category or "unknown") != category:
            continue
        if gpu_model and n.gpu_model != gpu_model:
            continue
        if cluster and n.cluster.name != cluster:
            continue
        if lkey and (lkey not in (n.labels or {}) or (lval and (n.labels or {}).get(lkey) != lval)):
            continue
        out.append(n)
    return out


def match_nodes(selector: str | Mapping | None, queryset=None) -> MatchResult:
    """All nodes (every cluster) whose labels match ``selector``; raises ``clusters.selectors.SelectorError``.

    An empty selector matches nothing here (the wizard requires a non-empty selector)."""
    parsed = parse_selector(selector)
    qs = queryset if queryset is not None else Node.objects.select_related("cluster").order_by("cluster__name", "name")
    found = [n for n in qs if not is_system_node(n.labels) and matches(parsed, n.labels)] if parsed else []
    per: dict[str, dict[str, Any]] = {}
    for n in found:
        entry = per.setdefault(n.cluster.name, {"cluster": n.cluster.name, "count": 0, "schedulable": 0})
        entry["count"] += 1
        entry["schedulable"] += int(n.online and not n.unschedulable)
    return MatchResult(parsed, found, sorted(per.values(), key=lambda e: e["cluster"]))


def cluster_summary(cluster: Cluster, nodes: list[Node] | None = None) -> dict[str, Any]:
    """JSON-ready cluster: status, namespace, CIDRs, node/GPU counts. NEVER the kubeconfig.

    Totals and GPU sums count business nodes only: system (control-plane) nodes are left out. An offline cluster
    has no free GPUs (``gpus.free`` 0; ``gpus.total`` stays what it last reported)."""
    nodes = list(cluster.nodes.all()) if nodes is None else nodes
    nodes = [n for n in nodes if not is_system_node(n.labels)]
    gpus_total = gpus_free = 0.0
    for n in nodes:
        t, f = total_free(n, gpu_key(n.capacity, n.allocatable, n.used))
        gpus_total += t
        gpus_free += f
    if cluster.status == Cluster.Status.OFFLINE:  # its nodes' last figures are stale: none of them is free now
        gpus_free = 0.0
    return {
        "name": cluster.name,
        "runtime": cluster.runtime,
        "status": cluster.status,
        "status_message": cluster.status_message,
        "namespace": cluster.namespace,
        "in_cluster": cluster.in_cluster,
        "has_kubeconfig": bool(cluster.kubeconfig),
        "pod_cidr": cluster.pod_cidr,
        "service_cidr": cluster.service_cidr,
        "allow_host_path": cluster.allow_host_path,
        "isolated_network": cluster.isolated_network,
        "last_sync_at": cluster.last_sync_at.isoformat() if cluster.last_sync_at else None,
        "location": cluster.location,
        "contact": cluster.contact,
        "description": cluster.description,
        "last_error": cluster.last_error,
        "last_error_at": cluster.last_error_at.isoformat() if cluster.last_error_at else None,
        "offline_since": cluster.offline_since.isoformat() if cluster.offline_since else None,
        "created_at": cluster.created_at.isoformat() if cluster.created_at else None,
        "nodes": {
            "total": len(nodes),
            "online": sum(1 for n in nodes if n.online),
            "cordoned": sum(1 for n in nodes if n.unschedulable),
        },
        "gpus": {"total": _fmt(gpus_total), "free": _fmt(gpus_free)},
    }
