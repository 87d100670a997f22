"""Checkpoints of a job and the resume from one, over the REST API. 404 for jobs the user may not see.

- ``GET  /api/v1/jobs/{name}/checkpoints/``: ``{directory, source (template|rlinf|""), reason, reasonText, runId,
  truncated, asOf, latestComplete (container path or null), checkpoints: [{path, step, runId, attempt, current,
  sizeBytes, files, writtenAt, state (complete|incomplete|being_written), stateLabel, reasons: [text],
  listSha256}]}`` (``jobs.observe.checkpoints.Listing.to_dict``);
- ``POST /api/v1/jobs/{name}/resume/`` ``{"checkpoint": "<container path>" | "latest", "runScript": optional}``:
  a new run of the job from that complete checkpoint (owner/admin); 200 the job detail with ``resume``
  ``{dir, step, fromRun, runScript}``; 400 ``{"code": "invalid", "field", "detail"}`` (localized) for an
  incomplete, unknown or missing checkpoint, or a run script that is empty or too large; 403 without the right to
  change the job.

Messages follow the request language (``Accept-Language`` / the language cookie).
"""

from __future__ import annotations

from django.urls import path
from django.utils.translation import gettext as _
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import extend_schema
from rest_framework.response import Response
from rest_framework.views import APIView

from jobs import policy
from jobs.api.views import job_detail
from jobs.control import safety
from jobs.observe import checkpoints as checkpoint_service
from rlark_console import language


class JobCheckpointsView(APIView):
    """The ``global_step_<N>`` checkpoints of the job's runs, with size, time and state."""

    @extend_schema(responses={200: OpenApiTypes.OBJECT}, summary="Checkpoints of a job")
    def get(self, request, name: str):
        job = policy.get_job_for(request.user, name)
        return Response(checkpoint_service.job_checkpoints(job).to_dict(language.lang()))


class JobResumeView(APIView):
    """Start a new run of the job from a complete checkpoint."""

    @extend_schema(
        request=OpenApiTypes.OBJECT,
        responses={200: OpenApiTypes.OBJECT, 400: OpenApiTypes.OBJECT, 403: OpenApiTypes.OBJECT},
        summary="Resume a job from a checkpoint",
    )
    def post(self, request, name: str):
        job = policy.get_job_for(request.user, name)
        if not policy.can_change_job(request.user, job):
            return Response(
                {"code": "forbidden", "detail": _("You do not have permission to perform this action.")}, status=403
            )
        data = request.data if hasattr(request.data, "get") else {}
        choice, run_script = data.get("checkpoint"), data.get("runScript")
        if not isinstance(choice, str) or (run_script is not None and not isinstance(run_script, str)):
            field = "checkpoint" if not isinstance(choice, str) else "runScript"
            return Response({"code": "invalid", "field": field, "detail": _("This field must be text.")}, status=400)
        try:
            job = checkpoint_service.resume(job, choice, run_script, actor=request.user, request=request)
        except checkpoint_service.CheckpointRefused as exc:
            return Response({"code": "invalid", "field": exc.field, "detail": exc.message(language.lang())}, 400)
        except safety.SafetyGateClosed as exc:  # a robot job runs only as approved
            return Response({"code": exc.code, "detail": str(exc)}, status=409)
        job.refresh_from_db()
        return Response({**job_detail(job), "resume": job.resume})


urlpatterns = [
    path("jobs/<str:name>/checkpoints/", JobCheckpointsView.as_view(), name="api-job-checkpoints"),
    path("jobs/<str:name>/resume/", JobResumeView.as_view(), name="api-job-resume"),
]
