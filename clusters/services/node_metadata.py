"""Console-owned node metadata, kept apart from what the cluster reports.

Source: upstream-rlark 10.1 (management-owned ``rlark.io/node-category*`` labels and ``rlark.io/city``,
``rlark.io/gpu-model``, ``rlark.io/device-model`` annotations survive the data plane's push) and 10.5 (batch
metadata edits).

Storage (``clusters.models.Node``)::

    discovered_labels / discovered_annotations   what the last node sync read from the cluster
    console_labels / console_annotations         what an admin set in the console: {key: value | None}
    labels / annotations                         the effective metadata = merge(discovered, console)

**Merge rule** (:func:`merge`): for every key the console owns (present in ``console_*``) the console value wins;
a console value of ``None`` is a *removal*: the key is absent from the effective map even if the cluster reports
it. Every other key keeps its discovered value. Node sync only ever rewrites ``discovered_*`` and re-merges, so
console-owned values survive every sync.

Fields an admin edits (:data:`FIELDS`; ``label``/``annotation`` are free-form and take a ``key``):

============== ============ ===========================
field          stored as    key
============== ============ ===========================
category       label        ``rlark.io/node-category`` (cloud | edge | robot)
gpu_model      annotation   ``rlark.io/gpu-model``
device_model   annotation   ``rlark.io/device-model``
city           annotation   ``rlark.io/city``
site           annotation   ``rlark.io/site``
label          label        any valid Kubernetes label key
annotation     annotation   any valid Kubernetes annotation key
============== ============ ===========================

Console-owned *labels* are also written back to the Kubernetes Node (a merge patch of ``metadata.labels``,
removals as ``null``) so nodeSelectors can use them; RBAC grants ``patch nodes``. A failed write-back never
loses the console value: it is reported and the next edit or sync retries nothing silently.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Iterable

from django.db import transaction
from django.utils.translation import gettext as _

from accounts.audit import record
from clusters.models import Cluster, Node
from clusters.runtime import registry
from clusters.runtime.base import RuntimeFailure
from clusters.services.inventory import (  # noqa: F401 - the merge rule's home
    CATEGORIES,
    effective_fields,
    merge,
    resources,
)

LABEL = "label"
ANNOTATION = "annotation"
# field -> (kind, fixed key or "" for free-form)
FIELDS: dict[str, tuple[str, str]] = {
    "category": (LABEL, "rlark.io/node-category"),
    "gpu_model": (ANNOTATION, "rlark.io/gpu-model"),
    "device_model": (ANNOTATION, "rlark.io/device-model"),
    "city": (ANNOTATION, "rlark.io/city"),
    "site": (ANNOTATION, "rlark.io/site"),
    "label": (LABEL, ""),
    "annotation": (ANNOTATION, ""),
}
MAX_ANNOTATION_VALUE = 4096
_NAME = re.compile(r"^([A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?)$")
_PREFIX = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
_LABEL_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")


class MetadataError(ValueError):
    """Invalid field, key or value; ``str(exc)`` is translated, for the admin."""


@dataclasses.dataclass
class BatchResult:
    """Outcome of :func:`set_field`: ``changed`` nodes (count audited), ``unchanged``, and write-back
    ``warnings`` (``"<cluster>/<node>: <reason>"``) for Kubernetes Nodes that could not be patched."""

    changed: int = 0
    unchanged: int = 0
    warnings: list[str] = dataclasses.field(default_factory=list)


def _check_key(kind: str, key: str) -> str:
    key = (key or "").strip()
    prefix, slash, name = key.rpartition("/")
    bad_prefix = bool(slash) and (len(prefix) > 253 or not _PREFIX.match(prefix))
    if not key or len(name) > 63 or not _NAME.match(name) or bad_prefix:
        raise MetadataError(
            _("“%(key)s” is not a valid Kubernetes %(kind)s key (prefix/name, name at most 63 characters).")
            % {"key": key[:300], "kind": _("label") if kind == LABEL else _("annotation")}
        )
    return key


def resolve(field: str, key: str = "") -> tuple[str, str]:
    """``(kind, key)`` of an editable field; MetadataError for an unknown field or a bad free-form key."""
    if field not in FIELDS:
        raise MetadataError(_("Unknown metadata field “%(field)s”.") % {"field": str(field)[:64]})
    kind, fixed = FIELDS[field]
    return kind, fixed or _check_key(kind, key)


def clean_value(field: str, kind: str, value: str | None) -> str | None:
    """Trimmed value; blank -> None (removal). Labels must be valid label values, categories one of
    :data:`~clusters.services.inventory.CATEGORIES`, annotations at most 4 KiB."""
    if value is None or not str(value).strip():
        return None
    value = str(value).strip()
    if field == "category" and value not in CATEGORIES:
        raise MetadataError(_("The category must be one of: %(choices)s.") % {"choices": ", ".join(CATEGORIES)})
    if kind == LABEL and (len(value) > 63 or not _LABEL_VALUE.match(value)):
        raise MetadataError(
            _("“%(value)s” is not a valid label value (at most 63 letters, digits, “-”, “_” or “.”).")
            % {"value": value[:80]}
        )
    if kind == ANNOTATION and len(value.encode()) > MAX_ANNOTATION_VALUE:
        raise MetadataError(_("The value is longer than %(n)d bytes.") % {"n": MAX_ANNOTATION_VALUE})
    return value


def _write_back(node: Node, labels: dict[str, str | None]) -> str | None:
    """Patch ``metadata.labels`` of the Kubernetes Node; returns a warning or None."""
    if node.cluster.runtime != Cluster.Runtime.KUBERNETES or not labels:
        return None
    try:
        registry.runtime_for(node.cluster).patch_node_labels(node.name, labels)
    except RuntimeFailure as exc:
        return f"{node.cluster.name}/{node.name}: {exc}"
    return None


def set_field(
    nodes: Iterable[Node], field: str, value: str | None, *, key: str = "", actor=None, request=None
) -> BatchResult:
    """Set (``value``) or remove (``None``/blank) one console-owned metadata field on every node in ``nodes``.

    One ``bulk_update`` for the changed rows; labels are written back to Kubernetes Nodes; one audit entry
    ``node.metadata`` with the field, key, value and the count of nodes changed. Raises MetadataError before
    anything is stored when the field, key or value is invalid."""
    kind, real_key = resolve(field, key)
    value = clean_value(field, kind, value)
    attr = "console_labels" if kind == LABEL else "console_annotations"
    result = BatchResult()
    changed: list[Node] = []
    for node in nodes:
        owned = dict(getattr(node, attr) or {})
        if real_key in owned and owned[real_key] == value:
            result.unchanged += 1
            continue
        owned[real_key] = value
        setattr(node, attr, owned)
        for name, v in effective_fields(
            node.discovered_labels,
            node.discovered_annotations,
            node.console_labels,
            node.console_annotations,
            resources(node.capacity, node.allocatable),
        ).items():
            setattr(node, name, v)
        changed.append(node)
    with transaction.atomic():
        if changed:
            Node.objects.bulk_update(
                changed, [attr, "labels", "annotations", "gpu_model", "category", "system"], batch_size=500
            )
        record(
            actor,
            "node.metadata",
            "node",
            ",".join(f"{n.cluster.name}/{n.name}" for n in changed[:20]),
            request=request,
            field=field,
            key=real_key,
            value=value,
            count=len(changed),
        )
    result.changed = len(changed)
    if kind == LABEL:
        for node in changed:
            warning = _write_back(node, {real_key: value})
            if warning:
                result.warnings.append(warning)
    return result
