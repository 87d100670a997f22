"""Diagnosis rule: the roles are in different clusters and the job has no network domain.

When a Worker keeps waiting for the Ray head (``head_unreachable``), and the job's Tasks run in more than one
cluster, and the job has no ``spec.domain``, the cause is known: clusters do not reach each other's Workers, so the
head's address is unreachable by construction. The job gets one ``cross_cluster_no_domain`` error naming the head's
address (as the Worker's wrapper printed it) and the clusters, instead of a generic timeout.

``jobs.explain.diagnosis`` imports this module (never the other way) and registers :data:`TEXT` / :data:`DETAIL`.
"""

from __future__ import annotations

CODE = "cross_cluster_no_domain"
TRIGGER = "head_unreachable"
TEXT = (
    "Worker 无法连接 Ray Head：角色分布在不同集群，且任务没有网络域",
    "The Workers cannot reach the Ray head: the roles are in different clusters and the job has no network domain",
    "跨集群任务未配置网络域",
    "A cross-cluster job without a network domain",
    "在任务中选择一个跨集群网络域（spec.domain）后重启任务；或把所有角色放到同一个集群。",
    "Choose a cross-cluster network domain for the job (spec.domain) and restart it, or put every role in one cluster.",
)
DETAIL = (
    "Worker 无法连接 {address} 上的 Ray Head；角色分布在集群 {clusters}，任务没有网络域。",
    "The Workers cannot reach the Ray head at {address}; the roles are in different clusters ({clusters}) and the"
    " job has no network domain.",
)


def job_clusters(job) -> list[str]:
    return sorted(set(job.tasks.values_list("cluster__name", flat=True)))


def applies(job, clusters: list[str]) -> bool:
    return len(clusters) > 1 and not str(((job.spec or {}).get("spec") or {}).get("domain") or "")
