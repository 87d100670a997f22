"""Ray nodes joining, live: how many of the job's Workers have joined the Ray cluster, which are missing, and RLinf's
optional start timeout.

Seed 05-troubleshooting-jobs-workers, "Ray 只看到部分节点": "对照 Head ray status 和每个预期 Worker 的连接日志；不要只凭
Head 的 ready 文本判断集群完整". Each Worker is one Ray node (seed 01), so the count expected is the total of the roles'
replicas. The count is the larger of the Workers that joined by their logs and the Header's own Ray status (the alive
nodes its cluster check counts, ``ray_check.py``); the names are the Workers whose logs do not show it yet (none
once the head counts them all). A Worker
has joined when its log holds Ray's own ``Ray runtime started.`` (``ray start`` joined the node:
the Header's head or a Worker's node) and its Ray process has not exited since (no ``Ray worker process exited with
code``); a Pod of an earlier attempt or one that is not Running has not.

- :func:`tally_nodes` ``(job, tasks, rows) -> RayNodes``; :func:`nodes_condition` sets the Job condition
  ``RayNodesJoined`` (``True``/``AllNodesJoined`` or ``False``/``NodesMissing``, message ``Ray nodes 2/3, missing
  rollout-1 (rank 2)``).
- ``spec.startTimeout`` (seconds, optional, ``jobs.jobspec.start_timeout``): :func:`start_timeout_failure` fails the
  job (reason ``StartTimeout``) once RLinf's ``Waiting for N nodes to be ready, currently k nodes available`` has
  lasted longer (since the sync first saw it: the ``RLinfWaiting`` condition's transition time); without it the job
  stays Running and the condition names what is missing.
"""

from __future__ import annotations

import dataclasses
from datetime import datetime
from typing import Any

from jobs.jobspec.conditions import get_condition, set_condition
from jobs.jobspec.start_timeout import start_timeout_of
from jobs.models import Job, Pod, Task
from jobs.observe.sync_fetch import stale

MAX_NAMED = 8  # missing Workers named in the message; the rest are counted


@dataclasses.dataclass(frozen=True)
class RayNodes:
    """``joined``/``expected`` Ray nodes; ``missing``: ``<role>-<ordinal> (rank <r>)`` of each expected Worker that has
    not joined, in rank order; ``rlinf_waiting``: RLinf's last ``(N, k)`` while it waits (None: not waiting)."""

    joined: int
    expected: int
    missing: list[str]
    rlinf_waiting: tuple[int, int] | None = None

    def message(self) -> str:
        """``Ray nodes 2/3, missing rollout-1 (rank 2)`` (at most ``MAX_NAMED`` names, then ``+N``)."""
        text = f"Ray nodes {self.joined}/{self.expected}"
        if self.missing:
            more = len(self.missing) - MAX_NAMED
            text += ", missing " + ", ".join(self.missing[:MAX_NAMED]) + (f" +{more}" if more > 0 else "")
        return text


def _signals(row: Pod) -> dict[str, Any]:
    return (row.container_state or {}).get("signals") or {}


def has_joined(row: Pod) -> bool:
    """The Worker of ``row`` is a Ray node now: Running, Ray started in its log and its Ray process not exited."""
    signals = _signals(row)
    return row.phase == "Running" and bool(signals.get("rayStarted")) and signals.get("rayExit") is None


def tally_nodes(job: Job, tasks: list[Task], rows: dict[int, dict[str, Pod]]) -> RayNodes:
    """The Ray nodes of ``job``: ``rows`` Task id -> Pod name -> row (a Pod of an earlier attempt never counts)."""
    joined = expected = 0
    missing: list[str] = []
    waiting: tuple[int, int] | None = None
    for task in sorted(tasks, key=lambda t: t.rank_start):
        by_ordinal = {p.ordinal: p for p in rows.get(task.pk, {}).values() if not stale(job.started_at, p.created_at)}
        role = task.template_name
        for ordinal in range(task.replicas):
            expected += 1
            row = by_ordinal.get(ordinal)
            if row is not None and has_joined(row):
                joined += 1
            else:
                missing.append(f"{role}-{ordinal} (rank {task.rank_start + ordinal})")
            w = _signals(row).get("rlinfWaiting") if row is not None else None
            if isinstance(w, list) and len(w) == 2 and waiting is None:
                waiting = (int(w[0]), int(w[1]))
    # the Header's own Ray status (its cluster check's alive count) while its Workers' logs have not all been read
    alive = max(
        (
            int(a)
            for t in tasks
            if t.head
            for p in rows.get(t.pk, {}).values()
            if not stale(job.started_at, p.created_at) and (a := _signals(p).get("rayAlive")) is not None
        ),
        default=0,
    )
    if alive > joined:
        joined = min(alive, expected)
        missing = missing if joined < expected else []
    return RayNodes(joined, expected, missing, waiting)


def nodes_condition(conditions: list[dict], nodes: RayNodes, now: datetime) -> list[dict]:
    """``RayNodesJoined`` (True when every expected Worker joined) and ``RLinfWaiting`` (True while RLinf waits for
    nodes; its transition time is when the wait began)."""
    ok = nodes.expected > 0 and not nodes.missing
    conditions = set_condition(
        conditions, "RayNodesJoined", ok, "AllNodesJoined" if ok else "NodesMissing", nodes.message(), now
    )
    if nodes.rlinf_waiting is not None:
        n, k = nodes.rlinf_waiting
        message = f"RLinf waits for {n} nodes; {k} available"
        conditions = set_condition(conditions, "RLinfWaiting", True, "WaitingForNodes", message, now)
    elif get_condition(conditions, "RLinfWaiting"):
        conditions = set_condition(conditions, "RLinfWaiting", False, "NodesReady", "", now)
    return conditions


def start_timeout_failure(job: Job, conditions: list[dict], nodes: RayNodes, now: datetime) -> str | None:
    """The failure message when RLinf has waited for nodes longer than the job's ``spec.startTimeout``, else None."""
    timeout = start_timeout_of(job.spec_section)
    waiting = get_condition(conditions, "RLinfWaiting")
    if timeout is None or nodes.rlinf_waiting is None or not waiting or waiting.get("status") != "True":
        return None
    since = datetime.fromisoformat(waiting["lastTransitionTime"])
    if (now - since).total_seconds() < timeout:
        return None
    n, k = nodes.rlinf_waiting
    return f"RLinf waited more than startTimeout ({timeout} s) for {n} nodes, {k} available: {nodes.message()}"
