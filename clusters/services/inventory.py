"""Node inventory: derive GPU model, category and resources from labels (upstream-rlark 10.2),
and register the virtual nodes of a ``local`` cluster."""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any

from django.db import transaction
from django.utils import timezone
from django.utils.functional import Promise
from django.utils.translation import gettext_lazy as _

from clusters.models import Cluster, Node
from clusters.system_nodes import is_system_node

GPU_TOKEN = re.compile(r"(^|[./-])gpu($|[./-])")
CATEGORIES = ("cloud", "edge", "robot")
# the words the Clusters page uses (clusters/_category.html); "unknown" and anything else reads "Other"
CATEGORY_LABELS = {"cloud": _("Cloud"), "edge": _("Edge"), "robot": _("Robot")}


def category_label(value: str) -> Promise:
    """The localized name of a node category (``cloud`` -> "Cloud" / "云算力"); "Other" for ``unknown`` or ''."""
    return CATEGORY_LABELS.get(value or "", _("Other"))


def resources(capacity: Mapping[str, Any] | None, allocatable: Mapping[str, Any] | None) -> dict[str, Any]:
    """The resources a node has: its ``capacity``, completed by ``allocatable`` for any resource only that one
    lists (a device plugin or a node whose status reports a GPU in ``allocatable`` alone still has it)."""
    return {**dict(allocatable or {}), **dict(capacity or {})}


def gpu_model(labels: dict[str, str], annotations: dict[str, str]) -> str:
    """``rlark.io/gpu-model`` then ``rlark.io/model`` (annotation before label); '' if none."""
    for key in ("rlark.io/gpu-model", "rlark.io/model"):
        value = (annotations.get(key) or labels.get(key) or "").strip()
        if value:
            return value
    return ""


def category(labels: dict[str, str], capacity: dict[str, Any]) -> str:
    """First category from ``rlark.io/node-category-<c>=true`` labels, then ``rlark.io/node-category``;
    a node with a positive GPU resource and no category is ``cloud``; else ``unknown``. ``capacity``: the node's
    :func:`resources` (capacity completed by allocatable)."""
    found = [c for c in CATEGORIES if labels.get(f"rlark.io/node-category-{c}") == "true"]
    found += [c.strip() for c in labels.get("rlark.io/node-category", "").split(",") if c.strip() in CATEGORIES]
    if found:
        return found[0]
    if any(GPU_TOKEN.search(k) and float(v or 0) > 0 for k, v in capacity.items()):
        return "cloud"
    return "unknown"


def merge(discovered: Mapping[str, str] | None, console: Mapping[str, str | None] | None) -> dict[str, str]:
    """Effective metadata: console-owned keys win (``None`` removes the key), discovered keys kept for the rest.

    >>> merge({"a": "1", "b": "2", "c": "3"}, {"b": "console", "c": None})
    {'a': '1', 'b': 'console'}
    """
    out = dict(discovered or {})
    for key, value in (console or {}).items():
        if value is None:
            out.pop(key, None)
        else:
            out[key] = value
    return out


def effective_fields(
    discovered_labels: Mapping[str, str],
    discovered_annotations: Mapping[str, str],
    console_labels: Mapping[str, str | None],
    console_annotations: Mapping[str, str | None],
    capacity: Mapping[str, Any],
) -> dict[str, Any]:
    """The derived ``Node`` columns for given discovered and console metadata (labels, annotations,
    gpu_model, category, system)."""
    labels = merge(discovered_labels, console_labels)
    annotations = merge(discovered_annotations, console_annotations)
    return {
        "labels": labels,
        "annotations": annotations,
        "gpu_model": gpu_model(labels, annotations),
        "category": category(labels, capacity or {}),
        "system": is_system_node(labels),
    }


@transaction.atomic
def upsert_local_nodes(cluster: Cluster, nodes: Iterable[dict[str, Any]]) -> list[Node]:
    """Create/update a local cluster's virtual nodes from Kubernetes-style dicts
    ``{"name", "labels", "capacity", "annotations"?}``. Each node also gets the label
    ``kubernetes.io/hostname: <name>``; allocatable = capacity (nothing reserved)."""
    rows = []
    existing = {n.name: n for n in Node.objects.filter(cluster=cluster)}
    for spec in nodes:
        labels = {**dict(spec.get("labels") or {}), "kubernetes.io/hostname": spec["name"]}
        annotations = dict(spec.get("annotations") or {})
        capacity = {k: _number(v) for k, v in (spec.get("capacity") or {}).items()}
        row = existing.get(spec["name"])
        node, _ = Node.objects.update_or_create(
            cluster=cluster,
            name=spec["name"],
            defaults={
                "discovered_labels": labels,
                "discovered_annotations": annotations,
                **effective_fields(
                    labels,
                    annotations,
                    row.console_labels if row else {},
                    row.console_annotations if row else {},
                    capacity,
                ),
                "capacity": capacity,
                "allocatable": dict(capacity),
                "online": True,
                "last_seen": timezone.now(),
            },
        )
        rows.append(node)
    return rows


_SUFFIX = {
    "Ki": 2**10,
    "Mi": 2**20,
    "Gi": 2**30,
    "Ti": 2**40,
    "k": 10**3,
    "M": 10**6,
    "G": 10**9,
    "T": 10**12,
    "m": 1e-3,
}


def _number(value: Any) -> float | int:
    """Parse a Kubernetes quantity (``"256Gi"``, ``"500m"``, ``8``) into a number (bytes/cores/count)."""
    if isinstance(value, (int, float)):
        return value
    text = str(value).strip()
    for suffix in sorted(_SUFFIX, key=len, reverse=True):
        if text.endswith(suffix):
            number = float(text[: -len(suffix)]) * _SUFFIX[suffix]
            return int(number) if number.is_integer() else number
    number = float(text)
    return int(number) if number.is_integer() else number
