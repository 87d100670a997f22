"""Node sync: mirror each cluster's nodes into the ``Node`` table (upstream-rlark 10.1-10.2).

``sync_cluster_nodes(cluster)`` is called by the Celery beat task for every cluster and right
after registration. Rules:

- One cluster's failure never affects another: every exception is caught and turns *that* cluster
  ``offline`` with the runtime's credential-free reason in ``status_message``, and its nodes ``online=False``.
  The next successful sync brings it back (``online``/``degraded``) without manual action.
- DB writes only for rows that changed: one SELECT of the cluster's nodes, then ``bulk_create`` /
  ``bulk_update`` (only the changed fields) / ``delete`` for what differs. ``last_seen`` and the cluster's
  ``last_sync_at`` are heartbeats refreshed at most every ``HEARTBEAT`` seconds, so an unchanged cluster costs
  a constant number of queries (independent of pod and node counts).
- Node fields: discovered labels/annotations; the effective ones merged with the console-owned metadata
  (console keys win, ``clusters.services.node_metadata``); ``system`` (control-plane, ``system_nodes``);
  capacity/allocatable/used (numbers: cpu cores, memory bytes, counts); GPU model (``rlark.io/gpu-model`` then
  ``rlark.io/model``), category (``rlark.io/node-category*`` labels, else ``cloud`` with a GPU, else ``unknown``),
  ``online`` = Ready, ``unschedulable`` = cordoned (shown separately).
- Cluster status after a successful list: ``online`` when every node is Ready, ``degraded`` when some are not
  (or the cluster has no nodes), with a message saying how many.

``sync_all_clusters()`` runs every cluster in turn and backs off (5 s doubling up to 60 s) from a cluster that
keeps failing, so a dead cluster neither spams nor slows the others (peers M1).
"""

from __future__ import annotations

import dataclasses
import logging
import time
from datetime import timedelta
from typing import Any

from django.db import transaction
from django.utils import timezone

from clusters.models import Cluster, ClusterOutage, Node
from clusters.runtime import registry
from clusters.runtime.base import NodeInfo, RuntimeFailure
from clusters.services.inventory import resources
from clusters.services.node_metadata import effective_fields
from clusters.system_nodes import is_system_node

logger = logging.getLogger("rlark.sync")

HEARTBEAT = timedelta(seconds=60)
SYNC_FIELDS = (
    "discovered_labels",
    "discovered_annotations",
    "labels",
    "annotations",
    "system",
    "capacity",
    "allocatable",
    "used",
    "gpu_model",
    "category",
    "online",
    "unschedulable",
    "conditions",
    "events",
    "images",
)
_failures: dict[int, tuple[int, float]] = {}  # cluster pk -> (consecutive failures, next attempt monotonic)
# Slow failures (timeouts: each attempt costs seconds of the shared sync cycle) back off inside
# sync_cluster_nodes itself: cluster pk -> (consecutive slow failures, next attempt monotonic, error, reason).
SLOW_FAILURE_SECONDS = 2.0
_slow: dict[int, tuple[int, float, str, str]] = {}


@dataclasses.dataclass
class SyncResult:
    """Outcome of one cluster's node sync."""

    cluster: str
    ok: bool
    nodes: int = 0
    created: int = 0
    updated: int = 0
    deleted: int = 0
    error: str = ""
    reason: str = ""
    skipped: bool = False  # backing off after slow failures; nothing was asked of the cluster


def get_runtime(cluster: Cluster) -> Any:
    """The cluster's runtime (``clusters.runtime.registry.runtime_for``)."""
    return registry.runtime_for(cluster)


def node_fields(info: NodeInfo, row: Node | None = None) -> dict[str, Any]:
    """The ``Node`` column values for one runtime ``NodeInfo``. The cluster's labels/annotations land in
    ``discovered_*``; the effective ``labels``/``annotations`` merge in ``row``'s console-owned metadata
    (``clusters.services.node_metadata.merge``: console keys win), so a sync never overwrites them."""
    return {
        "discovered_labels": dict(info.labels),
        "discovered_annotations": dict(info.annotations),
        **effective_fields(
            info.labels,
            info.annotations,
            row.console_labels if row is not None else {},
            row.console_annotations if row is not None else {},
            resources(info.capacity, info.allocatable),
        ),
        "capacity": dict(info.capacity),
        "allocatable": dict(info.allocatable),
        "used": dict(info.used),
        "online": bool(info.ready),
        "unschedulable": bool(info.unschedulable),
        "conditions": list(info.conditions),
        "events": list(info.events),
        "images": list(info.images),
    }


def _set_cluster(cluster: Cluster, status: str, message: str, now) -> None:
    fields = []
    if cluster.status != status:
        cluster.status = status
        fields.append("status")
    if cluster.status_message != message:
        cluster.status_message = message
        fields.append("status_message")
    if cluster.offline_since is not None:  # back after an outage: one history row
        ClusterOutage.objects.create(
            cluster=cluster, started_at=cluster.offline_since, ended_at=now, reason=cluster.last_error[:2000]
        )
        cluster.offline_since = None
        fields.append("offline_since")
    if fields or cluster.last_sync_at is None or now - cluster.last_sync_at >= HEARTBEAT:
        cluster.last_sync_at = now
        fields.append("last_sync_at")
    if fields:
        Cluster.objects.filter(pk=cluster.pk).update(**{f: getattr(cluster, f) for f in fields})


def mark_offline(cluster: Cluster, message: str) -> None:
    """Cluster ``offline`` with ``message``; its nodes ``online=False`` (at most two UPDATEs)."""
    fields = {}
    if cluster.status != Cluster.Status.OFFLINE:
        fields["status"] = cluster.status = Cluster.Status.OFFLINE
    if cluster.status_message != message:
        fields["status_message"] = cluster.status_message = message
    if fields or cluster.offline_since is None:  # health history: the last error and when the offline period began
        fields["last_error"] = cluster.last_error = message
        fields["last_error_at"] = cluster.last_error_at = timezone.now()
        if cluster.offline_since is None:
            fields["offline_since"] = cluster.offline_since = cluster.last_error_at
        Cluster.objects.filter(pk=cluster.pk).update(**fields)
        Node.objects.filter(cluster=cluster, online=True).update(online=False)


def sync_cluster_nodes(cluster: Cluster, runtime: Any = None, *, force: bool = False) -> SyncResult:
    """Sync one cluster's nodes; never raises (failures are recorded on the cluster and returned).

    A cluster whose last attempts failed *slowly* (>= ``SLOW_FAILURE_SECONDS``, i.e. timeouts) is not asked again
    for 10 s, 20 s, ... up to 60 s (``force`` ignores that): it stays offline with the same reason and the other
    clusters' sync does not pay its timeout every cycle (peers M1). Fast failures (refused, HTTP errors) are
    retried every time, so recovery shows at the next sync."""
    state = _slow.get(cluster.pk)
    if state and not force and time.monotonic() < state[1]:
        return SyncResult(cluster.name, ok=False, error=state[2], reason=state[3], skipped=True)
    started = time.monotonic()
    try:
        runtime = runtime or get_runtime(cluster)
        infos = runtime.list_nodes()
    except Exception as exc:  # never let one cluster break the loop
        if isinstance(exc, RuntimeFailure):
            message, reason = str(exc), exc.reason
            logger.warning("cluster %s offline: %s", cluster.name, message)
        else:
            message, reason = f"node sync failed: {type(exc).__name__}", "internal"
            logger.exception("cluster %s node sync failed", cluster.name)
        mark_offline(cluster, message)
        if time.monotonic() - started >= SLOW_FAILURE_SECONDS and cluster.pk is not None:
            count = (state[0] if state else 0) + 1
            _slow[cluster.pk] = (count, time.monotonic() + min(60.0, 10.0 * 2 ** (count - 1)), message, reason)
        else:
            _slow.pop(cluster.pk, None)
        return SyncResult(cluster.name, ok=False, error=message, reason=reason)
    _slow.pop(cluster.pk, None)
    return apply_node_infos(cluster, infos)


@transaction.atomic
def apply_node_infos(cluster: Cluster, infos: list[NodeInfo]) -> SyncResult:
    """Write the differences between ``infos`` and the stored nodes of ``cluster``; set the cluster status."""
    now = timezone.now()
    existing = {n.name: n for n in Node.objects.filter(cluster=cluster)}
    to_create: list[Node] = []
    to_update: list[Node] = []
    changed_fields: set[str] = set()
    seen = set()
    for info in infos:
        seen.add(info.name)
        row = existing.get(info.name)
        fields = node_fields(info, row)
        if row is None:
            to_create.append(Node(cluster=cluster, name=info.name, last_seen=now, **fields))
            continue
        changed = [f for f, v in fields.items() if getattr(row, f) != v]
        if row.last_seen is None or now - row.last_seen >= HEARTBEAT:
            changed.append("last_seen")
            row.last_seen = now
        if changed:
            for f in changed:
                if f != "last_seen":
                    setattr(row, f, fields[f])
            to_update.append(row)
            changed_fields.update(changed)
    stale = [n.pk for name, n in existing.items() if name not in seen]
    if to_create:
        Node.objects.bulk_create(to_create)
    if to_update:
        Node.objects.bulk_update(to_update, sorted(changed_fields))
    if stale:
        Node.objects.filter(pk__in=stale).delete()
    business = [i for i in infos if not is_system_node(i.labels)]  # cluster totals skip control-plane nodes
    total = len(business)
    not_ready = sum(1 for i in business if not i.ready)
    if total == 0:
        status, message = Cluster.Status.DEGRADED, "the cluster reports no nodes"
    elif not_ready:
        status, message = Cluster.Status.DEGRADED, f"{not_ready} of {total} nodes are not Ready"
    else:
        status, message = Cluster.Status.ONLINE, ""
    _set_cluster(cluster, status, message, now)
    return SyncResult(
        cluster.name, ok=True, nodes=total, created=len(to_create), updated=len(to_update), deleted=len(stale)
    )


def sync_all_clusters(force: bool = False) -> list[SyncResult]:
    """Sync every cluster, each isolated; a failing cluster is retried after 5 s, 10 s, ... up to 60 s
    (``force`` ignores the back-off)."""
    results = []
    for cluster in Cluster.objects.all():
        failures, next_try = _failures.get(cluster.pk, (0, 0.0))
        if not force and failures and time.monotonic() < next_try:
            continue
        result = sync_cluster_nodes(cluster, force=force)
        if result.ok:
            _failures.pop(cluster.pk, None)
        else:
            failures += 1
            _failures[cluster.pk] = (failures, time.monotonic() + min(60.0, 5.0 * 2 ** (failures - 1)))
        results.append(result)
    return results
