"""The Pod records of the local runtime (``state["pods"]``) and how they change, as a StatefulSet's Pods would.

Semantics follow a StatefulSet with ``restartPolicy: Always`` (upstream-rlark 4.4, 4.8): Pods ``<task>-<ordinal>``;
a container that exits is restarted in place with back-off (0 s, then ``RLARK_LOCAL_BACKOFF_BASE`` s (default 10),
20 s, ... capped at 300 s, reset after 600 s of running; ``restartCount`` +1; the old log kept as ``previous``).

A record: ``name``, ``cluster``, ``namespace``, ``task``, ``job``, ``ordinal``, ``uid``, ``labels``,
``template_hash``, ``phase``, ``node``, ``reason``, ``message``, ``created_at``, ``started_at``, ``container``
(``state`` waiting|running|terminated, ``reason``, ``message``, ``exit_code``, ``restart_count``, ``ready``,
``last_*`` of the previous instance), ``requests``, ``pid`` (+ ``pid_create_time``, ``port_base``, ``env``,
``workdir``, ``ip`` while it runs), ``runs``, ``backoff_n``, ``restart_at`` (epoch seconds).
"""

from __future__ import annotations

import copy
import hashlib
import json
import time
import uuid
from typing import Any

import rlark_config
from clusters.runtime.local import scheduling
from clusters.runtime.local.processes import create_time
from clusters.runtime.local.statedir import now_iso

BACKOFF_BASE = rlark_config.current().local_backoff_base
BACKOFF_MAX = 300.0
BACKOFF_RESET = 600.0
# A Worker found gone when the supervisor starts (a host reboot, or its process groups were killed): the
# container is restarted in place with this reason (``last_reason`` of the new instance); the status sync then
# bumps the job's attempt (``jobs.observe.runtime_restart``).
RUNTIME_RESTARTED = "RuntimeRestarted"
RUNTIME_RESTARTED_MESSAGE = "the local runtime restarted"
PUBLIC_FIELDS = (
    "name",
    "task",
    "ordinal",
    "uid",
    "phase",
    "node",
    "reason",
    "message",
    "created_at",
    "started_at",
    "container",
    "labels",
    "shm_size",
    "image",
    "requests",
)


def template_hash(workload: dict[str, Any]) -> str:
    """16 hex digits identifying the workload's pod template: a changed template re-creates the Pods."""
    template = (workload.get("spec") or {}).get("template") or {}
    return hashlib.sha1(json.dumps(template, sort_keys=True).encode()).hexdigest()[:16]


def new_pod(t: dict[str, Any], ordinal: int) -> dict[str, Any]:
    """The record of the Task ``t``'s Pod ``<task>-<ordinal>``, Pending, not yet placed on a node."""
    name = f"{t['task']}-{ordinal}"
    template = (t["workload"].get("spec") or {}).get("template") or {}
    labels = {
        **((template.get("metadata") or {}).get("labels") or {}),
        "statefulset.kubernetes.io/pod-name": name,
    }
    return {
        "name": name,
        "cluster": t["cluster"],
        "namespace": t["namespace"],
        "task": t["task"],
        "job": t["job"],
        "ordinal": ordinal,
        "uid": str(uuid.uuid4()),
        "labels": labels,
        "template_hash": t["template_hash"],
        "phase": "Pending",
        "node": "",
        "reason": "",
        "message": "",
        "created_at": now_iso(),
        "started_at": None,
        "container": {"state": "waiting", "reason": "ContainerCreating", "restart_count": 0, "ready": False},
        "requests": scheduling.pod_requests(template.get("spec") or {}),
        "pid": None,
        "backoff_n": 0,
        "restart_at": 0,
    }


def container_exited(pod: dict[str, Any], code: int | None, reason: str, message: str = "") -> int | None:
    """The Pod's container ended (exit ``code``, None when unknown): terminated, its restart scheduled after the
    back-off. Returns the port block base it held (to be given back), None for none."""
    c = pod["container"]
    ran = time.time() - (pod.get("container_started_ts") or time.time())
    c.update(state="terminated", reason=reason, exit_code=code, finished_at=now_iso(), ready=False, message=message)
    base = pod.get("port_base")
    pod.update(pid=None, pid_create_time=None, port_base=None, adopted=False)
    if ran >= BACKOFF_RESET:
        pod["backoff_n"] = 0
    n = pod.get("backoff_n", 0)
    delay = 0.0 if n == 0 else min(BACKOFF_BASE * 2 ** (n - 1), BACKOFF_MAX)
    pod["backoff_n"] = n + 1
    pod["restart_at"] = time.time() + delay
    return base


def back_off(pod: dict[str, Any]) -> bool:
    """While the restart waits: a terminated container shows as waiting in ``CrashLoopBackOff`` (its exit kept
    as ``last_*``). True when the record changed."""
    c = pod["container"]
    if c.get("state") != "terminated":
        return False
    c.update(last_exit_code=c.get("exit_code"), last_reason=c.get("reason", ""), exit_code=None)
    c.update(state="waiting", reason="CrashLoopBackOff")
    c["message"] = f"back-off restarting failed container main in pod {pod['name']}"
    return True


def mark_running(pod: dict[str, Any], pid: int, **running: Any) -> None:
    """The Pod's container just started as process ``pid`` (again: ``restartCount`` +1, the previous instance's
    exit kept); ``running``: ``port_base``, ``env``, ``workdir``, ``shm_size``, ``image``, ``ip``. Raises
    psutil.Error when ``pid`` is already gone."""
    c = pod["container"]
    if pod.get("runs", 0) > 0:
        if c.get("state") == "terminated":
            c["last_exit_code"] = c.get("exit_code")
            c["last_reason"] = c.get("reason", "")
            c["last_message"] = c.get("message", "")
        c["restart_count"] = c.get("restart_count", 0) + 1
    pod["runs"] = pod.get("runs", 0) + 1
    started = now_iso()
    c.update(state="running", reason="", message="", exit_code=None, ready=True, started_at=started, finished_at=None)
    pod.update(
        pid=pid,
        pid_create_time=create_time(pid),
        phase="Running",
        reason="",
        message="",
        started_at=pod.get("started_at") or started,
        container_started_ts=time.time(),
        **running,
    )


def public_pod(pod: dict[str, Any], terminating: bool) -> dict[str, Any]:
    """What ``list_pods`` / ``pod_info`` answer of a record (copies): :data:`PUBLIC_FIELDS`, ``ip`` ("" unless
    it runs), ``pid``, ``terminating`` (reason ``Terminating`` then)."""
    out = {k: copy.deepcopy(pod.get(k)) for k in PUBLIC_FIELDS}
    out["ip"] = (pod.get("ip") or "127.0.0.1") if pod.get("pid") else ""
    out["pid"] = pod.get("pid")
    out["terminating"] = terminating
    if terminating:
        out["reason"] = "Terminating"
    return out


def rank(pod: dict[str, Any], task: dict[str, Any] | None) -> int:
    """The Worker's node rank: its Task's ``rank_start`` plus its ordinal."""
    return int((task or {}).get("rank_start") or 0) + int(pod["ordinal"])
