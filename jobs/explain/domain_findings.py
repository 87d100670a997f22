"""Diagnosis rule: the roles are in different clusters and the job has no network domain.

When a Worker keeps waiting for the Ray head (``head_unreachable``), and the job's Tasks run in more than one
cluster, and the job has no ``spec.domain``, the cause is known: clusters do not reach each other's Workers, so the
head's address is unreachable by construction. The job gets one ``cross_cluster_no_domain`` error naming the head's
address (as the Worker's wrapper printed it) and the clusters, instead of a generic timeout.

``jobs.explain.diagnosis`` imports this module (never the other way) and registers :data:`TEXT` / :data:`DETAIL`
(English msgids; their Chinese is in the zh_Hans catalog of ``jobs``).
"""

from __future__ import annotations

from django.utils.translation import gettext_noop

CODE = "cross_cluster_no_domain"
TRIGGER = "head_unreachable"
TEXT = (
    gettext_noop(
        "The Workers cannot reach the Ray head: the roles are in different clusters and the job has no network domain"
    ),
    gettext_noop("A cross-cluster job without a network domain"),
    gettext_noop(
        "Choose a cross-cluster network domain for the job (spec.domain) and restart it, or put every role in one"
        " cluster."
    ),
)
DETAIL = gettext_noop(
    "The Workers cannot reach the Ray head at {address}; the roles are in different clusters ({clusters}) and the"
    " job has no network domain."
)


def job_clusters(job) -> list[str]:
    return sorted(set(job.tasks.values_list("cluster__name", flat=True)))


def applies(job, clusters: list[str]) -> bool:
    return len(clusters) > 1 and not str(((job.spec or {}).get("spec") or {}).get("domain") or "")
