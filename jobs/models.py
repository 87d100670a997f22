"""Jobs, the Tasks derived from their templates, and the Pods (Workers) of each Task.

Vocabulary (seed 01-job-role-worker-task): a Job is one run; each ``spec.tasks[]``
entry is a Task template (a role); the controller derives one Task per template
(``<job>-<template>``), run as a StatefulSet whose Pods are the Workers, each one
Ray node with ``RLINF_NODE_RANK = rank_start + ordinal``.
"""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.db import models
from django.utils.translation import gettext_lazy as _

from clusters.models import Cluster


class Phase(models.TextChoices):
    """Job and Task phases (upstream-rlark 2.1; Succeeded/Failed are real here)."""

    PENDING = "Pending", _("Pending")
    RUNNING = "Running", _("Running")
    SUCCEEDED = "Succeeded", _("Succeeded")
    FAILED = "Failed", _("Failed")
    STOPPED = "Stopped", _("Stopped")


class Job(models.Model):
    """A whole run. ``spec`` is the full ``rlinf.io/v1alpha1`` Job document (dict)."""

    name = models.CharField(_("name"), max_length=63, unique=True)
    display_name = models.CharField(_("display name"), max_length=128, blank=True)
    owner = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="jobs")
    spec = models.JSONField(_("spec"), default=dict)
    stopped = models.BooleanField(_("stopped"), default=False)
    phase = models.CharField(_("phase"), max_length=16, choices=Phase.choices, default=Phase.PENDING)
    message = models.TextField(_("message"), blank=True)
    conditions = models.JSONField(_("conditions"), default=list, blank=True)
    attempt = models.PositiveIntegerField(_("attempt"), default=1)
    # Desired-state bookkeeping (Kubernetes style): every action bumps ``generation``;
    # the controller sets ``observed_generation`` once the runtimes match it, so an
    # interrupted reconcile (Celery worker killed) is retried by the periodic sync.
    generation = models.PositiveIntegerField(_("generation"), default=1)
    observed_generation = models.PositiveIntegerField(_("observed generation"), default=0)
    rlinf_config = models.TextField(_("attached RLinf config"), blank=True)
    run_check = models.JSONField(_("run check settings"), default=dict, blank=True)
    # The runs before the current attempt, oldest first, at most ``jobs.control.controller.MAX_RUNS``:
    # ``[{"attempt", "runId" (its Header Pod UID, "" when it had none), "startedAt", "finishedAt" (ISO 8601 or
    # null), "resumedFrom" (container path or "")}]``; written when a new attempt starts (the Checkpoints tab).
    runs = models.JSONField(_("earlier runs"), default=list, blank=True)
    # The current attempt resumes from a checkpoint: ``{"dir" (container path), "step", "fromRun", "runScript"}``;
    # ``{}`` for a fresh run (Start and Restart clear it; ``jobs.observe.checkpoints.resume`` sets it).
    resume = models.JSONField(_("resumed from"), default=dict, blank=True)
    # Set by an admin (Django admin); empty = settings.RLARK_LOG_ARCHIVE_MAX_BYTES (jobs.control.log_archive).
    log_archive_max_bytes = models.PositiveBigIntegerField(
        _("log archive cap (bytes)"),
        null=True,
        blank=True,
        help_text=_("Compressed size cap of this job's archived Worker logs; empty = the console's default."),
    )
    # Progress of the current run, written by the status sync from the Header's ``Global Step`` lines
    # (jobs.observe.progress): the last step, the total (from the line or runner.max_steps; null = unknown), the
    # rate in steps per minute (null until two steps were seen), when the step last changed, and the step and
    # time the next rate is measured from (a window shorter than progress.MIN_RATE_SECONDS keeps the base).
    progress_step = models.PositiveBigIntegerField(_("progress: step"), null=True, blank=True)
    progress_total = models.PositiveBigIntegerField(_("progress: total steps"), null=True, blank=True)
    progress_rate = models.FloatField(_("progress: steps per minute"), null=True, blank=True)
    progress_updated_at = models.DateTimeField(_("progress: step seen"), null=True, blank=True)
    progress_base_step = models.PositiveBigIntegerField(_("progress: rate measured from step"), null=True, blank=True)
    progress_base_at = models.DateTimeField(_("progress: rate measured from"), null=True, blank=True)
    created_at = models.DateTimeField(_("created"), auto_now_add=True)
    updated_at = models.DateTimeField(_("updated"), auto_now=True)
    started_at = models.DateTimeField(_("started"), null=True, blank=True)
    finished_at = models.DateTimeField(_("finished"), null=True, blank=True)

    class Meta:
        ordering = ["-created_at"]
        # Every column the job lists (pages, API, back office) order or filter by: newest first, alone
        # or within one phase / one owner. The name search has PostgreSQL trigram indexes (migration 0006).
        indexes = [
            models.Index(fields=["-created_at"], name="job_created_idx"),
            models.Index(fields=["phase", "-created_at"], name="job_phase_created_idx"),
            models.Index(fields=["owner", "-created_at"], name="job_owner_created_idx"),
        ]
        verbose_name = _("job")
        verbose_name_plural = _("jobs")

    def clear_progress(self) -> list[str]:
        """Forget the progress of the run that ended (a new attempt counts its steps anew): the ``progress_*``
        fields are set to None on this object; returns their names for ``save(update_fields=...)``."""
        names = [
            "progress_step",
            "progress_total",
            "progress_rate",
            "progress_updated_at",
            "progress_base_step",
            "progress_base_at",
        ]
        for name in names:
            setattr(self, name, None)
        return names

    def current_run_id(self) -> str:
        """The ``RLARK_RUN_ID`` of the job's current run: the UID of its newest Header Pod (rank 0); "" before the
        Header Pod exists. One query."""
        pod = (
            Pod.objects.filter(task__job=self, task__head=True, ordinal=0)
            .exclude(uid="")
            .order_by("-created_at", "-id")
            .only("uid")
            .first()
        )
        return pod.uid if pod is not None else ""

    @property
    def spec_section(self) -> dict[str, Any]:
        """The ``spec`` part of the stored ``rlinf.io/v1alpha1`` document (``self.spec`` holds all of it);
        the whole document when it has no ``spec`` mapping (an old or hand-written row)."""
        doc = self.spec or {}
        inner = doc.get("spec")
        return inner if isinstance(inner, dict) else doc

    def __str__(self) -> str:
        return self.name


class Task(models.Model):
    """The Task derived from one template: runs as StatefulSet ``name`` in ``namespace``."""

    job = models.ForeignKey(Job, on_delete=models.CASCADE, related_name="tasks")
    template_name = models.CharField(_("template"), max_length=63)
    name = models.CharField(_("name"), max_length=127)
    cluster = models.ForeignKey(Cluster, on_delete=models.PROTECT, related_name="tasks")
    namespace = models.CharField(_("namespace"), max_length=63)
    role = models.CharField(_("role"), max_length=16, blank=True)
    display_role = models.CharField(_("role name"), max_length=128, blank=True)
    head = models.BooleanField(_("head"), default=False)
    order = models.PositiveIntegerField(_("order"), default=0)
    replicas = models.PositiveIntegerField(_("replicas"), default=1)
    ready_replicas = models.PositiveIntegerField(_("ready"), default=0)
    rank_start = models.PositiveIntegerField(_("node rank start"), default=0)
    # What the controller last told the runtime: replica count and job attempt (restart bookkeeping).
    applied_replicas = models.PositiveIntegerField(_("applied replicas"), default=0)
    applied_attempt = models.PositiveIntegerField(_("applied attempt"), default=0)
    # sha256 of the last applied Pod template; when an edit last changed it on a running Task, and the workload
    # revisions its Pods had then: the StatefulSet replaces those Pods, the edit rolling out, not lost Workers.
    applied_template = models.CharField(_("applied Pod template"), max_length=64, blank=True)
    rolled_at = models.DateTimeField(_("edit rolled out"), null=True, blank=True)
    rolled_revisions = models.JSONField(_("revisions rolled out"), default=list, blank=True)
    phase = models.CharField(_("phase"), max_length=16, choices=Phase.choices, default=Phase.PENDING)
    message = models.TextField(_("message"), blank=True)
    conditions = models.JSONField(_("conditions"), default=list, blank=True)
    observed_nodes = models.JSONField(_("observed nodes"), default=list, blank=True)
    created_at = models.DateTimeField(_("created"), auto_now_add=True)

    class Meta:
        ordering = ["job", "order"]
        unique_together = [("job", "template_name")]
        verbose_name = _("task")
        verbose_name_plural = _("tasks")

    def __str__(self) -> str:
        return self.name


class Pod(models.Model):
    """A Worker: one Pod of a Task, one Ray node. Mirrors the runtime's last report."""

    task = models.ForeignKey(Task, on_delete=models.CASCADE, related_name="pods")
    name = models.CharField(_("name"), max_length=253)
    ordinal = models.PositiveIntegerField(_("ordinal"), default=0)
    uid = models.CharField(_("UID"), max_length=64, blank=True)
    node = models.CharField(_("node"), max_length=253, blank=True)
    ip = models.CharField(_("IP"), max_length=45, blank=True)
    domain_ip = models.CharField(_("domain IP"), max_length=45, blank=True)
    phase = models.CharField(_("phase"), max_length=16, default="Pending")
    reason = models.CharField(_("reason"), max_length=128, blank=True)
    message = models.TextField(_("message"), blank=True)
    container_state = models.JSONField(_("container state"), default=dict, blank=True)
    # What the runtime last reported, hashed (``jobs.observe.sync_rows.fingerprint``): a steady sync cycle compares
    # it with the new report and leaves the rows of unchanged running jobs unread.
    fingerprint = models.CharField(_("fingerprint"), max_length=32, blank=True, default="")
    restart_count = models.PositiveIntegerField(_("restarts"), default=0)
    exit_code = models.IntegerField(_("exit code"), null=True, blank=True)
    events = models.JSONField(_("events"), default=list, blank=True)
    created_at = models.DateTimeField(_("created"), null=True, blank=True)
    started_at = models.DateTimeField(_("started"), null=True, blank=True)
    finished_at = models.DateTimeField(_("finished"), null=True, blank=True)

    class Meta:
        ordering = ["task", "ordinal"]
        unique_together = [("task", "name")]
        verbose_name = _("pod")
        verbose_name_plural = _("pods")

    def __str__(self) -> str:
        return self.name

    @property
    def rank(self) -> int:
        """``RLINF_NODE_RANK`` of this Worker (upstream-rlark 4.2)."""
        return self.task.rank_start + self.ordinal


class RowValuesJSONField(models.JSONField):
    """A ``JSONField`` that ``bulk_create`` writes as one parameter per row (``VALUES (...), (...)``), not as one
    ``UNNEST`` array per column (Django 5.2 on PostgreSQL).

    Why: psycopg builds a text array in Python, escaping every quote of every element with a regex, so 200 JSON
    scan states (about 90 quotes each) cost some 70 ms to write; a plain parameter is escaped by libpq. Django
    writes through ``VALUES`` as soon as a field defines ``get_placeholder``."""

    def get_placeholder(self, value: Any, compiler: Any, connection: Any) -> str:
        return "%s"


class PodLogScan(models.Model):
    """The stored scan of one Worker's log, for the Diagnosis tab and the Run check: what
    ``jobs.observe.log_markers.ScanState`` keeps of the log read so far, brought up to date incrementally by
    ``jobs.observe.log_scans`` (only what was appended since ``cursor`` is read and fed).

    ``instance``: the Pod instance it belongs to (``<uid>:<restart count>``; a new instance starts over);
    ``cursor``: the runtime's opaque read position (``Runtime.read_log_from``: a byte offset, a line count or a
    timestamp; ``archive`` for a scan of the archived log); ``lines``: complete lines consumed; ``state``: the
    scan state as JSON, bounded (``ScanState``: lines cut at 500 characters, at most 200 markers and 50 tracked
    patterns, a few KiB); ``final``: the Pod had ended and its log was read to the end (never read again);
    ``updated_at``: when the log was last read."""

    pod = models.OneToOneField(Pod, on_delete=models.CASCADE, related_name="log_scan", verbose_name=_("pod"))
    instance = models.CharField(_("Pod instance"), max_length=128)
    cursor = models.CharField(_("log cursor"), max_length=128, blank=True, default="")
    lines = models.PositiveIntegerField(_("lines scanned"), default=0)
    state = RowValuesJSONField(_("scan state"), default=dict, blank=True)
    final = models.BooleanField(_("final"), default=False)
    updated_at = models.DateTimeField(_("updated"))

    class Meta:
        verbose_name = _("log scan")
        verbose_name_plural = _("log scans")

    def __str__(self) -> str:
        return f"{self.pod_id}@{self.cursor}"


from jobs.models_metrics import MetricSample  # noqa: E402,F401  (the Metrics tab's samples; own module)
from jobs.models_safety import SafetyApproval  # noqa: E402,F401  (approvals of robot jobs; own module)
