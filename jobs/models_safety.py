"""Safety approvals of robot jobs (seed 03-onboard-existing-rlinf-workload, § 接入真机任务前完成安全确认).

Kept in its own module (imported at the bottom of ``jobs.models``). One row per approval given; a job's approval
applies while its ``spec_hash`` equals ``jobs.jobspec.robot.spec_hash`` of the job as stored now, so an edit of
the roles, images, selectors, scripts, env or attached RLinf config makes it no longer apply (the row stays, for
the record). ``items``: the confirmed item keys (``jobs.control.safety.ITEMS``, all five); ``stop_plan``: the
approver's free text (at most ``jobs.control.safety.MAX_STOP_PLAN`` characters).

The permission ``jobs.approve_robot_job`` ("safety approver") lets a user give one; never for their own job.
"""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.utils.translation import gettext_lazy as _


class SafetyApproval(models.Model):
    """A safety approver's confirmation of the five items of seed 03 for one exact job spec."""

    job = models.ForeignKey("jobs.Job", on_delete=models.CASCADE, related_name="safety_approvals")
    approver = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, related_name="safety_approvals"
    )
    approver_name = models.CharField(_("approver"), max_length=150)
    approved_at = models.DateTimeField(_("approved at"), auto_now_add=True)
    spec_hash = models.CharField(_("spec sha256"), max_length=64)
    items = models.JSONField(_("confirmed items"), default=list)
    stop_plan = models.TextField(_("stop plan"))

    class Meta:
        app_label = "jobs"
        ordering = ["job", "-approved_at", "-id"]
        permissions = [("approve_robot_job", "Can approve real-robot jobs (safety approver)")]
        verbose_name = _("safety approval")
        verbose_name_plural = _("safety approvals")

    def __str__(self) -> str:
        return f"{self.job_id}@{self.approved_at:%Y-%m-%d %H:%M}" if self.approved_at else str(self.job_id)
