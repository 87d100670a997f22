"""Diagnosis, run check and metrics of a Job over the REST API. 404 for jobs the user may not see.

- ``GET  /api/v1/jobs/{name}/diagnosis/``: ``{"multiHead", "findings": [...], "workers": [...], "pending":
  {role: [{code, role, pod, resource, message}]}, "asOf", "refreshing"}``
  (``jobs.explain.diagnosis.JobDiagnosis.to_dict``);
- ``GET  /api/v1/jobs/{name}/run-check/``: ``{"settings": {...}, "checks": [{number, title, status
  (met|not_met|to_confirm), statusLabel, evidence, checkedAt}], "asOf", "refreshing"}``;
- ``asOf``: when the oldest Worker log scan the answer uses was read (null: no Worker yet); ``refreshing``: some
  are older than ``RLARK_LOG_SCAN_MAX_AGE`` and are being read again in the background
  (``jobs.observe.log_scans``);
- ``PUT  /api/v1/jobs/{name}/run-check/`` ``{progress_pattern, app_patterns, output_path, max_wait_minutes}``: save
  the settings (owner/admin); 400 ``{"code": "invalid", "field", "detail"}``;
- ``GET  /api/v1/jobs/{name}/run-check/record/``: the Markdown run record (``text/markdown``);
- ``GET  /api/v1/jobs/{name}/metrics/``: ``{"runtimeSeconds", "startTime", "endTime", "attempt", "restarts",
  "metricsAvailable", "workers": [{pod, role, phase, node, restarts, ageSeconds, cpu, memory, sampledAt,
  cpuSeries, memorySeries}], "tensorboard": {"dir", "readable", "reason", "scalars": {tag: [[step, value]]}}}``;
  ``cpu``/``memory`` are null when the runtime does not report them (never a made-up number).

Messages follow the request language (``Accept-Language`` / the language cookie).
"""

from __future__ import annotations

from django.http import HttpResponse
from django.urls import path
from django.utils.translation import gettext as _
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import extend_schema
from rest_framework.response import Response
from rest_framework.views import APIView

from accounts.audit import record
from jobs import policy
from jobs.explain import diagnosis as diagnosis_service
from jobs.explain import runcheck as runcheck_service
from jobs.observe import metrics as metrics_service
from rlark_console import language


class JobDiagnosisView(APIView):
    """Per-Worker timelines, classified findings and pending reasons."""

    @extend_schema(responses={200: OpenApiTypes.OBJECT}, summary="Diagnosis of a job")
    def get(self, request, name: str):
        job = policy.get_job_for(request.user, name)
        lang = language.lang()
        patterns = runcheck_service.job_log_patterns(job)
        result, reasons, scans = diagnosis_service.diagnosis_and_pending(job, patterns)
        data = result.to_dict(lang)
        data["pending"] = {role: [r.to_dict(lang) for r in items] for role, items in reasons.items()}
        data.update(scans.to_dict())
        return Response(data)


class JobRunCheckView(APIView):
    """The five checks of seed 02 and the per-job settings."""

    @extend_schema(responses={200: OpenApiTypes.OBJECT}, summary="Run check (five checks with evidence)")
    def get(self, request, name: str):
        job = policy.get_job_for(request.user, name)
        lang = language.lang()
        checks, age = runcheck_service.job_run_check_as_of(job, lang)
        return Response(
            {
                "settings": runcheck_service.settings_of(job.run_check),
                "checks": [c.to_dict(lang) for c in checks],
                **age,
            }
        )

    @extend_schema(
        request=OpenApiTypes.OBJECT,
        responses={200: OpenApiTypes.OBJECT, 400: OpenApiTypes.OBJECT},
        summary="Save run check settings",
    )
    def put(self, request, name: str):
        job = policy.get_job_for(request.user, name)
        if not policy.can_change_job(request.user, job):
            return Response(
                {"code": "forbidden", "detail": _("You do not have permission to perform this action.")}, status=403
            )
        try:
            cleaned = runcheck_service.clean_settings(dict(request.data))
        except runcheck_service.SettingsError as exc:
            return Response({"code": "invalid", "field": exc.field, "detail": str(exc)}, status=400)
        job.run_check = cleaned
        job.save(update_fields=["run_check", "updated_at"])

        record(request.user, "job.run_check_settings", "job", job.name, request=request, **cleaned)
        return Response({"settings": cleaned})


class JobRunCheckRecordView(APIView):
    """The run record in seed 02's Markdown template."""

    @extend_schema(responses={(200, "text/markdown"): OpenApiTypes.STR}, summary="Run record (Markdown)")
    def get(self, request, name: str):
        job = policy.get_job_for(request.user, name)
        lang = language.lang()
        checks = runcheck_service.job_run_check(job, lang)
        text = runcheck_service.markdown_record(job, checks, recorder=request.user.get_username(), lang=lang)
        response = HttpResponse(text, content_type="text/markdown; charset=utf-8")
        response["Content-Disposition"] = f'attachment; filename="{job.name}-run-check.md"'
        return response


class JobMetricsView(APIView):
    """Runtime, restarts, Pod age, CPU/memory per Worker and TensorBoard scalars."""

    @extend_schema(responses={200: OpenApiTypes.OBJECT}, summary="Metrics of a job")
    def get(self, request, name: str):
        job = policy.get_job_for(request.user, name)
        data = metrics_service.job_metrics(job)
        source = metrics_service.tensorboard_source(job)
        scalars = {}
        if source.host_dir:
            try:
                scalars = metrics_service.read_scalars(source.host_dir)
            except ImportError:
                scalars = {}
        return Response(
            {
                "runtimeSeconds": data["runtimeSeconds"],
                "startTime": data["startTime"].isoformat() if data["startTime"] else None,
                "endTime": data["endTime"].isoformat() if data["endTime"] else None,
                "attempt": data["attempt"],
                "restarts": data["restarts"],
                "metricsAvailable": data["metricsAvailable"],
                "workers": [w.to_dict() for w in data["workers"]],
                "tensorboard": {
                    "dir": data["tensorboard"]["dir"],
                    "readable": data["tensorboard"]["readable"],
                    "reason": data["tensorboard"]["reason"],
                    "scalars": {tag: [[s, v] for s, v in pts] for tag, pts in scalars.items()},
                },
            }
        )


urlpatterns = [
    path("jobs/<str:name>/diagnosis/", JobDiagnosisView.as_view(), name="api-job-diagnosis"),
    path("jobs/<str:name>/run-check/", JobRunCheckView.as_view(), name="api-job-runcheck"),
    path("jobs/<str:name>/run-check/record/", JobRunCheckRecordView.as_view(), name="api-job-runcheck-record"),
    path("jobs/<str:name>/metrics/", JobMetricsView.as_view(), name="api-job-metrics"),
]
