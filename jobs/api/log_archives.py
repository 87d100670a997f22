"""Kept logs of deleted jobs (``jobs.control.log_archive``).

- ``GET /api/v1/log-archives/``: ``[{"id", "job", "owner", "deletedAt", "expiresAt", "capBytes", "cut": [..],
  "files": [{"pod", "previous", "bytes"}], "rayLogs": [{"pod", "bytes"}]}]``, the archives the user may read
  (staff: all; others: their own jobs'), newest first.
- ``GET /api/v1/log-archives/{id}/logs/?pod=POD&previous=false``: the full log as ``text/plain``
  (attachment ``<job>-<pod>[-previous].log``, streamed); with ``ray=true`` the Ray logs of the Pod's failed runs
  (``application/gzip``, ``<job>-<pod>-ray-logs.tar.gz``). 404 for an archive or Pod the user may not read.
"""

from __future__ import annotations

from django.http import HttpResponse, StreamingHttpResponse
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework.response import Response
from rest_framework.views import APIView

from jobs import policy
from jobs.control import log_archive
from rlark_console.db_threads import release_connections


def visible_archives(user) -> list[dict]:
    return [a for a in log_archive.deleted_archives() if policy.can_view_log_archive(user, a.get("ownerId"))]


class LogArchiveListView(APIView):
    """Deleted jobs whose Worker logs are still kept."""

    @extend_schema(responses={200: OpenApiTypes.OBJECT})
    def get(self, request):
        return Response([{k: v for k, v in a.items() if k != "ownerId"} for a in visible_archives(request.user)])


def ray_logs_response(path, filename: str) -> StreamingHttpResponse:
    """A streamed tar.gz of archived Ray logs (shared by the job's and the deleted jobs' endpoints)."""
    release_connections()  # the stream reads a file: no pooled connection held for its length
    response = StreamingHttpResponse(log_archive.raw_chunks(path), content_type="application/gzip")
    response["Content-Disposition"] = f'attachment; filename="{filename}"'
    return response


def archive_response(user, archive_id: str, pod: str, previous: bool, ray: bool = False):
    """The streamed full log (``ray``: the Ray logs' tar.gz), or a 404 text response (shared by the API and the
    page)."""
    entry = next((a for a in visible_archives(user) if a["id"] == archive_id), None)
    base = log_archive.deleted_dir(archive_id) if entry else None
    if ray:
        path = log_archive.find_ray("", pod, base=base) if base and pod else None
        if path is None:
            return HttpResponse("no such archived log\n", status=404, content_type="text/plain; charset=utf-8")
        return ray_logs_response(path, f"{entry['job']}-{pod}-ray-logs.tar.gz")
    path = log_archive.find("", pod, previous, base=base) if base and pod else None
    if path is None or not any(f["pod"] == pod and f["previous"] == previous for f in entry["files"]):
        return HttpResponse("no such archived log\n", status=404, content_type="text/plain; charset=utf-8")
    release_connections()  # the stream reads a file: no pooled connection held for its length
    response = StreamingHttpResponse(log_archive.chunks(path), content_type="text/plain; charset=utf-8")
    name = f"{entry['job']}-{pod}{'-previous' if previous else ''}.log"
    response["Content-Disposition"] = f'attachment; filename="{name}"'
    return response


class LogArchiveLogView(APIView):
    """One Worker's full archived log of a deleted job."""

    @extend_schema(
        parameters=[
            OpenApiParameter("pod", str, description="Worker (Pod) name"),
            OpenApiParameter("previous", bool, description="the previous container instance"),
            OpenApiParameter("ray", bool, description="the Ray logs of the Pod's failed runs (tar.gz)"),
        ],
        responses={(200, "text/plain"): OpenApiTypes.STR, (200, "application/gzip"): OpenApiTypes.BINARY},
    )
    def get(self, request, archive_id: str):
        flag = lambda name: request.query_params.get(name, "false").lower() in ("1", "true", "yes")  # noqa: E731
        pod = request.query_params.get("pod", "")
        return archive_response(request.user, archive_id, pod, flag("previous"), ray=flag("ray"))
