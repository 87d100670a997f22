"""Reads of the console's Pods: lists with the Events that explain them, watches, metrics.

Pods and StatefulSets the console made carry the label ``rlinf.io/job`` (:data:`parse.JOB_LABEL`); a job's are
selected by ``rlinf.io/job=<job>``. Events are read only when some Pod is not settled (Pending, waiting, not
ready): one list call more.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from datetime import datetime
from typing import Any

from kubernetes import client as k8s

from clusters.runtime.base import PodEvent, PodInfo, RuntimeFailure, WatchEvent
from clusters.runtime.kubernetes.api import KubeApi, abandon
from clusters.runtime.kubernetes.client import timeouts
from clusters.runtime.kubernetes.parse import number, pod_event, pod_info, settled


def list_pods(kube: KubeApi, namespace: str, selector: str) -> list[PodInfo]:
    """The Pods ``selector`` selects, by Task and ordinal, each with its 20 most recent Events (newest first)
    when it is not settled."""
    pods = kube.read_json(kube.core.list_namespaced_pod, namespace, label_selector=selector, what="pods")
    items = pods.get("items") or []
    events: dict[str, list[PodEvent]] = {}
    if any(not settled(p) for p in items):  # events explain Pending/waiting pods; skip the call otherwise
        names = {p["metadata"]["name"] for p in items if not settled(p)}
        raw = kube.read_json(
            kube.core.list_namespaced_event, namespace, field_selector="involvedObject.kind=Pod", what="events"
        )
        for ev in raw.get("items") or []:
            target = (ev.get("involvedObject") or {}).get("name")
            if target in names:
                events.setdefault(target, []).append(pod_event(ev))
    out = []
    for p in items:
        evs = sorted(events.get(p["metadata"]["name"], []), key=lambda e: e.last_time or datetime.min, reverse=True)
        out.append(pod_info(p, tuple(evs[:20])))
    out.sort(key=lambda p: (p.task, p.ordinal))
    return out


WARNING_EVENTS_LIMIT = 500  # events one list call reads (the API server's ``limit``): a bounded answer


def warning_events(kube: KubeApi, namespace: str, kind: str, names: list[str]) -> dict[str, list[PodEvent]]:
    """``{name: [Warning events, newest first, at most 10]}`` of the objects ``names`` of ``kind``: one list call
    with the field selector ``involvedObject.kind=<kind>,type=Warning``, at most :data:`WARNING_EVENTS_LIMIT`
    events (the first page; a namespace with more Warning events of that kind loses the rest)."""
    wanted = set(names)
    if not wanted:
        return {}
    raw = kube.read_json(
        kube.core.list_namespaced_event,
        namespace,
        field_selector=f"involvedObject.kind={kind},type=Warning",
        limit=WARNING_EVENTS_LIMIT,
        what="events",
    )
    out: dict[str, list[PodEvent]] = {}
    for ev in raw.get("items") or []:
        target = (ev.get("involvedObject") or {}).get("name")
        if target in wanted:
            out.setdefault(target, []).append(pod_event(ev, "Warning"))
    for target, evs in out.items():
        evs.sort(key=lambda e: e.last_time.timestamp() if e.last_time else 0.0, reverse=True)
        out[target] = evs[:10]
    return out


def watch_pods(
    kube: KubeApi, namespace: str, job: str, resource_version: str = "", timeout_seconds: int = 30
) -> Iterator[tuple[str, Any, str]]:
    """Yield ``("RELIST", [PodInfo...], rv)`` first (and again after ``410 Gone``), then
    ``(ADDED|MODIFIED|DELETED, PodInfo, rv)`` until ``timeout_seconds`` pass (one job's Pods)."""
    for kind, payload, rv in watch_raw(
        kube, kube.core.list_namespaced_pod, namespace, f"rlinf.io/job={job}", resource_version, timeout_seconds
    ):
        if kind == "RELIST":
            yield kind, [pod_info(p) for p in payload], rv
        elif kind != "BOOKMARK":
            yield kind, pod_info(payload), rv


def watch(
    kube: KubeApi, namespace: str, kind: str, selector: str, resource_version: str = "", timeout_seconds: int = 300
) -> Iterator[WatchEvent]:
    """Watch ``pods`` or ``statefulsets`` ``selector`` selects in ``namespace``, with bookmarks
    (``allowWatchBookmarks``); resumes from ``resource_version`` and relists on ``410 Gone``."""
    fn = {"pods": kube.core.list_namespaced_pod, "statefulsets": kube.apps.list_namespaced_stateful_set}[kind]
    for etype, payload, rv in watch_raw(kube, fn, namespace, selector, resource_version, timeout_seconds):
        if etype == "RELIST":
            objects = tuple(
                (((o.get("metadata") or {}).get("labels") or {}).get("rlinf.io/job", ""), o["metadata"]["name"])
                for o in payload
            )
            yield WatchEvent("RELIST", kind, resource_version=rv, objects=objects)
        elif etype == "BOOKMARK":
            yield WatchEvent("BOOKMARK", kind, resource_version=rv)
        else:
            meta = payload.get("metadata") or {}
            yield WatchEvent(etype, kind, (meta.get("labels") or {}).get("rlinf.io/job", ""), meta.get("name", ""), rv)


def watch_raw(
    kube: KubeApi, fn: Callable, namespace: str, selector: str, resource_version: str, timeout_seconds: int
) -> Iterator[tuple[str, Any, str]]:
    """``("RELIST", [raw objects], rv)`` when there is no resourceVersion (start, ``410 Gone``), then
    ``(type, raw object, rv)`` per event, ``BOOKMARK`` included, until ``timeout_seconds`` pass."""
    deadline = time.monotonic() + timeout_seconds
    rv = resource_version
    while time.monotonic() < deadline:
        if not rv:
            listing = kube.read_json(fn, namespace, label_selector=selector, what="watch list")
            rv = (listing.get("metadata") or {}).get("resourceVersion", "")
            yield "RELIST", listing.get("items") or [], rv
        remaining = max(1, int(deadline - time.monotonic()))
        resp = kube.call(
            fn,
            namespace,
            label_selector=selector,
            watch=True,
            allow_watch_bookmarks=True,
            resource_version=rv,
            timeout_seconds=remaining,
            _preload_content=False,
            timeout=(timeouts()[0], remaining + 5),
            what="watch",
        )
        gone = False
        try:
            for etype, obj in _events(resp):
                if etype == "ERROR":
                    if obj.get("code") == 410:
                        gone = True
                        break
                    raise RuntimeFailure(f"watch failed: {obj.get('message')}", "internal")
                rv = (obj.get("metadata") or {}).get("resourceVersion", rv)
                yield etype, obj, rv
        finally:
            abandon(resp)
        if gone:
            rv = ""  # 410 Gone: relist
        elif time.monotonic() >= deadline:
            return


def _events(resp: Any) -> Iterator[tuple[str, dict]]:
    """``(type, object)`` of each line of a watch response, as the lines arrive."""
    buf = b""
    for chunk in resp.stream(65536):
        buf += chunk
        while b"\n" in buf:
            line, buf = buf.split(b"\n", 1)
            if not line.strip():
                continue
            event = json.loads(line)
            yield event.get("type", ""), event.get("object") or {}


def metrics(kube: KubeApi, namespace: str, selector: str) -> dict[str, dict[str, float]] | None:
    """``{pod: {"cpu": cores, "memory": bytes}}`` from ``metrics.k8s.io``; None when the cluster has no metrics
    API (or RBAC does not allow it)."""
    try:
        data = kube.read_json(
            k8s.CustomObjectsApi(kube.api).list_namespaced_custom_object,
            "metrics.k8s.io",
            "v1beta1",
            namespace,
            "pods",
            label_selector=selector,
            what="pod metrics",
        )
    except RuntimeFailure as exc:
        if exc.reason in ("not_found", "forbidden"):
            return None
        raise
    out: dict[str, dict[str, float]] = {}
    for item in data.get("items") or []:
        cpu = mem = 0.0
        for c in item.get("containers") or []:
            cpu += number((c.get("usage") or {}).get("cpu", 0))
            mem += number((c.get("usage") or {}).get("memory", 0))
        out[item["metadata"]["name"]] = {"cpu": cpu, "memory": mem}
    return out
