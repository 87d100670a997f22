"""Capacity figures of nodes computed in the database, for the back office's nodes view.

``with_capacity(queryset)`` annotates every Node with (one query for any page size, no per-row queries):

- ``gpu_total`` = capacity (else allocatable) of ``nvidia.com/gpu``; ``gpu_used`` = Σ ``nvidia.com/gpu`` requests
  of the node's non-terminal Pods (``Node.used``, written by node sync from the Pods' requests, upstream-rlark
  10.1); ``gpu_free`` = max(0, allocatable - used), 0 on a node that is not online. Numbers, so the list sorts
  by them.
- ``job_count``: distinct Jobs with a non-terminal Worker Pod on the node (``jobs.Pod.node``).

The sortable figures use the ``nvidia.com/gpu`` key (the GPU key of every cluster we know); the row's displayed
amounts use ``clusters.services.nodes.total_free`` with the node's own GPU key.
"""

from __future__ import annotations

from django.db.models import Case, Count, F, FloatField, IntegerField, OuterRef, QuerySet, Subquery, Value, When
from django.db.models.fields.json import KeyTextTransform
from django.db.models.functions import Cast, Coalesce, Greatest

from clusters.models import Node
from jobs.models import Pod

GPU = "nvidia.com/gpu"
TERMINAL_PHASES = ("Succeeded", "Failed")


def _number(field: str, key: str = GPU):
    return Coalesce(Cast(KeyTextTransform(key, field), FloatField()), Value(0.0))


def with_capacity(queryset: QuerySet[Node]) -> QuerySet[Node]:
    """``queryset`` annotated with ``gpu_total``, ``gpu_used``, ``gpu_free`` and ``job_count`` (module doc)."""
    jobs = (
        Pod.objects.filter(task__cluster_id=OuterRef("cluster_id"), node=OuterRef("name"))
        .exclude(phase__in=TERMINAL_PHASES)
        .order_by()
        .values("node")
        .annotate(n=Count("task__job_id", distinct=True))
        .values("n")
    )
    return queryset.annotate(
        gpu_total=Coalesce(
            Cast(KeyTextTransform(GPU, "capacity"), FloatField()), _number("allocatable"), output_field=FloatField()
        ),
        gpu_used=_number("used"),
        gpu_alloc=Coalesce(
            Cast(KeyTextTransform(GPU, "allocatable"), FloatField()), _number("capacity"), output_field=FloatField()
        ),
    ).annotate(
        gpu_free=Case(
            When(online=False, then=Value(0.0)),  # a node that is not online (or of an offline cluster) has none free
            default=Greatest(F("gpu_alloc") - F("gpu_used"), Value(0.0)),
            output_field=FloatField(),
        ),
        job_count=Coalesce(Subquery(jobs, output_field=IntegerField()), Value(0)),
    )


def jobs_on_node(node: Node) -> list[str]:
    """Names of the Jobs with a non-terminal Worker Pod on ``node`` (sorted)."""
    names = (
        Pod.objects.filter(task__cluster_id=node.cluster_id, node=node.name)
        .exclude(phase__in=TERMINAL_PHASES)
        .values_list("task__job__name", flat=True)
        .distinct()
    )
    return sorted(set(names))
