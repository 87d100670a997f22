"""Job REST API. Every write goes through ``jobs.control.submission`` (the one validator) and
``jobs.control.controller``; permissions through ``jobs.policy`` (others' jobs are 404).

Bodies: a Job as JSON or YAML (``Content-Type: application/yaml``), or JSON ``{"document": {...} | "yaml": "...",
"rlinf_config": "<RLinf YAML>"}``, or multipart with a ``file`` (and optional ``rlinf_config`` file).
Messages follow the request language (``Accept-Language``; zh-hans by default).
"""

from __future__ import annotations

import inspect
from typing import Any

from django.db.models import Q
from django.utils.translation import gettext as _
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework import serializers, status
from rest_framework.parsers import FormParser, MultiPartParser
from rest_framework.response import Response
from rest_framework.views import APIView

from clusters.runtime.base import RuntimeFailure
from jobs import policy
from jobs.api.parsers import RAW_PARSERS, RawBody
from jobs.control import controller, lifecycle, safety, submission
from jobs.jobspec import text_size
from jobs.jobspec.document import normalize, parse_text, render_yaml
from jobs.jobspec.layout import task_layout
from jobs.jobspec.messages import Problem
from jobs.jobspec.rlinf import plan as rlinf_plan
from jobs.models import Job
from jobs.observe.headline import worker_phase, worker_phase_label
from jobs.observe.progress import progress_of
from jobs.observe.status import job_status as status_of
from rlark_console import apierrors, jsontext, language
from rlark_console.pagination import PARAMETERS as PAGINATION_PARAMETERS
from rlark_console.pagination import ConsolePagination

PARSERS = [*RAW_PARSERS, MultiPartParser, FormParser]


# --- OpenAPI shapes --------------------------------------------------------------------------------------------------


class ProblemSerializer(serializers.Serializer):
    path = serializers.CharField()
    code = serializers.CharField()
    message = serializers.CharField()


class ValidationSerializer(serializers.Serializer):
    valid = serializers.BooleanField()
    errors = ProblemSerializer(many=True)
    warnings = ProblemSerializer(many=True)
    yaml = serializers.CharField()
    workers = serializers.IntegerField(help_text="Total Workers (sum of replicas; absent counts as 1)")


class JobSummarySerializer(serializers.Serializer):
    name = serializers.CharField()
    display_name = serializers.CharField()
    owner = serializers.CharField()
    phase = serializers.CharField()
    message = serializers.CharField()
    stopped = serializers.BooleanField()
    attempt = serializers.IntegerField()
    roles = serializers.IntegerField()
    workers = serializers.IntegerField()
    created_at = serializers.DateTimeField()
    updated_at = serializers.DateTimeField()
    started_at = serializers.DateTimeField(allow_null=True)
    finished_at = serializers.DateTimeField(allow_null=True)
    progress = serializers.DictField(
        allow_null=True,
        help_text="The last training step the sync saw: {step, total (null: unknown), ratePerMinute (null: "
        "unknown), etaSeconds (null unless running with a total and a rate), updatedAt, text (the request's "
        "language)}; null before the first Global Step line",
    )


class JobDetailSerializer(JobSummarySerializer):
    spec = serializers.DictField(help_text="The stored rlinf.io/v1alpha1 Job document")
    yaml = serializers.CharField(help_text="The same document as YAML (identical to the wizard preview)")
    status = serializers.DictField(help_text="jobs.observe.status.job_status(job)")
    rlinf_config = serializers.CharField()
    warnings = ProblemSerializer(many=True, required=False)


class PlanRoleSerializer(serializers.Serializer):
    name = serializers.CharField()
    head = serializers.BooleanField()
    role = serializers.CharField()
    replicas = serializers.IntegerField()
    rank_start = serializers.IntegerField()
    node_ranks = serializers.CharField()
    ranks = serializers.ListField(child=serializers.IntegerField())
    labels = serializers.ListField(child=serializers.CharField())
    env = serializers.DictField(child=serializers.CharField())
    python_interpreter_path = serializers.CharField()
    hardware = serializers.DictField(allow_null=True)
    gpus = serializers.IntegerField(allow_null=True)


class PlanSerializer(serializers.Serializer):
    valid = serializers.BooleanField()
    num_nodes = serializers.IntegerField()
    workers = serializers.IntegerField()
    roles = PlanRoleSerializer(many=True)
    problems = ProblemSerializer(many=True)
    warnings = ProblemSerializer(many=True)


ERRORS_400 = OpenApiResponse(ValidationSerializer, description="Invalid job: every problem at once")
NOT_FOUND = OpenApiResponse(description="No such job, or not yours")
CONFLICT = OpenApiResponse(
    description="The name is taken: code job_exists (a job you may see) or job_name_unavailable (another user's)"
)


# --- helpers ---------------------------------------------------------------------------------------------------------


def job_summary(job: Job) -> dict[str, Any]:
    layout = task_layout(job.spec or {})
    return {
        "name": job.name,
        "display_name": job.display_name,
        "owner": job.owner.username,
        "phase": job.phase,
        "message": job.message,
        "stopped": job.stopped,
        "attempt": job.attempt,
        "roles": len(layout),
        "workers": sum(t.replicas for t in layout),
        "created_at": job.created_at,
        "updated_at": job.updated_at,
        "started_at": job.started_at,
        "finished_at": job.finished_at,
        "progress": progress.to_dict() if (progress := progress_of(job)) is not None else None,
    }


def job_status(job: Job) -> dict[str, Any]:
    """``jobs.observe.status.job_status``; each Worker also gets ``shownPhase`` and ``phaseLabel`` (in the
    request's language): the phase the pages show, from the same ``jobs.observe.headline`` functions (a Succeeded
    job's Workers are Completed, not the Stopped of their scaled-down Pods). ``phase`` stays the last synced one."""
    data = status_of(job)
    for w in data["workers"]:
        w["shownPhase"] = worker_phase(job, w["phase"] or "")
        w["phaseLabel"] = worker_phase_label(w["shownPhase"])
    return data


def job_detail(job: Job) -> dict[str, Any]:
    data = job_summary(job)
    data.update(
        spec=job.spec, yaml=render_yaml(job.spec or {}), status=job_status(job), rlinf_config=job.rlinf_config or ""
    )
    result = getattr(job, "validation", None)
    if result is not None:
        data["warnings"] = [p.to_dict(language.lang()) for p in result.warnings]
    if getattr(job, "safety_hold", ""):
        data["safety_hold"] = job.safety_hold  # stored stopped until a safety approval (jobs.control.safety)
    return data


def invalid_response(result, document: dict | None = None, code: int = status.HTTP_400_BAD_REQUEST) -> Response:
    body = result.to_dict(language.lang())
    body["yaml"] = render_yaml(document) if isinstance(document, dict) else ""
    return Response(body, status=code)


def exists_response(exc: submission.JobExists) -> Response:
    """409 ``job_exists`` for a job the user may see, ``job_name_unavailable`` for another user's (no leak)."""
    problem = Problem("metadata.name", exc.code, {"name": exc.name})
    return Response(
        {"valid": False, "errors": [problem.to_dict(language.lang())], "warnings": [], "code": exc.code},
        status=status.HTTP_409_CONFLICT,
    )


class BodyError(Exception):
    def __init__(self, problem: Problem):
        self.problem = problem


def read_body(request) -> tuple[Any, str | None, str]:
    """-> (document dict or text, content type for text, attached RLinf config text)."""
    data = request.data
    if isinstance(data, RawBody):
        if data.oversized:
            raise BodyError(text_size.too_large())
        if not data.is_json:
            return data.text, "application/yaml", ""
        try:
            obj = jsontext.loads(data.text) if data.text.strip() else None
        except ValueError as exc:
            raise BodyError(Problem("", "document_invalid", {"detail": _("invalid JSON: %(error)s") % {"error": exc}}))
        if isinstance(obj, dict) and ("document" in obj or "yaml" in obj) and "spec" not in obj:
            doc = obj.get("document") if "document" in obj else obj.get("yaml")
            config = obj.get("rlinf_config") or ""
            if isinstance(config, dict):
                import yaml

                config = yaml.safe_dump(config, sort_keys=False, allow_unicode=True)
            return doc, (None if isinstance(doc, dict) else "application/yaml"), str(config)
        if obj is None:
            raise BodyError(Problem("", "document_invalid", {"detail": _("the request body is empty")}))
        return obj, None, ""
    upload = request.FILES.get("file") if hasattr(request, "FILES") else None
    if upload is not None:
        text, too_large = text_size.read_upload(upload)
        if too_large is not None:
            raise BodyError(too_large)
        config_file = request.FILES.get("rlinf_config")
        config = config_file.read().decode("utf-8", "replace") if config_file else str(data.get("rlinf_config", ""))
        return text, None, config
    if hasattr(data, "get") and data.get("yaml"):
        return str(data.get("yaml")), "application/yaml", str(data.get("rlinf_config", "") or "")
    raise BodyError(Problem("", "document_invalid", {"detail": _("no job document in the request")}))


def body_error(exc: BodyError) -> Response:
    return Response(
        {"valid": False, "errors": [exc.problem.to_dict(language.lang())], "warnings": [], "yaml": "", "workers": 0},
        status=status.HTTP_400_BAD_REQUEST,
    )


def _controller_call(fn, job: Job, request):
    params = inspect.signature(fn).parameters
    kwargs: dict[str, Any] = {"actor": request.user}
    if "request" in params:
        kwargs["request"] = request
    return fn(job, **kwargs)


# --- views -----------------------------------------------------------------------------------------------------------


class JobListView(APIView):
    """``GET /api/v1/jobs/``: visible jobs (admins: all), newest first, paginated (``limit`` or ``page_size``,
    ``offset``: rlark_console/pagination.py), filters ``phase`` (comma list), ``owner`` (username), ``search``
    (name or display name).
    ``POST``: create a job -> 201 detail; 400 ``{valid, errors, warnings, yaml, workers}``; 409 existing name."""

    parser_classes = PARSERS

    @extend_schema(
        parameters=[
            OpenApiParameter("phase", str, description="Pending,Running,Succeeded,Failed,Stopped (comma list)"),
            OpenApiParameter("owner", str, description="owner username"),
            OpenApiParameter("search", str, description="substring of the name or display name"),
            *PAGINATION_PARAMETERS,
        ],
        responses=JobSummarySerializer(many=True),
    )
    def get(self, request):
        qs = policy.visible_jobs(request.user).select_related("owner").order_by("-created_at")
        phase = request.query_params.get("phase")
        if phase:
            qs = qs.filter(phase__in=[p.strip() for p in phase.split(",") if p.strip()])
        owner = request.query_params.get("owner")
        if owner:
            qs = qs.filter(owner__username=owner)
        search = request.query_params.get("search")
        if search:
            qs = qs.filter(Q(name__icontains=search) | Q(display_name__icontains=search))
        paginator = ConsolePagination()
        page = paginator.paginate_queryset(qs, request, view=self)
        return paginator.get_paginated_response([job_summary(j) for j in page])

    @extend_schema(
        request={"application/json": OpenApiTypes.OBJECT, "application/yaml": OpenApiTypes.STR},
        responses={201: JobDetailSerializer, 400: ERRORS_400, 409: CONFLICT},
    )
    def post(self, request):
        try:
            body, content_type, config = read_body(request)
        except BodyError as exc:
            return body_error(exc)
        try:
            job = submission.create_job(
                request.user, body, content_type=content_type, rlinf_config=config, request=request
            )
        except submission.JobInvalid as exc:
            document = normalize(body) if isinstance(body, dict) else None
            return invalid_response(exc.result, document)
        except submission.JobExists as exc:
            return exists_response(exc)
        return Response(job_detail(job), status=status.HTTP_201_CREATED)


class JobValidateView(APIView):
    """``POST /api/v1/jobs/validate/``: validate without side effects. 200 when valid (warnings allowed), 400 when
    not; body ``{valid, errors, warnings, yaml, workers}`` (``yaml`` = the exact YAML that would be stored)."""

    parser_classes = PARSERS

    @extend_schema(
        request={"application/json": OpenApiTypes.OBJECT, "application/yaml": OpenApiTypes.STR},
        responses={200: ValidationSerializer, 400: ValidationSerializer},
    )
    def post(self, request):
        try:
            body, content_type, config = read_body(request)
        except BodyError as exc:
            return body_error(exc)
        document, result = submission.check_document(request.user, body, content_type=content_type, rlinf_config=config)
        return invalid_response(result, document, status.HTTP_200_OK if result.valid else status.HTTP_400_BAD_REQUEST)


class JobDetailView(APIView):
    """``GET/PUT/PATCH/DELETE /api/v1/jobs/{name}/``. PUT replaces the document (``?restart=1``: edit and
    restart); PATCH is a JSON merge patch of the document (``{"spec": {"stopped": true}}`` stops the job; adding
    annotation ``rlark.io/restarted-at`` restarts it). DELETE -> ``{"message": "deleted"}``."""

    parser_classes = PARSERS

    @extend_schema(responses={200: JobDetailSerializer, 404: NOT_FOUND})
    def get(self, request, name: str):
        return Response(job_detail(policy.get_job_for(request.user, name)))

    def _update(self, request, job: Job, body, content_type, config, restart: bool, patch: bool = False) -> Response:
        try:
            job = submission.update_job(
                request.user,
                job,
                body,
                restart=restart,
                content_type=content_type,
                rlinf_config=config if config else None,
                request=request,
                patch=patch,
            )
        except submission.JobInvalid as exc:
            document = (
                normalize(submission.merge_patch(job.spec or {}, body) if patch else body)
                if isinstance(body, dict)
                else None
            )
            return invalid_response(exc.result, document)
        return Response(job_detail(job))

    @extend_schema(
        request={"application/json": OpenApiTypes.OBJECT, "application/yaml": OpenApiTypes.STR},
        parameters=[OpenApiParameter("restart", bool, description="edit and restart")],
        responses={200: JobDetailSerializer, 400: ERRORS_400, 404: NOT_FOUND},
    )
    def put(self, request, name: str):
        job = policy.get_job_for(request.user, name)
        try:
            body, content_type, config = read_body(request)
        except BodyError as exc:
            return body_error(exc)
        restart = request.query_params.get("restart", "").lower() in ("1", "true", "yes")
        return self._update(request, job, body, content_type, config, restart)

    @extend_schema(
        request={"application/merge-patch+json": OpenApiTypes.OBJECT, "application/json": OpenApiTypes.OBJECT},
        responses={200: JobDetailSerializer, 400: ERRORS_400, 404: NOT_FOUND},
    )
    def patch(self, request, name: str):
        job = policy.get_job_for(request.user, name)
        try:
            body, content_type, _config = read_body(request)
        except BodyError as exc:
            return body_error(exc)
        if not isinstance(body, dict):
            body, problems = parse_text(body, content_type)
            if body is None:
                return body_error(BodyError(problems[0]))
        # merged onto the stored document under the Job row's lock (concurrent edits are never lost)
        return self._update(request, job, body, None, "", False, patch=True)

    @extend_schema(responses={200: OpenApiTypes.OBJECT, 404: NOT_FOUND, 503: OpenApiTypes.OBJECT})
    def delete(self, request, name: str):
        job = policy.get_job_for(request.user, name)
        try:
            _controller_call(controller.delete, job, request)
        except Exception as exc:  # a runtime could not delete a workload: the job is kept (and stopped)
            if not isinstance(exc, RuntimeFailure):
                raise
            return Response(apierrors.runtime_failure(exc, _("Delete")), status=status.HTTP_503_SERVICE_UNAVAILABLE)
        return Response({"message": "deleted"})


class JobActionView(APIView):
    """``POST /api/v1/jobs/{name}/stop|start|restart/`` -> 200 job detail; 409 ``{code: safety_approval_missing |
    safety_approval_stale, detail}`` when a robot job without a current safety approval would start; 409 ``{code:
    job_finished, detail}`` for Start or Stop of a finished (Succeeded/Failed) job (``jobs.control.lifecycle``;
    Restart begins a new run)."""

    action = ""

    @extend_schema(request=None, responses={200: JobDetailSerializer, 404: NOT_FOUND})
    def post(self, request, name: str):
        job = policy.get_job_for(request.user, name)
        reason = lifecycle.refusal(job, self.action)
        if reason:
            return Response({"code": "job_finished", "detail": _(reason)}, status=status.HTTP_409_CONFLICT)
        try:
            job = _controller_call(getattr(controller, self.action), job, request)
        except safety.SafetyGateClosed as exc:  # a robot job without a current safety approval: nothing changed
            return Response({"code": exc.code, "detail": str(exc)}, status=status.HTTP_409_CONFLICT)
        job.refresh_from_db()
        return Response(job_detail(job))


class JobCloneView(APIView):
    """``POST /api/v1/jobs/{name}/clone/``: the document renamed ``<name>-copy`` (nothing stored) as
    ``{document, yaml}``; ``?create=1`` creates it (201 detail, or 400/409 as create)."""

    @extend_schema(
        request=None,
        parameters=[OpenApiParameter("create", bool, description="also create the clone")],
        responses={200: OpenApiTypes.OBJECT, 201: JobDetailSerializer, 400: ERRORS_400, 404: NOT_FOUND},
    )
    def post(self, request, name: str):
        source = policy.get_job_for(request.user, name)
        document = submission.clone_document(source)
        if request.query_params.get("create", "").lower() not in ("1", "true", "yes"):
            return Response({"document": document, "yaml": render_yaml(document)})
        try:
            job = submission.create_job(request.user, document, rlinf_config=source.rlinf_config, request=request)
        except submission.JobInvalid as exc:
            return invalid_response(exc.result, document)
        except submission.JobExists as exc:
            return exists_response(exc)
        return Response(job_detail(job), status=status.HTTP_201_CREATED)


class RLinfPlanView(APIView):
    """``POST /api/v1/rlinf/plan/`` with an RLinf Hydra YAML (``application/yaml``) -> ``{valid, num_nodes,
    workers, roles: [{name, head, role, replicas, rank_start, node_ranks, ranks, env, hardware, gpus, ...}],
    problems}``; 400 when nothing can be planned (unparsable YAML, no ``cluster.num_nodes``)."""

    parser_classes = PARSERS

    @extend_schema(
        request={"application/yaml": OpenApiTypes.STR, "application/json": OpenApiTypes.OBJECT},
        responses={200: PlanSerializer, 400: PlanSerializer},
    )
    def post(self, request):
        data = request.data
        if isinstance(data, RawBody):
            config: Any = data.text
            if data.is_json:
                try:
                    obj = jsontext.loads(data.text)
                except ValueError:
                    obj = None
                config = obj.get("config", obj) if isinstance(obj, dict) else data.text
        elif hasattr(request, "FILES") and request.FILES.get("file"):
            config = request.FILES["file"].read().decode("utf-8", "replace")
        else:
            config = str(data.get("config", "")) if hasattr(data, "get") else ""
        result = rlinf_plan(config)
        code = status.HTTP_200_OK if result.num_nodes else status.HTTP_400_BAD_REQUEST
        return Response(result.to_dict(language.lang()), status=code)
