"""Read models for the Overview page (plain data for the template)."""

from __future__ import annotations

from django.db.models import Count, Q

from accounts.policy import visible_jobs
from clusters.models import Cluster
from jobs.models import Phase


def overview_context(user) -> dict:
    """``{"clusters": [...], "phase_counts": {phase: n}, "recent_jobs": [...], "totals": {...}}``."""
    clusters = Cluster.objects.annotate(
        node_count=Count("nodes"),
        online_count=Count("nodes", filter=Q(nodes__online=True)),
        cordoned_count=Count("nodes", filter=Q(nodes__unschedulable=True)),
    ).prefetch_related("nodes")
    cluster_rows = []
    for cluster in clusters:
        gpus_total = 0
        gpus_free = 0
        for node in cluster.nodes.all():
            for key, value in node.capacity.items():
                if key.endswith("/gpu"):
                    gpus_total += int(value)
                    free = node.allocatable.get(key, value) - node.used.get(key, 0)
                    gpus_free += max(0, int(free))
        cluster_rows.append(
            {
                "cluster": cluster,
                "nodes": list(cluster.nodes.all()),
                "gpus_total": gpus_total,
                "gpus_free": gpus_free,
            }
        )
    jobs = visible_jobs(user)
    counts = dict(jobs.values_list("phase").annotate(n=Count("id")).values_list("phase", "n"))
    phase_counts = [(value, label, counts.get(value, 0)) for value, label in Phase.choices]
    return {
        "clusters": cluster_rows,
        "phase_counts": phase_counts,
        "recent_jobs": list(jobs.select_related("owner")[:10]),
        "job_total": sum(counts.values()),
    }
