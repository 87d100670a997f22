"""Job pages: list, detail (Overview / Workers / YAML / Logs) and the lifecycle actions.

Thin views: permissions only through ``jobs.policy``; state changes only through
``jobs.control.controller``; status rows from ``jobs.observe.status``. Strings and layout
follow upstream-rlark 8.1-8.4 (zh / en), with RLark Console's real runtime, restart counts
and YAML tab. Lists and status panels refresh every 10 s with htmx (paused while the browser
tab is hidden).
"""

from __future__ import annotations

import re
from datetime import datetime
from typing import Any

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.core.paginator import Paginator
from django.db.models import Q
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils.translation import gettext as _
from django.views.decorators.http import require_GET, require_POST

from clusters.models import Node
from clusters.runtime.base import RuntimeFailure
from jobs import policy
from jobs.control import controller, lifecycle, log_archive, safety
from jobs.explain.pending import job_pending_reasons
from jobs.jobspec import conditions as conditions_spec
from jobs.jobspec.document import render_yaml
from jobs.jobspec.layout import display_role_of
from jobs.models import Job, Phase, Pod
from jobs.observe.headline import job_headline, worker_phase, worker_phase_label
from jobs.observe.job_list import WorkerCounts, worker_counts
from jobs.observe.progress import percent_of, progress_text
from jobs.observe.state_words import state_label
from jobs.observe.status import (
    DEFAULT_TAIL,
    format_duration,
    localized_message,
    read_worker_log,
    runtime_seconds,
    worker_rows,
)
from jobs.web.safety_views import safety_section
from rlark_console import language
from rlark_console.redirects import safe_next

PAGE_SIZES = (10, 20, 50)
ANSI = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]|\x1b\][^\x07]*\x07|\x01|\x02")
ACTIONS = lifecycle.ACTIONS


def _page_size(request: HttpRequest) -> int:
    try:
        size = int(request.GET.get("size", 20))
    except ValueError:
        size = 20
    return size if size in PAGE_SIZES else 20


@login_required
@require_GET
def job_list(request: HttpRequest) -> HttpResponse:
    """``/jobs/``: filters ``phase`` and ``q`` (name or display name), ``page``/``size`` (10/20/50).

    With ``HX-Request`` only the table is rendered (auto-refresh every 10 s).
    """
    qs = policy.visible_jobs(request.user).select_related("owner")
    phase = request.GET.get("phase", "")
    if phase in Phase.values:
        qs = qs.filter(phase=phase)
    query = request.GET.get("q", "").strip()
    if query:
        qs = qs.filter(Q(name__icontains=query) | Q(display_name__icontains=query))
    paginator = Paginator(qs.order_by("-created_at"), _page_size(request))
    page = paginator.get_page(request.GET.get("page"))
    counts = worker_counts(job.pk for job in page.object_list)  # only the page's Tasks
    rows = []
    for job in page.object_list:
        count = counts.get(job.pk, WorkerCounts())
        job.roles = count.roles
        headline = job_headline(job, count.ready, count.total)
        rows.append(
            {
                "job": job,
                "ready": headline.ready,  # the bar and the counts come from one headline
                "total": headline.total,
                "percent": headline.percent,
                "headline": headline,
                "runtime": format_duration(runtime_seconds(job)),
                "progress": progress_text(job),  # stored by the sync: no query, no log read
                "progress_percent": percent_of(job),
                "terminal": lifecycle.finished(job),
                "refused": refusals(job),
                "message": localized_message(job.message),
            }
        )
    params = request.GET.copy()
    params.pop("page", None)
    context = {
        "rows": rows,
        "page": page,
        "phase": phase,
        "q": query,
        "size": _page_size(request),
        "sizes": PAGE_SIZES,
        "phases": [(p, state_label(p)) for p in Phase.values],  # the one table of state words
        "base_query": params.urlencode(),
        "refresh_url": request.get_full_path(),
    }
    template = "jobs/_list_table.html" if request.headers.get("HX-Request") else "jobs/list.html"
    return render(request, template, context)


def _spec_summary(job: Job) -> dict[str, Any]:
    """What the Overview shows of the stored document: roles, start command, shared settings, env."""
    spec = job.spec_section
    roles = []
    run_script = tensorboard = ""
    env: list[dict[str, str]] = []
    for index, template in enumerate(spec.get("tasks") or []):
        if not isinstance(template, dict):
            continue
        workload = (template.get("kubernetes") or {}).get("workload") or {}
        pod_spec = (workload.get("template") or {}).get("spec") or {}
        containers = pod_spec.get("containers") or [{}]
        main = next((c for c in containers if c.get("name") == "main"), containers[0])
        resources = main.get("resources") or {}
        requests = {**(resources.get("limits") or {}), **(resources.get("requests") or {})}
        accel = {k: v for k, v in requests.items() if k not in ("cpu", "memory") and str(v) not in ("0", "")}
        selector = template.get("nodeSelector") or {}
        if isinstance(selector, dict):
            selector = ", ".join(f"{k}={v}" for k, v in selector.items())
        role_env = [
            {"name": e.get("name", ""), "value": e.get("value", "")}
            for e in main.get("env") or []
            if isinstance(e, dict) and e.get("name") != "RLARK_TASK_ROLE"
        ]
        if index == 0:
            env = role_env
        if template.get("head"):
            run_script = template.get("runScript") or ""
            tensorboard = template.get("tensorBoardDir") or ""
        roles.append(
            {
                "template": template.get("name", ""),
                "display": _role_name(template),
                "head": bool(template.get("head")),
                "cluster": template.get("cluster", ""),
                "replicas": _replicas(workload),
                "image": main.get("image", ""),
                "selector": selector,
                "accelerators": ", ".join(f"{k}: {v}" for k, v in accel.items()),
                "cpu": requests.get("cpu", ""),
                "memory": requests.get("memory", ""),
                "mounts": [m.get("mountPath", "") for m in main.get("volumeMounts") or [] if isinstance(m, dict)],
                "prepare": template.get("prepareScript") or "",
            }
        )
    return {
        "roles": roles,
        "run_script": run_script,
        "tensorboard": tensorboard,
        "domain": spec.get("domain") or "",
        "env": env,
        "ssh_keys": len(spec.get("sshPublicKeys") or []),
    }


def _replicas(workload: dict) -> int:
    value = workload.get("replicas")
    return 1 if value is None else int(value)


def _role_name(template: dict) -> str:
    return display_role_of(template)


def _render_yaml(job: Job) -> str:
    return render_yaml(job.spec)


def _detail_context(request: HttpRequest, job: Job, tab: str) -> dict[str, Any]:
    tasks = list(job.tasks.select_related("cluster").prefetch_related("pods").order_by("order"))
    workers = worker_rows(job, tasks)
    headline = job_headline(job, sum(1 for w in workers if w["ready"]), len(workers))
    head = next((w for w in workers if w["head"]), None)
    nodes = {}
    if workers:
        clusters = {t.cluster_id for t in tasks}
        nodes = {n.name: n for n in Node.objects.filter(cluster_id__in=clusters)}
    for w in workers:
        node = nodes.get(w["node"])
        w["node_category"] = node.category if node else ""
        w["phase"] = worker_phase(job, w["phase"])  # a Succeeded job's Workers are Completed, not Stopped
        w["ready"] = w["ready"] and not headline.ended
        w["phase_label"] = worker_phase_label(w["phase"])
        w["message_text"] = localized_message(w["message"])  # the Pod's: ours translated, Kubernetes' as it is
    for t in tasks:
        t.message_text = localized_message(t.message)  # the Task table's message column, in the page's language
    summary = _spec_summary(job)
    clusters = sorted({t.cluster.name for t in tasks}) or sorted({r["cluster"] for r in summary["roles"]})
    conditions = [
        {
            **c,
            "since": _parse_time(c.get("lastTransitionTime")),
            "text": localized_message(c.get("message", "")),
            "type_label": conditions_spec.type_label(c.get("type", "")),
            "status_label": conditions_spec.status_label(c.get("status", "")),
        }
        for c in job.conditions or []
    ]
    return {
        "job": job,
        "tab": tab,
        "tasks": tasks,
        "workers": workers,
        "headline": headline,
        "ready": headline.ready,
        "total": headline.total,
        "head": head,
        "summary": summary,
        "clusters": clusters,
        "runtime": format_duration(runtime_seconds(job)),
        "progress": progress_text(job),
        "terminal": lifecycle.finished(job),
        "refused": refusals(job),
        "can_change": policy.can_change_job(request.user, job),
        "synced": any(w["pod"] for w in workers),
        "conditions": conditions,
        # the Ray nodes joined against the roles' Workers (jobs.observe.ray_nodes), a line of the overview
        "ray_nodes": next((c for c in conditions if c.get("type") == "RayNodesJoined"), None),
        "message": headline.message,
        "pending": _pending_reasons(job) if tab == "overview" else [],
    }


def _pending_reasons(job: Job) -> list[dict[str, Any]]:
    """Per-role reasons a Pending job's Workers are not running (``jobs.explain.pending``)."""
    if job.phase != Phase.PENDING or job.stopped:
        return []
    lang = language.lang()
    rows = []
    for role, reasons in job_pending_reasons(job, with_logs=False).items():
        rows += [{"role": role, **r.to_dict(lang)} for r in reasons]
    return rows


def _parse_time(value: str | None):
    try:
        return datetime.fromisoformat(value) if value else None
    except ValueError:
        return None


TABS = ("overview", "workers", "yaml", "logs")


@login_required
@require_GET
def job_detail(request: HttpRequest, name: str) -> HttpResponse:
    """``/jobs/<name>/?tab=overview|workers|yaml|logs``; ``HX-Request`` renders only the live panel. A safety
    approver reads any job's page (read-only) to approve a robot job."""
    job = policy.get_job_for_review(request.user, name)
    tab = request.GET.get("tab", "overview")
    if tab not in TABS:
        tab = "overview"
    context = _detail_context(request, job, tab)
    if tab == "yaml":
        context["yaml"] = _render_yaml(job)
    if tab == "logs":
        context["log_pod"] = request.GET.get("pod") or (context["head"]["name"] if context["head"] else "")

        context["log_archive_cut"] = log_archive.cut_files(job.name)
        context["log_archive_cap"] = log_archive.cap_for(job)
    if request.headers.get("HX-Request"):
        return render(request, "jobs/_detail_live.html", context)
    context["safety"] = safety_section(request, job)
    return render(request, "jobs/detail.html", context)


@login_required
@require_GET
def job_log(request: HttpRequest, name: str) -> HttpResponse:
    """Logs tab fragment: the last ``tail`` (<= 1000 by default) lines of one Worker, HTML-escaped."""
    job = policy.get_job_for(request.user, name)
    pod = request.GET.get("pod", "")
    previous = request.GET.get("previous") in ("1", "true")
    text, error = "", ""
    try:
        text = read_worker_log(job, pod, tail=DEFAULT_TAIL, previous=previous)
    except Pod.DoesNotExist:
        raise Http404("worker not found")
    except RuntimeFailure as exc:
        if previous and exc.reason == "not_found":  # the same sentence as the full-log download's
            error = _("%(pod)s has no previous container instance.") % {"pod": pod}
        else:
            error = str(exc)
    text = ANSI.sub("", text)  # colours are rendered by the Logs tab (terminal app); here plain text
    return render(request, "jobs/_log.html", {"job": job, "pod": pod, "text": text, "error": error})


def refusals(job: Job) -> dict[str, str]:
    """``{action: why it is refused, in the page's language}`` for the actions ``jobs.control.lifecycle`` refuses
    for ``job`` now (the disabled buttons' tooltips); allowed actions are absent."""
    return {a: _(v.reason) for a, v in lifecycle.allowed_actions(job).items() if not v.allowed}


@login_required
@require_POST
def job_action(request: HttpRequest, name: str, action: str) -> HttpResponse:
    """POST ``/jobs/<name>/<stop|start|restart|delete>/`` (confirmed in a dialog on the page)."""
    if action not in ACTIONS:
        raise Http404("unknown action")
    job = policy.get_job_for(request.user, name)
    if not policy.can_change_job(request.user, job):
        raise PermissionDenied
    detail = reverse("jobs:detail", args=[job.name])
    back = safe_next(request, request.POST.get("next"), detail)
    if action == "delete":
        try:
            controller.delete(job, actor=request.user, request=request)
        except RuntimeFailure as exc:
            messages.error(request, _("Delete failed: %(msg)s") % {"msg": exc})
            return redirect(back)
        messages.success(request, _('Job "%(name)s" deleted.') % {"name": name})
        return redirect("jobs:list")
    reason = lifecycle.refusal(job, action)  # a finished job cannot be started or stopped
    if reason:
        messages.error(request, _(reason))
        return redirect(back)
    try:
        getattr(controller, action)(job, actor=request.user, request=request)
    except safety.SafetyGateClosed as exc:  # a robot job without a current safety approval: says what is missing
        messages.error(request, str(exc))
        return redirect(back)
    text = {
        "stop": _('Job "%(name)s" is stopping.'),
        "start": _('Job "%(name)s" is starting. Workers are re-created; this is not a resume from a checkpoint.'),
        "restart": _('Job "%(name)s" is restarting: every Worker is re-created.'),
    }[action]
    messages.success(request, text % {"name": name})
    return redirect(back)
