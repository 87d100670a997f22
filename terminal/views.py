"""Pages of the terminal app: the Logs tab (page + embeddable panel), the full-log download,
and the WebTerminal page. Views are thin; rules live in ``terminal.services``."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator

from asgiref.sync import sync_to_async
from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpResponse, StreamingHttpResponse
from django.shortcuts import render
from django.utils.translation import gettext as _

from clusters.runtime.base import PodNotFound, RuntimeFailure
from jobs.policy import get_job_for
from rlark_console.db_threads import in_thread, release_connections
from terminal.services import logs
from terminal.services.panel import logs_panel_context, terminal_context


@login_required
def logs_page(request, job: str):
    """``/terminal/jobs/<job>/logs/``: the Logs tab as a page of its own."""
    job_obj = get_job_for(request.user, job)
    return render(request, "terminal/logs_page.html", logs_panel_context(request, job_obj))


@login_required
def logs_panel(request, job: str):
    """``/terminal/jobs/<job>/logs/panel/``: the Logs tab as a fragment (htmx or include)."""
    job_obj = get_job_for(request.user, job)
    return render(request, "terminal/logs_panel.html", logs_panel_context(request, job_obj))


def _close_quietly(it: Iterator[bytes]) -> None:
    close = getattr(it, "close", None)
    if close:
        close()


@login_required
async def download_log(request, job: str):
    """``/terminal/jobs/<job>/logs/download/?pod=<pod>[&previous=1]``: the whole ``main`` log,
    streamed chunk by chunk from ``Runtime.stream_log`` (constant memory; async iterator so the
    ASGI handler does not buffer it), named ``<job>-<role>-<pod>-<timestamp>.log``."""
    user = await request.auser()
    job_obj = await sync_to_async(get_job_for)(user, job)
    pod = request.GET.get("pod", "")
    previous = request.GET.get("previous") == "1"
    layout = await sync_to_async(logs.load_layout)(job_obj)
    targets, _warnings = await in_thread(logs.resolve_targets, layout)
    target = next((t for t in targets if t.pod == pod), None)
    if target is None:
        raise Http404("pod not found")
    target = target.with_container(request.GET.get("container", "main"))
    try:
        first, rest = await in_thread(logs.open_download, target, previous)
    except PodNotFound:
        return HttpResponse(
            _("Pod %(pod)s no longer exists; its logs are no longer available.") % {"pod": pod},
            status=404,
            content_type="text/plain; charset=utf-8",
        )
    except RuntimeFailure as exc:
        if exc.reason == "not_found":
            msg = _("%(pod)s has no previous container instance.") % {"pod": pod}
            return HttpResponse(msg, status=404, content_type="text/plain; charset=utf-8")
        return HttpResponse(str(exc), status=502, content_type="text/plain; charset=utf-8")

    await sync_to_async(release_connections)()  # the stream reads the runtime: no pooled connection held for it

    async def body() -> AsyncIterator[bytes]:
        try:
            if first:
                yield first
            while True:
                chunk = await in_thread(next, rest, None)
                if chunk is None:
                    return
                yield chunk
        finally:
            await in_thread(_close_quietly, rest)

    response = StreamingHttpResponse(body(), content_type="text/plain; charset=utf-8")
    name = logs.download_filename(job_obj.name, target.role, target.pod, previous=previous)
    response["Content-Disposition"] = f'attachment; filename="{name}"'
    response["X-Content-Type-Options"] = "nosniff"
    response["Cache-Control"] = "no-store"
    return response


@login_required
def terminal_page(request):
    """``/terminal/?job=<job>&worker=<pod>``: the WebTerminal (upstream-rlark 9)."""
    job_name = request.GET.get("job", "")
    worker = request.GET.get("worker", "")
    job_obj = get_job_for(request.user, job_name) if job_name else None
    return render(request, "terminal/terminal.html", terminal_context(request, job_obj, worker))
