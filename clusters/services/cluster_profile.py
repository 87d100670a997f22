"""What a cluster's back-office page shows besides its settings.

- Health history: ``Cluster.last_sync_at``, ``last_error``/``last_error_at`` and ``offline_since`` (written by
  ``clusters.services.node_sync``), and the finished :class:`~clusters.models.ClusterOutage` periods.
- Namespaces and StorageClasses: as the cluster reports them, each marked as managed by the console or only in
  the cluster (``clusters.services.cluster_contents``); a cluster that cannot be read says so.
- Images: the images its nodes report having pulled (Kubernetes ``status.images``; the local runtime reports
  none), each with the number of nodes that have it.
"""

from __future__ import annotations

from collections import Counter

from django.utils import timezone
from django.utils.html import format_html, format_html_join
from django.utils.safestring import mark_safe
from django.utils.translation import gettext as _
from django.utils.translation import ngettext

from clusters.models import Cluster
from clusters.services import cluster_contents


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
    return format_html_join(mark_safe("<br>"), '{} → {} <span class="help">{}</span>', rows) or _("none")


def _where_label(where: str) -> str:
    return {
        "managed": _("managed by the console"),
        "cluster": _("only in the cluster"),
        "missing": _("console record, missing in the cluster"),
        "object": _("console record (object storage, no StorageClass needed)"),
    }[where]


def _listing_html(listing: cluster_contents.Listing, headings: tuple[str, ...], cells) -> str:
    if listing.error:
        return format_html('<p class="errornote rl-contents-error">{}</p>', listing.error)
    if not listing.rows:
        return _("none")
    head = format_html_join("", "<th>{}</th>", ((h,) for h in headings))
    body = format_html_join(
        "",
        '<tr data-where="{}">{}</tr>',
        ((r.where, format_html_join("", "<td>{}</td>", ((c,) for c in cells(r)))) for r in listing.rows),
    )
    more = format_html('<p class="help">{}</p>', _("(first %(n)d shown)") % {"n": len(listing.rows)})
    return format_html(
        '<table class="rl-contents"><thead><tr>{}</tr></thead><tbody>{}</tbody></table>{}',
        head,
        body,
        more if listing.truncated else "",
    )


def namespaces_html(listing: cluster_contents.Listing) -> str:
    return _listing_html(
        listing, (_("name"), _("where")), lambda r: (format_html("<code>{}</code>", r.name), _where_label(r.where))
    )


def storage_classes_html(listing: cluster_contents.Listing) -> str:
    def cells(r: cluster_contents.Row) -> tuple:
        default = _("default") if r.default else ""
        claims = "" if r.claims is None else ngettext("%(n)d claim", "%(n)d claims", r.claims) % {"n": r.claims}
        return (
            format_html("<code>{}</code> {}", r.name, default),
            _where_label(r.where),
            r.records or "—",
            " ".join(x for x in (r.provisioner, claims) if x) or "—",
        )

    return _listing_html(listing, (_("name"), _("where"), _("console records"), _("provisioner")), cells)


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
    return format_html_join(mark_safe("<br>"), "<code>{}</code> ×{}", rows)
