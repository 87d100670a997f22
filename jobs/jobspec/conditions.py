"""Kubernetes-style conditions of a Job or Task (``status.conditions`` of the Job document).

Pure functions over the condition list, shared by the controller (Stop sets ``Stopped``) and the status sync
(``Ready``, ``Failed``, ...), so neither has to import the other. Shape of each entry:
``{"type", "status": "True"|"False", "reason", "message", "lastTransitionTime": ISO-8601 UTC}``.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from django.utils import timezone
from django.utils.translation import gettext_lazy as _
from django.utils.translation import pgettext_lazy

# How the pages name a condition's type and status (the API keeps the Kubernetes-style values). ImagePullBackOff is
# Kubernetes' own word, kept as it is in both languages.
TYPE_LABELS = {
    "Failed": _("Failed"),
    "Succeeded": _("Succeeded"),
    "Stopped": _("Stopped"),
    "ClusterReachable": _("Cluster reachable"),
    "RayNodesJoined": _("Ray nodes joined"),
    "RLinfWaiting": _("RLinf waiting for nodes"),
    "ReplicaFailure": _("Pods refused by the cluster"),
    "WorkersReady": _("Workers ready"),
}
STATUS_LABELS = {
    "True": pgettext_lazy("condition status", "True"),
    "False": pgettext_lazy("condition status", "False"),
    "Unknown": pgettext_lazy("condition status", "Unknown"),
}


def type_label(type_: str) -> str:
    """The page's name of condition type ``type_`` (the type itself when it has none)."""
    return str(TYPE_LABELS.get(type_, type_))


def status_label(status: str) -> str:
    """The page's word for a condition status ``True``/``False``/``Unknown``."""
    return str(STATUS_LABELS.get(status, status))


def set_condition(
    conditions: list[dict[str, Any]],
    type_: str,
    status: bool,
    reason: str,
    message: str,
    now: datetime | None = None,
) -> list[dict[str, Any]]:
    """Return ``conditions`` with condition ``type_`` set (Kubernetes style).

    Shape of each entry: ``{"type", "status": "True"|"False", "reason", "message",
    "lastTransitionTime": ISO-8601 UTC}``; the transition time only changes when ``status``
    flips. The input list is not modified.
    """
    now = now or timezone.now()
    value = "True" if status else "False"
    out = [dict(c) for c in conditions or []]
    for cond in out:
        if cond.get("type") == type_:
            if cond.get("status") != value:
                cond["lastTransitionTime"] = now.isoformat()
            cond.update(status=value, reason=reason, message=message)
            return out
    out.append(
        {"type": type_, "status": value, "reason": reason, "message": message, "lastTransitionTime": now.isoformat()}
    )
    return out


def get_condition(conditions: list[dict[str, Any]], type_: str) -> dict[str, Any] | None:
    return next((c for c in conditions or [] if c.get("type") == type_), None)
