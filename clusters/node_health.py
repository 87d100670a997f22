"""Node conditions and recent Warning events (upstream-rlark 10.1).

- Conditions kept: Ready, DiskPressure, MemoryPressure, PIDPressure, NetworkUnavailable, each as
  ``{"type", "status", "reason", "message", "last_transition"}`` (:func:`conditions_of`).
- Events kept (:func:`recent_warnings`): only ``Warning`` events whose object is this Node, de-duplicated by
  (object, reason) keeping the latest count, time and message; any older than :data:`RETENTION` (1 h) dropped;
  newest first, at most :data:`MAX_EVENTS` (50) per node.
- :func:`problems` names what is wrong with a node: a pressure condition that is ``True``, a NetworkUnavailable
  ``True``, or Ready not ``True``. Used by the back office and by job Diagnosis (``jobs.observe.node_findings``).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import UTC, datetime, timedelta
from typing import Any

KEPT_CONDITIONS = ("Ready", "DiskPressure", "MemoryPressure", "PIDPressure", "NetworkUnavailable")
PRESSURE = ("DiskPressure", "MemoryPressure", "PIDPressure", "NetworkUnavailable")
RETENTION = timedelta(hours=1)
MAX_EVENTS = 50


def _iso(value: Any) -> str:
    if isinstance(value, datetime):
        return value.astimezone(UTC).isoformat()
    return str(value or "")


def _when(value: Any) -> datetime | None:
    if isinstance(value, datetime):
        return value if value.tzinfo else value.replace(tzinfo=UTC)
    try:
        parsed = datetime.fromisoformat(str(value).replace("Z", "+00:00"))
    except ValueError:
        return None
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)


def conditions_of(raw: Iterable[Mapping[str, Any]] | None) -> list[dict[str, str]]:
    """The kept conditions of a Kubernetes ``status.conditions`` list, in :data:`KEPT_CONDITIONS` order."""
    by_type = {str(c.get("type")): c for c in raw or [] if c.get("type") in KEPT_CONDITIONS}
    return [
        {
            "type": t,
            "status": str(by_type[t].get("status", "Unknown")),
            "reason": str(by_type[t].get("reason") or ""),
            "message": str(by_type[t].get("message") or "")[:500],
            "last_transition": _iso(by_type[t].get("lastTransitionTime") or by_type[t].get("last_transition")),
        }
        for t in KEPT_CONDITIONS
        if t in by_type
    ]


def recent_warnings(
    events: Iterable[Mapping[str, Any]], node: str, now: datetime | None = None
) -> list[dict[str, Any]]:
    """Warning events of Node ``node`` (module docstring). Each input: Kubernetes Event JSON (``type``,
    ``reason``, ``message``, ``count``, ``lastTimestamp``/``eventTime``, ``involvedObject``) or an already
    kept entry; output ``[{"reason", "message", "count", "last_time"}]``."""
    now = now or datetime.now(UTC)
    latest: dict[tuple[str, str], dict[str, Any]] = {}
    for ev in events:
        obj = ev.get("involvedObject") or {"kind": "Node", "name": node}
        if ev.get("type", "Warning") != "Warning" or obj.get("kind") != "Node" or obj.get("name") != node:
            continue
        when = _when(ev.get("last_time") or ev.get("lastTimestamp") or ev.get("eventTime") or ev.get("firstTimestamp"))
        if when is None or now - when > RETENTION:
            continue
        key = (node, str(ev.get("reason") or ""))
        entry = {
            "reason": key[1],
            "message": str(ev.get("message") or "")[:500],
            "count": int(ev.get("count") or 1),
            "last_time": when.isoformat(),
        }
        if key not in latest or when >= _when(latest[key]["last_time"]):
            latest[key] = entry
    return sorted(latest.values(), key=lambda e: (e["last_time"], e["reason"]), reverse=True)[:MAX_EVENTS]


def problems(conditions: Iterable[Mapping[str, Any]] | None) -> list[str]:
    """``["DiskPressure", ...]``: pressure conditions that are True, plus ``NotReady`` when Ready is not True."""
    out = []
    for c in conditions or []:
        if c.get("type") in PRESSURE and c.get("status") == "True":
            out.append(str(c["type"]))
        elif c.get("type") == "Ready" and c.get("status") != "True":
            out.append("NotReady")
    return out
