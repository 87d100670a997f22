"""Clusters & Nodes pages (server-rendered, htmx for the selector match box). Views stay thin: data comes from
``clusters.services.nodes``; cordon/uncordon from ``clusters.services.registration.set_cordon``."""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.utils.translation import gettext as _
from django.views.decorators.http import require_GET, require_POST

from clusters.models import Cluster, Node
from clusters.runtime.base import RuntimeFailure
from clusters.runtime.local import tenancy
from clusters.selectors import SelectorError, parse_selector
from clusters.services.nodes import cluster_summary, filter_nodes, match_nodes, node_summary
from clusters.services.registration import set_cordon
from clusters.system_nodes import show_system_nodes
from rlark_console.redirects import safe_next

CATEGORIES = ("cloud", "edge", "robot", "unknown")


@login_required
@require_GET
def clusters_page(request: HttpRequest) -> HttpResponse:
    """Every cluster with its status and a filterable node table, plus the selector match box."""
    q = request.GET
    filters = {
        "cluster": q.get("cluster", "").strip(),
        "category": q.get("category", "").strip(),
        "gpu_model": q.get("gpu_model", "").strip(),
        "label": q.get("label", "").strip(),
    }
    clusters = list(Cluster.objects.prefetch_related("nodes").order_by("name"))
    all_nodes = [n for c in clusters for n in c.nodes.all()]
    for n in all_nodes:  # avoid one query per node for n.cluster
        n.cluster = next(c for c in clusters if c.pk == n.cluster_id)
    show_system = show_system_nodes(request.user, q)
    shown = filter_nodes(all_nodes, **filters, system=show_system)
    blocks = []
    single_user = tenancy.single_user()
    for c in clusters:
        if filters["cluster"] and c.name != filters["cluster"]:
            continue
        nodes = [n for n in shown if n.cluster_id == c.pk]
        summary = cluster_summary(c, list(c.nodes.all()))
        online = summary["nodes"]["online"]
        total = summary["nodes"]["total"]
        blocks.append(
            {
                "cluster": c,
                "summary": summary,
                "offline_nodes": total - online,
                "online_rate": f"{(100 * online / total):.0f}%" if total else "—",
                "nodes": [node_summary(n) for n in nodes],
                "single_user": single_user and c.runtime == Cluster.Runtime.LOCAL,
            }
        )
    context = {
        "blocks": blocks,
        "filters": filters,
        "show_system": show_system,
        "categories": CATEGORIES,
        "gpu_models": sorted({n.gpu_model for n in all_nodes if n.gpu_model and not n.system}),
        "cluster_names": [c.name for c in clusters],
        "selector": q.get("selector", ""),
        "match": _match_context(q.get("selector", "")),
    }
    return render(request, "clusters/clusters.html", context)


def _match_context(selector: str) -> dict:
    if not selector.strip():
        return {"empty": True}
    try:
        result = match_nodes(selector)
    except SelectorError as exc:
        return {"error": str(exc)}
    return {
        "result": result.as_dict(with_nodes=False),
        "names": [f"{n.cluster.name}/{n.name}" for n in result.nodes],
        # browsing may use "any of"; a job may not (jobs.jobspec.validator: node_selector_multivalue)
        "multivalue": any("," in value for value in parse_selector(selector).values()),
    }


@login_required
@require_GET
def match_box(request: HttpRequest) -> HttpResponse:
    """htmx partial: global match count and per-cluster breakdown for ``?selector=k=v,...``."""
    selector = request.GET.get("selector", "")
    return render(request, "clusters/_match.html", {"selector": selector, "match": _match_context(selector)})


@login_required
@require_POST
def node_cordon(request: HttpRequest, cluster: str, name: str, cordon: bool) -> HttpResponse:
    if not request.user.is_staff:
        raise PermissionDenied
    node = get_object_or_404(Node.objects.select_related("cluster"), cluster__name=cluster, name=name)
    try:
        set_cordon(node, cordon, actor=request.user, request=request)
    except RuntimeFailure as exc:
        messages.error(request, str(exc))
    else:
        if cordon:
            messages.success(request, _("Node “%(name)s” cordoned.") % {"name": name})
        else:
            messages.success(request, _("Node “%(name)s” uncordoned.") % {"name": name})
    return redirect(safe_next(request, request.POST.get("next"), "clusters:index"))
