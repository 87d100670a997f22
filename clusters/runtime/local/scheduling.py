"""Place local Pods on a local cluster's virtual nodes (Kubernetes semantics, first fit).

Inputs are plain dicts: a node is ``{"name", "labels", "allocatable", "online", "unschedulable"}``,
a pod spec is the StatefulSet pod template's ``spec``. Node selection uses
``clusters.selectors.matches`` (keys ANDed, comma values = any of; upstream-rlark 4.6 "goes further")
for ``nodeSelector`` and for each required NodeSelectorTerm's ``In`` expressions (terms ORed, as
Kubernetes does); ``Exists``/``DoesNotExist``/``NotIn`` follow Kubernetes. Required pod
anti-affinity on ``kubernetes.io/hostname`` keeps matching pods on different nodes. Requests are
compared with ``allocatable - used``; resources a node does not list count as 0 available, except
``cpu``/``memory``/``ephemeral-storage`` which a virtual node without them does not limit.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping
from typing import Any

from clusters.quantity import parse_quantity as spec_parse_quantity
from clusters.selectors import matches

UNLIMITED_IF_ABSENT = {"cpu", "memory", "ephemeral-storage", "pods"}


def parse_quantity(value: Any) -> float:
    """Kubernetes quantity -> number (cores, bytes, counts)."""
    return spec_parse_quantity(value)


def pod_requests(pod_spec: Mapping[str, Any]) -> dict[str, float]:
    """Summed requests of the pod's containers (limits stand in for missing requests)."""
    total: dict[str, float] = {}
    for c in pod_spec.get("containers") or []:
        res = c.get("resources") or {}
        merged = {**(res.get("limits") or {}), **(res.get("requests") or {})}
        for key, value in merged.items():
            try:
                total[key] = total.get(key, 0.0) + parse_quantity(value)
            except (TypeError, ValueError):
                continue
    return total


def _expr_ok(expr: Mapping[str, Any], labels: Mapping[str, str]) -> bool:
    key, op, values = expr.get("key", ""), expr.get("operator", "In"), [str(v) for v in expr.get("values") or []]
    if op == "In":
        return matches({key: ",".join(values)}, labels)
    if op == "NotIn":
        return key not in labels or not matches({key: ",".join(values)}, labels)
    if op == "Exists":
        return key in labels
    if op == "DoesNotExist":
        return key not in labels
    return False


def node_matches(pod_spec: Mapping[str, Any], labels: Mapping[str, str]) -> bool:
    """nodeSelector and required node affinity of ``pod_spec`` against a node's labels."""
    if not matches({k: str(v) for k, v in (pod_spec.get("nodeSelector") or {}).items()}, labels):
        return False
    required = ((pod_spec.get("affinity") or {}).get("nodeAffinity") or {}).get(
        "requiredDuringSchedulingIgnoredDuringExecution"
    ) or {}
    terms = required.get("nodeSelectorTerms") or []
    if not terms:
        return True
    return any(all(_expr_ok(e, labels) for e in term.get("matchExpressions") or []) for term in terms)


def _anti_affinity_selectors(pod_spec: Mapping[str, Any]) -> list[dict[str, str]]:
    rules = ((pod_spec.get("affinity") or {}).get("podAntiAffinity") or {}).get(
        "requiredDuringSchedulingIgnoredDuringExecution"
    ) or []
    return [
        dict((r.get("labelSelector") or {}).get("matchLabels") or {})
        for r in rules
        if r.get("topologyKey") == "kubernetes.io/hostname"
    ]


@dataclasses.dataclass
class Placement:
    node: str = ""
    message: str = ""  # why it is unschedulable (empty when placed)


def place(
    pod_spec: Mapping[str, Any],
    nodes: Iterable[Mapping[str, Any]],
    used: Mapping[str, Mapping[str, float]],
    placed_pod_labels: Mapping[str, list[Mapping[str, str]]],
) -> Placement:
    """Choose a node for a pod. ``used``: node -> resource -> requested by pods already placed;
    ``placed_pod_labels``: node -> labels of the live pods on it (for anti-affinity).
    Returns the first fitting node in name order, else a message like
    ``0/3 nodes are available: nvidia.com/gpu need 8, free 3 on local-gpu-0``."""
    requests = pod_requests(pod_spec)
    anti = _anti_affinity_selectors(pod_spec)
    nodes = sorted(nodes, key=lambda n: n["name"])
    reasons: list[str] = []
    for node in nodes:
        name = node["name"]
        labels = node.get("labels") or {}
        if not node.get("online", True) or node.get("unschedulable"):
            reasons.append(f"node {name} is not schedulable")
            continue
        if not node_matches(pod_spec, labels):
            continue
        if any(all(pl.get(k) == v for k, v in sel.items()) for sel in anti for pl in placed_pod_labels.get(name, [])):
            reasons.append(f"node {name} already runs a pod of this task (anti-affinity)")
            continue
        alloc = {k: _num(v) for k, v in (node.get("allocatable") or node.get("capacity") or {}).items()}
        short = []
        for key, need in requests.items():
            if need <= 0:
                continue
            if key not in alloc and key in UNLIMITED_IF_ABSENT:
                continue
            free = alloc.get(key, 0.0) - (used.get(name) or {}).get(key, 0.0)
            if need > free + 1e-9:
                short.append(f"{key} need {_fmt(need)}, free {_fmt(max(free, 0))}")
        if short:
            reasons.append(f"{'; '.join(short)} on {name}")
            continue
        return Placement(node=name)
    if not reasons:
        reasons.append("no node matches the node selector")
    return Placement(message=f"0/{len(nodes)} nodes are available: {'; '.join(reasons)}")


def _num(value: Any) -> float:
    try:
        return parse_quantity(value)
    except (TypeError, ValueError):
        return 0.0


def _fmt(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else f"{value:g}"
