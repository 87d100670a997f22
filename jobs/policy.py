"""The one permission policy for jobs, used by pages, the REST API and websocket consumers.

Rule: admins (staff) see and act on every job; other users
only on their own. A job the user may not see is reported as not found (404), so
other users' job names do not leak.
"""

from __future__ import annotations

from django.db.models import QuerySet
from django.http import Http404
from django.utils.translation import gettext as _

from jobs.models import Job


def visible_jobs(user) -> QuerySet[Job]:
    """Jobs ``user`` may see: every job for staff, else only their own; none when anonymous."""
    if not getattr(user, "is_authenticated", False):
        return Job.objects.none()
    qs = Job.objects.all()
    return qs if user.is_staff else qs.filter(owner=user)


def can_view_job(user, job: Job) -> bool:
    """True when ``user`` may read ``job`` (its pages, status, logs, terminal)."""
    if not getattr(user, "is_authenticated", False) or not user.is_active:
        return False
    return bool(user.is_staff or job.owner_id == user.pk)


def can_change_job(user, job: Job) -> bool:
    """True when ``user`` may edit/stop/start/restart/delete ``job`` (same rule as viewing)."""
    return can_view_job(user, job)


def get_job_for(user, name: str) -> Job:
    """The job called ``name`` if ``user`` may see it; raises ``Http404`` otherwise."""
    job = Job.objects.filter(name=name).select_related("owner").first()
    if job is None or not can_view_job(user, job):
        raise Http404(_("Job not found."))  # the API's 404 detail, in the request's language
    return job


def get_job_for_review(user, name: str) -> Job:
    """Like :func:`get_job_for`, and also for a safety approver (permission ``jobs.approve_robot_job``): they read
    any job's page and approve robot jobs (``jobs.control.safety``), but change nothing else (:func:`can_change_job`
    stays owner or staff). Raises ``Http404`` otherwise."""
    job = Job.objects.filter(name=name).select_related("owner").first()
    if job is not None and can_view_job(user, job):
        return job
    if job is None or not (getattr(user, "is_authenticated", False) and user.is_active):
        raise Http404(_("Job not found."))
    if not user.has_perm("jobs.approve_robot_job"):  # asked only of a user who may not see the job otherwise
        raise Http404(_("Job not found."))
    return job


def can_view_log_archive(user, owner_id: int | None) -> bool:
    """True when ``user`` may read the kept logs of a deleted job owned by ``owner_id`` (same rule as
    :func:`can_view_job`: staff, or the job's owner)."""
    if not getattr(user, "is_authenticated", False) or not user.is_active:
        return False
    return bool(user.is_staff or (owner_id is not None and owner_id == user.pk))
