"""The safety approval of a robot job over the REST API (``jobs.control.safety``). 404 for jobs the user may not
see.

- ``GET  /api/v1/jobs/{name}/approve/``: the job's gate, ``jobs.control.safety.gate_dict`` (``robot``, ``open``,
  ``reasons``, ``approval``, the five ``items``) plus ``canApprove``;
- ``POST /api/v1/jobs/{name}/approve/`` ``{"items": ["compatibility", "site", "stop", "limits", "data"],
  "stopPlan": "<1-4000 characters>"}``: approve the job as stored now (a safety approver who did not submit it);
  200 the gate; 403 ``{"code": "forbidden" | "own_job", "detail", "errors"}``; 400 ``{"code": "invalid" |
  "not_robot_job", "detail", "errors": [{path, code, message}]}`` (one per problem: each item not confirmed, the stop
  plan).

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
from jobs.control import safety
from rlark_console import language


def _body(request, job) -> dict:
    g = safety.gate(job)
    return {**safety.gate_dict(g, language.lang()), "canApprove": safety.can_approve(request.user, job)}


class JobApproveView(APIView):
    """Read or give the safety approval of a robot job."""

    @extend_schema(responses={200: OpenApiTypes.OBJECT}, summary="Safety gate of a job")
    def get(self, request, name: str):
        job = policy.get_job_for_review(request.user, name)
        return Response(_body(request, job))

    @extend_schema(
        request=OpenApiTypes.OBJECT,
        responses={200: OpenApiTypes.OBJECT, 400: OpenApiTypes.OBJECT, 403: OpenApiTypes.OBJECT},
        summary="Approve a robot job (safety approver)",
    )
    def post(self, request, name: str):
        job = policy.get_job_for_review(request.user, name)
        data = request.data if hasattr(request.data, "get") else {}
        items, plan = data.get("items"), data.get("stopPlan")
        if hasattr(data, "getlist") and not isinstance(items, list):
            items = data.getlist("items")
        if not isinstance(items, list) or not all(isinstance(i, str) for i in items) or not isinstance(plan, str):
            field = "stopPlan" if isinstance(items, list) else "items"
            detail = _("items must be a list of item keys and stopPlan a text.")
            errors = [{"path": field, "code": "invalid", "message": detail}]
            return Response({"code": "invalid", "field": field, "detail": detail, "errors": errors}, status=400)
        try:
            safety.approve(job, request.user, items, plan, request=request)
        except safety.ApprovalRefused as exc:
            code = 403 if exc.code in ("forbidden", "own_job") else 400
            errors = [{"path": "", "code": exc.code, "message": text} for text in exc.errors]
            return Response({"code": exc.code, "detail": str(exc), "errors": errors}, status=code)
        return Response(_body(request, job))


urlpatterns = [path("jobs/<str:name>/approve/", JobApproveView.as_view(), name="api-job-approve")]
