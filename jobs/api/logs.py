"""``GET /api/v1/jobs/{name}/logs/?pod=POD&tail=1000&previous=false``: a Worker's ``main`` log as text.

- ``pod``: the Worker (Pod) name; default: the header's Pod.
- ``tail``: number of last lines, default 1000 (seed 02: the Logs tab reads the last 1000 lines),
  ``all`` or 0 for everything up to 100000 lines.
- ``previous``: ``true`` for the previous container instance (where there is one).
- ``ansi``: ``raw`` (default: the bytes the program wrote, colour codes included) or ``strip``
  (text without ANSI escape sequences; what the Logs tab's plain-text links use).

Answers ``text/plain; charset=utf-8``; 404 for a job the user may not see (``jobs.policy``),
for a Pod that is not one of the job's Workers, or for a log that does not exist (any more);
409 with the Logs tab's sentence (``Pod <pod> is Pending; no logs yet.``, in the request's language) and the header
``X-Log-State: pending`` for a Worker whose Pod is still Pending (``jobs.observe.pending_log``), so that a client
tells it from an empty log (200 with no text); 400 for a bad ``tail``; 503 when the runtime cannot be reached.
Once a job is stopped or has finished, the full log kept by the log archive (jobs.control.log_archive) is served.
"""

from __future__ import annotations

from django.http import HttpResponse, StreamingHttpResponse
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework.views import APIView

from clusters.runtime.base import PodNotFound, RuntimeFailure
from jobs import policy
from jobs.models import Pod
from jobs.observe import ray_logs
from jobs.observe.pending_log import WorkerPending, read_current_log
from jobs.observe.status import DEFAULT_TAIL, MAX_TAIL, worker_rows
from rlark_console import ansi
from rlark_console.db_threads import release_connections


def _text(body: str, status: int = 200) -> HttpResponse:
    return HttpResponse(body, status=status, content_type="text/plain; charset=utf-8")


class JobLogsView(APIView):
    """The ``main`` container log of one Worker of a job."""

    @extend_schema(
        parameters=[
            OpenApiParameter("pod", str, description="Worker (Pod) name; default: the header's Pod"),
            OpenApiParameter("tail", str, description="last N lines (default 1000; 'all' or 0 = up to 100000)"),
            OpenApiParameter("previous", bool, description="the previous container instance"),
            OpenApiParameter("ansi", str, enum=["raw", "strip"], description="strip: without ANSI escape codes"),
        ],
        responses={(200, "text/plain"): OpenApiTypes.STR, (409, "text/plain"): OpenApiTypes.STR},
    )
    def get(self, request, name: str):
        job = policy.get_job_for(request.user, name)
        raw_tail = request.query_params.get("tail", str(DEFAULT_TAIL)).strip().lower()
        if raw_tail in ("all", "0", "-1"):
            tail = MAX_TAIL
        else:
            try:
                tail = int(raw_tail)
            except ValueError:
                return _text("tail must be a positive number or 'all'\n", 400)
            if tail < 1:
                return _text("tail must be a positive number or 'all'\n", 400)
            tail = min(tail, MAX_TAIL)
        previous = request.query_params.get("previous", "false").lower() in ("1", "true", "yes")
        pod = request.query_params.get("pod", "")
        mode = request.query_params.get("ansi", "raw")
        if mode not in ("raw", "strip"):
            return _text("ansi must be 'raw' or 'strip'\n", 400)
        if not pod:
            head = next((w for w in worker_rows(job) if w["head"]), None)
            if head is None:
                return _text("this job has no Workers yet\n", 404)
            pod = head["name"]
        try:
            text = read_current_log(job, pod, tail=tail, previous=previous)
            return _text(ansi.strip_text(text) if mode == "strip" else text)
        except WorkerPending as exc:
            response = _text(f"{exc.message()}\n", 409)
            response["X-Log-State"] = "pending"
            return response
        except Pod.DoesNotExist:
            return _text(f"worker {pod} is not part of job {job.name}\n", 404)
        except PodNotFound as exc:
            return _text(f"{exc}\n", 404)
        except RuntimeFailure as exc:
            return _text(f"{exc}\n", 404 if exc.reason == "not_found" else 503)


class JobRayLogsView(APIView):
    """``GET /api/v1/jobs/{name}/ray-logs/?pod=POD``: Ray's own log files of the Worker's failed runs as a tar.gz
    (``application/gzip``, attachment ``<job>-<pod>-ray-logs.tar.gz``); 404 for a job the user may not see, a Pod
    that is not one of its Workers, or a Worker with none kept (``jobs.observe.ray_logs``)."""

    @extend_schema(
        parameters=[OpenApiParameter("pod", str, description="Worker (Pod) name")],
        responses={(200, "application/gzip"): OpenApiTypes.BINARY},
    )
    def get(self, request, name: str):
        job = policy.get_job_for(request.user, name)
        pod = request.query_params.get("pod", "")
        try:
            chunks = ray_logs.open_bundle(job, pod)
        except Pod.DoesNotExist:
            return _text(f"worker {pod} is not part of job {job.name}\n", 404)
        except RuntimeFailure as exc:
            return _text(f"{exc}\n", 404 if exc.reason == "not_found" else 503)
        release_connections()  # the stream reads files: no pooled connection held for its length
        response = StreamingHttpResponse(chunks, content_type="application/gzip")
        response["Content-Disposition"] = f'attachment; filename="{job.name}-{pod}-ray-logs.tar.gz"'
        return response
