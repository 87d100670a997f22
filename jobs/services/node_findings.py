"""Diagnosis rule: a Worker's node is under pressure (issue 15 point 4b).

For each Worker Pod of the job placed on a node, the node's stored conditions (``clusters.services.node_health``)
are read; a ``DiskPressure`` / ``MemoryPressure`` / ``PIDPressure`` / ``NetworkUnavailable`` that is True, or a
Ready that is not True, becomes a ``node_condition`` warning naming the Worker, its node and the conditions,
with the node's latest Warning event as evidence. One query for all the job's nodes.

Hooked into ``jobs.services.diagnosis.diagnose_job`` by one call (:func:`add_node_findings`).
"""

from __future__ import annotations

from jobs.services import diagnosis

diagnosis.FINDING_TEXT.setdefault(
    "node_condition",
    (
        "Worker 所在节点状态异常",
        "The Worker's node reports a problem",
        "节点磁盘、内存、进程数或网络压力，或节点未就绪",
        "Disk, memory, PID or network pressure on the node, or the node is not Ready",
        "请管理员在后台“节点”页查看该节点的状况和事件；必要时封锁节点并在其他节点重启任务。",
        "Ask an administrator to check the node's conditions and events in the back office (Nodes); cordon it"
        " and restart the job elsewhere if needed.",
    ),
)
diagnosis.DETAIL_TEXT.setdefault(
    "node_condition",
    ("节点 {node}：{conditions}。{event}", "Node {node}: {conditions}. {event}"),
)


def node_findings(job) -> list[diagnosis.Finding]:
    """``node_condition`` findings for the Workers of ``job`` (module docstring)."""
    from clusters.models import Node
    from clusters.services.node_health import problems
    from jobs.models import Pod

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
        out.append(
            diagnosis.Finding(
                "node_condition",
                diagnosis.WARNING,
                pod=name,
                role=display_role or template,
                line=event,
                params={"node": node_name, "conditions": ", ".join(found), "event": event},
            )
        )
    return out


def add_node_findings(job, result: diagnosis.JobDiagnosis) -> diagnosis.JobDiagnosis:
    """Attach :func:`node_findings` to the matching Workers of ``result`` (job-wide when no Worker matches)."""
    by_pod = {w.worker.pod: w for w in result.workers}
    for finding in node_findings(job):
        target = by_pod.get(finding.pod)
        (target.findings if target is not None else result.job_findings).append(finding)
    return result
