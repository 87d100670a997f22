"""Diagnosis, Run check and Metrics tabs of a Job. Thin views over ``jobs.explain`` and ``jobs.observe``.

URLs (registered in ``jobs.web.urls`` before ``<name>/<action>/``):

- ``/jobs/<name>/diagnosis/``: per-Worker stage timeline, classified findings with seed 05 next steps, pending
  reasons per role (``jobs.explain.diagnosis``, ``jobs.explain.pending``);
- ``/jobs/<name>/run-check/``: the five checks of seed 02 with evidence; POST saves the per-job settings
  (owner/admin only, audited); ``/jobs/<name>/run-check/record.md`` downloads the Markdown run record;
- ``/jobs/<name>/metrics/``: runtime, restarts, Pod age, CPU/memory per Worker, TensorBoard scalars.
"""

from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import path
from django.utils import timezone
from django.utils.translation import gettext as _
from django.views.decorators.http import require_GET, require_http_methods

from accounts.audit import record
from jobs import policy
from jobs.explain import diagnosis as diagnosis_service
from jobs.explain import runcheck as runcheck_service
from jobs.explain.metric_charts import metric_chart_context
from jobs.observe import log_scans, run_links
from jobs.observe import metrics as metrics_service
from jobs.observe.headline import worker_phase, worker_phase_label
from jobs.observe.resolved_config import resolved_config
from jobs.observe.status import format_duration
from rlark_console import language


def _base(request: HttpRequest, job, tab: str) -> dict:
    return {"job": job, "tab": tab, "can_change": policy.can_change_job(request.user, job)}


def _scan_age(as_of, refreshing: bool) -> dict | None:
    """How old the stored log scans a page shows are (``jobs.observe.log_scans``), for ``jobs/_scan_age.html``."""
    if as_of is None:
        return None
    age = max(0, int((timezone.now() - as_of).total_seconds()))
    return {"as_of": as_of, "age": format_duration(age), "refreshing": refreshing}


@login_required
@require_GET
def diagnosis(request: HttpRequest, name: str) -> HttpResponse:
    """Diagnosis tab."""
    job = policy.get_job_for(request.user, name)
    lang = language.lang()
    patterns = runcheck_service.job_log_patterns(job)
    result, reasons, scans = diagnosis_service.diagnosis_and_pending(job, patterns)
    context = _base(request, job, "diagnosis")
    diag = result.to_dict(lang)
    for w in diag.get("workers") or []:  # the same name for a finished Worker as every other tab
        w["phase_label"] = worker_phase_label(worker_phase(job, w.get("phase") or "")) if w.get("phase") else ""
    context.update(
        {
            "diag": diag,
            "pending": {role: [r.to_dict(lang) for r in items] for role, items in reasons.items() if items},
            "show_pending": job.phase in ("Pending", "Running") and not job.stopped,
            "scan_age": _scan_age(scans.as_of, scans.refreshing),
        }
    )
    return render(request, "jobs/diagnosis.html", context)


@login_required
@require_http_methods(["GET", "POST"])
def run_check(request: HttpRequest, name: str) -> HttpResponse:
    """Run check tab; POST saves the settings form."""
    job = policy.get_job_for(request.user, name)
    errors: dict[str, str] = {}
    form = runcheck_service.settings_of(job.run_check)
    if request.method == "POST":
        if not policy.can_change_job(request.user, job):
            raise PermissionDenied
        data = {
            "progress_pattern": request.POST.get("progress_pattern", ""),
            "app_patterns": request.POST.get("app_patterns", ""),
            "output_path": request.POST.get("output_path", ""),
            "max_wait_minutes": request.POST.get("max_wait_minutes", ""),
        }
        try:
            cleaned = runcheck_service.clean_settings(data)
        except runcheck_service.SettingsError as exc:
            errors[exc.field] = str(exc)
            form = {**form, **data, "app_patterns": str(data["app_patterns"]).splitlines()}
        else:
            job.run_check = cleaned
            job.save(update_fields=["run_check", "updated_at"])

            record(request.user, "job.run_check_settings", "job", job.name, request=request, **cleaned)
            return redirect("jobs:runcheck", name=job.name)
    lang = language.lang()
    results, age = runcheck_service.job_run_check_as_of(job, lang)
    context = _base(request, job, "runcheck")
    context.update(
        {
            "results": [r.to_dict(lang) for r in results],
            "scan_age": _scan_age(age["asOf"], age["refreshing"]),
            "form": {**form, "app_patterns_text": "\n".join(form.get("app_patterns") or [])},
            "errors": errors,
        }
    )
    return render(request, "jobs/runcheck.html", context, status=400 if errors else 200)


@login_required
@require_GET
def run_check_record(request: HttpRequest, name: str) -> HttpResponse:
    """Download the run record (seed 02 Markdown template) as ``<job>-run-check-<UTC time>.md``."""
    job = policy.get_job_for(request.user, name)
    lang = language.lang()
    results = runcheck_service.job_run_check(job, lang)
    text = runcheck_service.markdown_record(job, results, recorder=request.user.get_username(), lang=lang)
    response = HttpResponse(text, content_type="text/markdown; charset=utf-8")
    stamp = timezone.now().strftime("%Y%m%dT%H%M%SZ")
    response["Content-Disposition"] = f'attachment; filename="{job.name}-run-check-{stamp}.md"'
    return response


@login_required
@require_GET
def metrics(request: HttpRequest, name: str) -> HttpResponse:
    """Metrics tab."""
    job = policy.get_job_for(request.user, name)
    data = metrics_service.job_metrics(job)

    workers = []
    for w in data["workers"]:
        workers.append(
            {
                "w": w,
                "phase_label": worker_phase_label(w.phase),  # already the shown phase (metrics.worker_metrics)
                "age": format_duration(w.age_seconds),
                "cpu": None if w.cpu is None else f"{w.cpu:.2f}",
                "memory": metrics_service.format_bytes(w.memory),
            }
        )
    charts = [{"c": c} for c in data["tensorboard"]["charts"]]
    reasons = {
        "unset": _("No TensorBoard directory is set for this job."),
        "not_local": _(
            "The TensorBoard directory is on the cluster; the console can only read it on the local runtime."
        ),
        "no_mount": _("The TensorBoard directory is not under a host directory mount, so the console cannot read it."),
        "missing": _("The TensorBoard directory does not exist yet."),
        "empty": _("No scalars have been written yet."),
        "no_reader": _("The TensorBoard event reader is not installed."),
    }
    context = _base(request, job, "metrics")
    context.update(
        {
            "m": data,
            "runtime": format_duration(data["runtimeSeconds"]),
            "ended": job.finished_at is not None or job.stopped,  # "Ran for" once it ended
            "workers": workers,
            "charts": charts,
            "tb_reason": reasons.get(data["tensorboard"]["reason"], ""),
            "tracking_links": run_links.job_links(job, log_scans.job_scans(job, log_scans.job_tasks(job))),
            "resolved": resolved_config(job),
            **metric_chart_context(job, data),
        }
    )
    return render(request, "jobs/metrics.html", context)


urlpatterns = [
    path("<str:name>/diagnosis/", diagnosis, name="diagnosis"),
    path("<str:name>/run-check/", run_check, name="runcheck"),
    path("<str:name>/run-check/record.md", run_check_record, name="runcheck_record"),
    path("<str:name>/metrics/", metrics, name="metrics"),
]
