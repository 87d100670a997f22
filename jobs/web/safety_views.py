"""The Safety approval section of a robot job's page and its Approve form (``jobs.control.safety``).

- ``safety_section(request, job)``: the section's context, or None for a job that drives no robot and has no
  approval;
- ``POST /jobs/<name>/approve/`` (``items``: the confirmed item keys, ``stop_plan``): a safety approver who did not
  submit the job approves it as stored now; back to the job page with a message saying what is missing and,
  when refused, the form as it was sent.
"""

from __future__ import annotations

from typing import Any

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect
from django.urls import path
from django.utils.translation import gettext as _
from django.views.decorators.http import require_POST

from jobs import policy
from jobs.control import safety
from jobs.models import Job
from rlark_console import language


def safety_section(request: HttpRequest, job: Job) -> dict[str, Any] | None:
    """``{gate: gate_dict, can_approve, is_owner, max_stop_plan, draft_items, draft_plan}`` for the job page
    (the draft: a refused approval's ticked item keys and stop plan, once); None when the job is not a robot job."""
    g = safety.gate(job)
    if not g.robot:
        return None
    draft = request.session.pop(_draft_key(job), None) if hasattr(request, "session") else None
    draft = draft if isinstance(draft, dict) else {}
    return {
        "gate": safety.gate_dict(g, language.lang()),
        "can_approve": safety.can_approve(request.user, job),
        "is_owner": request.user.pk == job.owner_id,
        "max_stop_plan": safety.MAX_STOP_PLAN,
        "draft_items": [k for k in draft.get("items") or [] if k in safety.ITEMS],
        "draft_plan": str(draft.get("stop_plan") or "")[: safety.MAX_STOP_PLAN],
    }


def _draft_key(job: Job) -> str:
    """The session key of a refused approval's draft (its items and stop plan), shown again once."""
    return f"safety-draft:{job.pk}"


@login_required
@require_POST
def approve(request: HttpRequest, name: str) -> HttpResponse:
    """Record the posted approval (``items``, ``stop_plan``); refusals come back as one error message."""
    job = policy.get_job_for_review(request.user, name)
    plan = request.POST.get("stop_plan", "").replace("\r\n", "\n")
    try:
        safety.approve(job, request.user, request.POST.getlist("items"), plan, request=request)
    except safety.ApprovalRefused as exc:
        messages.error(request, " ".join(exc.errors))
        # nothing typed is lost: the form comes back with the ticked items and the stop plan (bounded)
        items = [k for k in request.POST.getlist("items")[: len(safety.ITEMS)] if k in safety.ITEMS]
        request.session[_draft_key(job)] = {"items": items, "stop_plan": plan[: safety.MAX_STOP_PLAN]}
        return redirect("jobs:detail", name=job.name)
    messages.success(
        request, _('Job "%(name)s" is approved for the real robot; its owner may start it.') % {"name": name}
    )
    return redirect("jobs:detail", name=job.name)


urlpatterns = [path("<str:name>/approve/", approve, name="approve")]
