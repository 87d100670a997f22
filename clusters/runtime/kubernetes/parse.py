"""Raw API JSON (as ``KubeApi.read_json`` returns it) to the runtime's dataclasses: Pods, their ``main``
container, their Events, Nodes.

Quantities are numbers (``clusters.quantity``: cores, bytes, counts); timestamps are aware datetimes (None when
absent or unreadable).
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from clusters.node_health import conditions_of, recent_warnings
from clusters.quantity import parse_quantity
from clusters.runtime.base import ContainerState, NodeInfo, PodEvent, PodInfo
from clusters.runtime.containers import from_pod as containers_of

TERMINAL_PHASES = ("Succeeded", "Failed")
MAIN = "main"
JOB_LABEL = "rlinf.io/job"  # selector "label present": every Pod/StatefulSet the console made for a job


def timestamp(value: Any) -> datetime | None:
    """An RFC 3339 timestamp (``Z`` or an offset) as a datetime; None when empty or unreadable."""
    if not value:
        return None
    try:
        return datetime.fromisoformat(str(value).replace("Z", "+00:00"))
    except ValueError:
        return None


def number(value: Any) -> float:
    """A Kubernetes quantity as a number; 0.0 when unreadable."""
    try:
        return parse_quantity(value)
    except ValueError:
        return 0.0


def resource_map(raw: dict | None) -> dict[str, float]:
    """``{resource: quantity}`` as numbers (whole ones as ``int``)."""
    out = {}
    for k, v in (raw or {}).items():
        n = number(v)
        out[k] = int(n) if float(n).is_integer() else n
    return out


def pod_requests(pod: dict) -> dict[str, float]:
    """Effective requests of a pod: containers summed, init containers as max, plus overhead (upstream 10.1)."""
    spec = pod.get("spec") or {}
    total: dict[str, float] = {}
    for c in spec.get("containers") or []:
        for k, v in ((c.get("resources") or {}).get("requests") or {}).items():
            total[k] = total.get(k, 0) + number(v)
    for c in spec.get("initContainers") or []:
        for k, v in ((c.get("resources") or {}).get("requests") or {}).items():
            total[k] = max(total.get(k, 0), number(v))
    for k, v in (spec.get("overhead") or {}).items():
        total[k] = total.get(k, 0) + number(v)
    return total


def container_state(pod: dict) -> ContainerState:
    """The ``main`` container's state (else the first container's), with the previous instance's exit."""
    status = pod.get("status") or {}
    statuses = status.get("containerStatuses") or []
    cs = next((c for c in statuses if c.get("name") == MAIN), statuses[0] if statuses else None)
    if cs is None:
        # not created yet: an init container may be the one failing (e.g. image pull)
        inits = status.get("initContainerStatuses") or []
        waiting = next((c for c in inits if (c.get("state") or {}).get("waiting")), None)
        if waiting:
            w = waiting["state"]["waiting"]
            return ContainerState(state="waiting", reason=w.get("reason", ""), message=w.get("message", ""))
        return ContainerState()
    state = cs.get("state") or {}
    last = (cs.get("lastState") or {}).get("terminated") or {}
    common = {
        "name": cs.get("name", MAIN),
        "restart_count": int(cs.get("restartCount") or 0),
        "ready": bool(cs.get("ready")),
        "last_exit_code": last.get("exitCode"),
        "last_reason": last.get("reason", ""),
    }
    if "running" in state:
        return ContainerState(state="running", started_at=timestamp(state["running"].get("startedAt")), **common)
    if "terminated" in state:
        t = state["terminated"]
        return ContainerState(
            state="terminated",
            reason=t.get("reason", ""),
            message=t.get("message", ""),
            exit_code=t.get("exitCode"),
            started_at=timestamp(t.get("startedAt")),
            finished_at=timestamp(t.get("finishedAt")),
            **common,
        )
    if "waiting" in state:
        w = state["waiting"]
        return ContainerState(state="waiting", reason=w.get("reason", ""), message=w.get("message", ""), **common)
    return ContainerState(**common)


def settled(pod: dict) -> bool:
    """Running with every container ready: nothing for Events to explain."""
    status = pod.get("status") or {}
    statuses = status.get("containerStatuses") or []
    return status.get("phase") == "Running" and bool(statuses) and all(c.get("ready") for c in statuses)


def pod_info(pod: dict, events: tuple[PodEvent, ...] = ()) -> PodInfo:
    """A Pod as the runtime reports it; the reason and message of an unschedulable Pod come from its
    ``PodScheduled`` condition when its status has none."""
    meta = pod.get("metadata") or {}
    status = pod.get("status") or {}
    name = meta.get("name", "")
    labels = meta.get("labels") or {}
    tail = name.rsplit("-", 1)[-1]
    cs = container_state(pod)
    conditions = tuple(dict(c) for c in status.get("conditions") or [])
    message = status.get("message", "")
    reason = status.get("reason", "")
    if not message:
        unsched = next((c for c in conditions if c.get("type") == "PodScheduled" and c.get("status") == "False"), None)
        if unsched and unsched.get("message"):
            message, reason = unsched["message"], reason or unsched.get("reason", "")
    return PodInfo(
        name=name,
        task=labels.get("rlinf.io/task", name.rsplit("-", 1)[0]),
        job=labels.get("rlinf.io/job", ""),
        ordinal=int(tail) if tail.isdigit() else 0,
        uid=meta.get("uid", ""),
        phase=status.get("phase") or "Pending",
        node=(pod.get("spec") or {}).get("nodeName", "") or "",
        ip=status.get("podIP", "") or "",
        container=cs,
        created_at=timestamp(meta.get("creationTimestamp")),
        started_at=timestamp(status.get("startTime")),
        finished_at=cs.finished_at if status.get("phase") in TERMINAL_PHASES else None,
        conditions=conditions,
        events=events,
        message=message,
        reason=reason,
        revision=labels.get("controller-revision-hash", ""),
        containers=containers_of(pod),
    )


def pod_event(ev: dict, type_: str | None = None) -> PodEvent:
    """An Event (``type_``: the type to report, else the Event's own, ``Normal`` when it has none)."""
    return PodEvent(
        type=type_ or ev.get("type", "Normal"),
        reason=ev.get("reason", ""),
        message=ev.get("message", ""),
        last_time=timestamp(ev.get("lastTimestamp") or ev.get("eventTime") or ev.get("firstTimestamp")),
        count=int(ev.get("count") or 1),
    )


def node_info(n: dict, used: dict[str, float] | None, node_events: list[dict]) -> NodeInfo:
    """A Node; ``used``: the requests of its non-terminal Pods; ``node_events``: Warning events about Nodes."""
    meta, status = n.get("metadata") or {}, n.get("status") or {}
    ready = any(c.get("type") == "Ready" and c.get("status") == "True" for c in status.get("conditions") or [])
    return NodeInfo(
        name=meta.get("name", ""),
        labels=dict(meta.get("labels") or {}),
        annotations=dict(meta.get("annotations") or {}),
        capacity=resource_map(status.get("capacity")),
        allocatable=resource_map(status.get("allocatable")),
        used=resource_map(used),
        ready=ready,
        unschedulable=bool((n.get("spec") or {}).get("unschedulable")),
        conditions=tuple(conditions_of(status.get("conditions"))),
        events=tuple(recent_warnings(node_events, meta.get("name", ""))),
        images=tuple(sorted({(i.get("names") or [""])[-1] for i in status.get("images") or [] if i.get("names")}))[
            :100
        ],
    )
