"""The Checkpoints tab of a Job and its "Resume from here" dialog. Thin views over ``jobs.observe.checkpoints``.

URLs (registered in ``jobs.web.urls`` before ``<name>/<action>/``):

- ``/jobs/<name>/checkpoints/``: every ``global_step_<N>`` of the job's runs with step, size, time and state;
  ``?resume=<container path>`` opens the resume dialog for that checkpoint (the run script it would run, editable);
- ``POST /jobs/<name>/checkpoints/resume/`` (``checkpoint``, ``run_script``): resume (owner/admin only, audited by
  the controller); an incomplete or unknown checkpoint is refused with a message (400).
"""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import path
from django.utils.translation import gettext as _
from django.views.decorators.http import require_GET, require_POST

from jobs import policy
from jobs.control import safety
from jobs.jobspec.checkpoints import MAX_PATH_CHARS, header_template, is_rlinf_command
from jobs.observe import checkpoints as checkpoint_service
from jobs.observe.metrics import format_bytes
from rlark_console import language


def _context(request: HttpRequest, job, dialog: dict | None = None, error: str = "") -> dict:
    """The tab's context: the listing (rows with their formatted size), the dialog and an error message."""
    lang = language.lang()
    listing = checkpoint_service.job_checkpoints(job)
    latest = listing.latest_complete()
    as_of = listing.as_of
    rows = [
        {"c": c, "d": c.to_dict(lang), "size": format_bytes(c.size), "latest": latest is not None and c is latest}
        for c in listing.checkpoints
    ]
    return {
        "job": job,
        "tab": "checkpoints",
        "can_change": policy.can_change_job(request.user, job),
        "listing": listing.to_dict(lang),
        "as_of": as_of,
        "rows": rows,
        "dialog": dialog,
        "error": error,
    }


def _dialog(job, checkpoint, run_script: str | None = None) -> dict:
    """What the resume dialog shows for ``checkpoint``: its path and step, the run script (as edited, else the one
    the resume would run) and whether an RLinf command was found to take ``runner.resume_dir``."""
    original = str(header_template(job.spec_section).get("runScript") or "")
    script = checkpoint_service.resume_script(job, checkpoint) if run_script is None else run_script
    return {"path": checkpoint.path, "step": checkpoint.step, "run_script": script, "rlinf": is_rlinf_command(original)}


@login_required
@require_GET
def checkpoints(request: HttpRequest, name: str) -> HttpResponse:
    """Checkpoints tab; ``?resume=<path>`` opens the resume dialog (only with the right to change the job)."""
    job = policy.get_job_for(request.user, name)
    dialog, error = None, ""
    choice = request.GET.get("resume", "")[:MAX_PATH_CHARS]
    if choice and policy.can_change_job(request.user, job):
        try:
            dialog = _dialog(job, checkpoint_service.choose(job, choice))
        except checkpoint_service.CheckpointRefused as exc:
            error = exc.message(language.lang())
    return render(request, "jobs/checkpoints.html", _context(request, job, dialog, error), status=400 if error else 200)


@login_required
@require_POST
def resume(request: HttpRequest, name: str) -> HttpResponse:
    """Resume from the posted checkpoint with the posted run script; back to the job's page."""
    job = policy.get_job_for(request.user, name)
    if not policy.can_change_job(request.user, job):
        raise PermissionDenied
    choice = request.POST.get("checkpoint", "")
    run_script = request.POST.get("run_script")
    if run_script is not None:  # a form's textarea sends CR LF line ends; bash would keep the CR
        run_script = run_script.replace("\r\n", "\n")
    try:
        checkpoint_service.resume(job, choice, run_script, actor=request.user, request=request)
    except checkpoint_service.CheckpointRefused as exc:
        error = exc.message(language.lang())
        return render(request, "jobs/checkpoints.html", _context(request, job, None, error), status=400)
    except safety.SafetyGateClosed as exc:  # a robot job runs only as approved
        messages.error(request, str(exc))
        return redirect("jobs:detail", name=job.name)
    messages.success(
        request, _('Job "%(name)s" is resuming from %(path)s in a new run.') % {"name": job.name, "path": choice}
    )
    return redirect("jobs:detail", name=job.name)


urlpatterns = [
    path("<str:name>/checkpoints/", checkpoints, name="checkpoints"),
    path("<str:name>/checkpoints/resume/", resume, name="checkpoints_resume"),
]
