"""Diagnosis rule: a Worker's node is under pressure.

For each Worker Pod of the job placed on a node, the node's stored conditions (``clusters.node_health``)
are read; a ``DiskPressure`` / ``MemoryPressure`` / ``PIDPressure`` / ``NetworkUnavailable`` that is True, or a
Ready that is not True, becomes a ``node_condition`` warning naming the Worker, its node and the conditions,
with the node's latest Warning event as evidence. One query for all the job's nodes.

``jobs.explain.diagnosis`` imports this module (never the other way): it registers :data:`TEXT` and
:data:`DETAIL` (English msgids; their Chinese is in the zh_Hans catalog of ``jobs``) and turns each
:class:`NodeProblem` into a ``node_condition`` Finding in ``diagnose_job``.
"""

from __future__ import annotations

from dataclasses import dataclass

from django.utils.translation import gettext_noop

from clusters.models import Node
from clusters.node_health import problems
from jobs.models import Pod

CODE = "node_condition"
TEXT = (
    gettext_noop("The Worker's node reports a problem"),
    gettext_noop("Disk, memory, PID or network pressure on the node, or the node is not Ready"),
    gettext_noop(
        "Ask an administrator to check the node's conditions and events in the back office (Nodes); cordon it"
        " and restart the job elsewhere if needed."
    ),
)
DETAIL = gettext_noop("Node {node}: {conditions}. {event}")


@dataclass(frozen=True)
class NodeProblem:
    """One Worker Pod on a node that reports problems: ``conditions`` like ``"DiskPressure, Ready=False"``,
    ``event`` the node's latest Warning event (``"reason: message"``) or ''."""

    pod: str
    role: str
    node: str
    conditions: str
    event: str


def node_problems(job) -> list[NodeProblem]:
    """The problems of the nodes under the Workers of ``job`` (module docstring); one query for all nodes."""
    pods = list(
        Pod.objects.filter(task__job=job)
        .exclude(node="")
        .exclude(phase__in=["Succeeded", "Failed"])
        .values_list("name", "node", "task__cluster_id", "task__display_role", "task__template_name")
    )
    if not pods:
        return []
    wanted = {(cluster, node) for _name, node, cluster, _r, _t in pods}
    nodes = {
        (n.cluster_id, n.name): n
        for n in Node.objects.filter(cluster_id__in={c for c, _n in wanted}, name__in={n for _c, n in wanted})
    }
    out = []
    for name, node_name, cluster_id, display_role, template in pods:
        node = nodes.get((cluster_id, node_name))
        found = problems(node.conditions) if node is not None else []
        if not found:
            continue
        latest = (node.events or [None])[0]
        event = f"{latest['reason']}: {latest['message']}" if latest else ""
        out.append(NodeProblem(name, display_role or template, node_name, ", ".join(found), event))
    return out
