"""Resource usage samples of Workers: CPU and memory per Worker, shown as small charts on the Metrics tab.

Kept in its own module (imported at the bottom of ``jobs.models``) so the core models stay small. A sample is what
``Runtime.pod_metrics()`` reported for one Pod at one time: CPU in cores, memory in bytes; ``None`` when the runtime
did not report that value (shown as "not available", never as 0). The sync keeps a small ring per Pod
(``jobs.observe.metrics.RING_SIZE`` newest samples).
"""

from __future__ import annotations

from django.db import models
from django.utils.translation import gettext_lazy as _


class MetricSample(models.Model):
    """One CPU/memory reading of one Worker Pod."""

    job = models.ForeignKey("jobs.Job", on_delete=models.CASCADE, related_name="metric_samples")
    pod_name = models.CharField(_("Pod"), max_length=253)
    taken_at = models.DateTimeField(_("taken at"), db_index=True)
    cpu = models.FloatField(_("CPU (cores)"), null=True, blank=True)
    memory = models.BigIntegerField(_("memory (bytes)"), null=True, blank=True)

    class Meta:
        app_label = "jobs"
        ordering = ["job", "pod_name", "taken_at"]
        indexes = [models.Index(fields=["job", "pod_name", "taken_at"], name="jobs_metric_job_pod_time")]
        verbose_name = _("metric sample")
        verbose_name_plural = _("metric samples")

    def __str__(self) -> str:
        return f"{self.pod_name}@{self.taken_at:%Y-%m-%dT%H:%M:%S}"
