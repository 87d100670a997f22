"""What a cluster's back-office page shows besides its settings (issue 15 point 6).

- Health history: ``Cluster.last_sync_at``, ``last_error``/``last_error_at`` and ``offline_since`` (written by
  ``clusters.services.node_sync``), and the finished :class:`~clusters.models.ClusterOutage` periods.
- Namespaces: the console's own namespace (its RBAC reads no other) and the namespaces of the cluster's Tasks.
- StorageClasses: the ones registered for the cluster (``storage.StorageClass``).
- Images: the images its nodes report having pulled (Kubernetes ``status.images``; the local runtime reports
  none), each with the number of nodes that have it.
"""

from __future__ import annotations

from collections import Counter

from django.utils import timezone
from django.utils.html import format_html, format_html_join
from django.utils.translation import gettext as _

from clusters.models import Cluster
from jobs.models import Task


def _when(value) -> str:
    return timezone.localtime(value).strftime("%Y-%m-%d %H:%M:%S") if value else "—"


def offline_periods(cluster: Cluster, limit: int = 20) -> list[dict]:
    """``[{"from", "to", "minutes", "reason"}]``, newest first; an ongoing outage first with ``to`` None."""
    out = []
    if cluster.offline_since:
        out.append({"from": cluster.offline_since, "to": None, "minutes": None, "reason": cluster.last_error})
    for o in cluster.outages.all()[:limit]:
        minutes = round((o.ended_at - o.started_at).total_seconds() / 60, 1)
        out.append({"from": o.started_at, "to": o.ended_at, "minutes": minutes, "reason": o.reason})
    return out


def offline_periods_html(cluster: Cluster) -> str:
    rows = [
        (_when(p["from"]), _when(p["to"]) if p["to"] else _("ongoing"), p["reason"][:200])
        for p in offline_periods(cluster)
    ]
    return format_html_join(format_html("<br>"), '{} → {} <span class="help">{}</span>', rows) or _("none")


def namespaces(cluster: Cluster) -> list[str]:
    names = set(Task.objects.filter(cluster=cluster).values_list("namespace", flat=True).distinct()[:100])
    return sorted({cluster.namespace, *(n for n in names if n)})


def namespaces_html(cluster: Cluster) -> str:
    return format_html_join(" ", "<code>{}</code>", ((n,) for n in namespaces(cluster)))


def storage_classes_html(cluster: Cluster) -> str:
    rows = cluster.storage_classes.values_list("name", "provider", "description")
    return format_html_join(format_html("<br>"), "<code>{}</code> {} {}", rows) or _("none")


def images(cluster: Cluster, limit: int = 100) -> list[tuple[str, int]]:
    """``[(image, nodes that have it)]``, most common first."""
    counts: Counter[str] = Counter()
    for names in cluster.nodes.filter(system=False).values_list("images", flat=True):
        counts.update(names or [])
    return counts.most_common(limit)


def images_html(cluster: Cluster) -> str:
    rows = images(cluster)
    if not rows:
        return _("not reported by this runtime") if cluster.runtime == Cluster.Runtime.LOCAL else _("none reported")
    return format_html_join(format_html("<br>"), "<code>{}</code> ×{}", rows)
