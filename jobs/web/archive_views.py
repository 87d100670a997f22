"""Pages of the log archive: the kept logs of deleted jobs, listed and downloadable
until the retention period ends (``jobs.control.log_archive``; the API is ``jobs.api.log_archives``)."""

from __future__ import annotations

from datetime import datetime

from django.conf import settings
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.views.decorators.http import require_GET

from jobs.api.log_archives import archive_response, visible_archives


@login_required
@require_GET
def archive_list(request: HttpRequest) -> HttpResponse:
    """``/log-archives/``: deleted jobs whose Worker logs are still kept, with download links."""
    archives = visible_archives(request.user)
    for a in archives:
        a["deleted"] = datetime.fromisoformat(a["deletedAt"])
        a["expires"] = datetime.fromisoformat(a["expiresAt"])
    context = {"archives": archives, "retention_days": settings.RLARK_LOG_ARCHIVE_RETENTION_DAYS}
    return render(request, "jobs/log_archives.html", context)


@login_required
@require_GET
def archive_download(request: HttpRequest, archive_id: str) -> HttpResponse:
    """``/log-archives/<id>/download/?pod=&previous=&ray=``: one Worker's full log, or (``ray=1``) the Ray logs of
    its failed runs (attachment)."""
    previous = request.GET.get("previous", "") in ("1", "true")
    ray = request.GET.get("ray", "") in ("1", "true")
    return archive_response(request.user, archive_id, request.GET.get("pod", ""), previous, ray=ray)
