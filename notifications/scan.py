"""The events no sync produces, looked for every 15 seconds (Celery beat, ``notifications.tasks.scan``):

- ``pending_long``: a job of a rule's owner (or the rule's job) Pending for more than the rule's minutes since it
  was created, once per attempt;
- ``log_match``: a Running job's Worker log has a line matching the rule's pattern, once per attempt. The logs are
  read through the stored log scans (``jobs.observe.log_scans``) with the Run check's patterns and the rule's, so
  the Run check and the rule share one incremental read.

Bounded: at most ``MAX_JOBS`` jobs per rule and pass, newest first.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from django.utils import timezone

from jobs.explain import runcheck_settings
from jobs.models import Job, Phase
from jobs.observe import log_scans
from notifications.models import Event, Rule

MAX_JOBS = 50


def _jobs(rule: Rule, phase: str):
    if rule.job_id is not None:
        qs = Job.objects.filter(pk=rule.job_id)
    else:
        qs = Job.objects.filter(owner_id=rule.owner_id)
    return qs.filter(phase=phase, stopped=False).order_by("-created_at")[:MAX_JOBS]


def _rules(event: str) -> list[Rule]:
    """The enabled rules asking for ``event`` (filtered here: SQLite has no JSON ``contains``)."""
    return [
        r
        for r in Rule.objects.filter(enabled=True).only(
            "pk", "owner", "job", "events", "pending_minutes", "log_pattern"
        )
        if event in (r.events or [])
    ]


def pending_events(now: datetime | None = None) -> list[dict[str, Any]]:
    """``pending_long`` events of every enabled rule that asks for them."""
    now = now or timezone.now()
    out = []
    for rule in _rules(Event.PENDING_LONG):
        limit = now - timedelta(minutes=rule.pending_minutes)
        for job in _jobs(rule, Phase.PENDING):
            if job.created_at <= limit:
                out.append(
                    {
                        "job": job.pk,
                        "kind": "pending_long",
                        "rule": rule.pk,
                        "minutes": rule.pending_minutes,
                        "attempt": job.attempt,
                    }
                )
    return out


def log_events() -> list[dict[str, Any]]:
    """``log_match`` events: the first matching line of a Running job's Workers per rule."""
    out = []
    for rule in _rules(Event.LOG_MATCH):
        if not rule.log_pattern:
            continue
        for job in _jobs(rule, Phase.RUNNING):
            patterns = {**runcheck_settings.job_log_patterns(job), "notify": rule.log_pattern}
            scans = log_scans.job_scans(job, log_scans.job_tasks(job), patterns)
            for scan in scans.scans.values():
                hit = scan.pattern_hits.get("notify")
                if hit:
                    out.append(
                        {
                            "job": job.pk,
                            "kind": "log_match",
                            "rule": rule.pk,
                            "pattern": rule.log_pattern,
                            "line": hit[1],
                            "attempt": job.attempt,
                        }
                    )
                    break
    return out
