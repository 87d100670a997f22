"""Read model of the Overview page (the landing page): clusters with their nodes and GPUs, the user's jobs by phase."""

from __future__ import annotations

from django.db.models import Count

from clusters.models import Cluster
from clusters.services.nodes import gpu_key, total_free
from jobs.models import Phase
from jobs.observe.progress import progress_text
from jobs.observe.state_words import state_label
from jobs.policy import visible_jobs


def overview_context(user) -> dict:
    """The Overview page's data: every cluster with its nodes and GPUs (total, free), and the jobs ``user`` may see.

    ``{"clusters": [...], "phase_counts": {phase: n}, "recent_jobs": [...], "totals": {...}}``."""
    cluster_rows = []
    for cluster in Cluster.objects.prefetch_related("nodes"):
        nodes = list(cluster.nodes.all())
        gpus = [total_free(n, gpu_key(n.capacity, n.allocatable, n.used)) for n in nodes]
        offline = cluster.status == Cluster.Status.OFFLINE  # an offline cluster shows no GPU as free
        cluster_rows.append(
            {
                "cluster": cluster,
                "nodes": nodes,
                "gpus_total": int(sum(total for total, _free in gpus)),
                "gpus_free": 0 if offline else int(sum(free for _total, free in gpus)),
            }
        )
    jobs = visible_jobs(user)
    counts = dict(jobs.values_list("phase").annotate(n=Count("id")).values_list("phase", "n"))
    phase_counts = [(value, state_label(value), counts.get(value, 0)) for value in Phase.values]
    return {
        "clusters": cluster_rows,
        "phase_counts": phase_counts,
        "recent_jobs": [_with_progress(job) for job in jobs.select_related("owner")[:10]],
        "job_total": sum(counts.values()),
    }


def _with_progress(job):
    """``job`` with ``progress_text`` set (the stored progress line, "" before the first step; no query)."""
    job.progress_text = progress_text(job)
    return job
