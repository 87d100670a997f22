"""``/jobs/<name>/tensorboard/...``: the job's own TensorBoard, proxied behind the job's permission.

Every request checks ``jobs.policy.get_job_for`` (404 for a job the user may not see, as every job page), then
starts the job's TensorBoard if it is not running (``jobs.explain.tensorboard_server``) and forwards the request
to it on 127.0.0.1. TensorBoard runs with ``--path_prefix=/jobs/<name>/tensorboard``, so its HTML, scripts and
data URLs already point under this prefix; only the root ``url(/font-roboto/...)`` of its inlined CSS is moved
under it (``jobs.explain.tensorboard_assets``).
"""

from __future__ import annotations

import http.client

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.urls import path
from django.utils.translation import gettext as _
from django.views.decorators.csrf import csrf_exempt

from jobs import policy
from jobs.explain import tensorboard_assets, tensorboard_server

MAX_BODY = 1024 * 1024  # a request body TensorBoard's page sends (plugin queries) is far smaller
MAX_RESPONSE = 256 * 1024 * 1024
PASSED_REQUEST_HEADERS = ("Content-Type", "Accept", "X-XSRF-Protected", "If-None-Match")
PASSED_RESPONSE_HEADERS = ("Content-Type", "Content-Security-Policy", "Cache-Control", "Expires", "ETag")


def _reasons() -> dict[str, str]:
    return {
        "unset": _("No TensorBoard directory is set for this job."),
        "not_local": _(
            "The TensorBoard directory is on the cluster; the console can only read it on the local runtime."
        ),
        "no_mount": _("The TensorBoard directory is not under a host directory mount, so the console cannot read it."),
        "missing": _("The TensorBoard directory does not exist yet."),
        "start_failed": _("TensorBoard could not be started: %(detail)s"),
    }


# TensorBoard's page POSTs its plugin queries (reads, with TensorBoard's own X-XSRF-Protected header); the session
# cookie is SameSite=Lax, so another site cannot send them with the user's session.
@csrf_exempt
@login_required
def tensorboard(request: HttpRequest, name: str, rest: str = "") -> HttpResponse:
    job = policy.get_job_for(request.user, name)
    if request.method not in ("GET", "HEAD", "POST"):
        return HttpResponse(status=405)
    try:
        server = tensorboard_server.ensure(job)
    except tensorboard_server.TensorBoardUnavailable as exc:
        text = _reasons().get(exc.reason, str(exc)) % {"detail": str(exc)}
        return HttpResponse(text, status=404 if exc.reason != "start_failed" else 502, content_type="text/plain")
    body = request.body if request.method == "POST" else None
    if body is not None and len(body) > MAX_BODY:
        return HttpResponse(status=413)
    target = server.prefix + "/" + rest
    if request.META.get("QUERY_STRING"):
        target += "?" + request.META["QUERY_STRING"]
    headers = {h: request.headers[h] for h in PASSED_REQUEST_HEADERS if h in request.headers}
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=60)
    try:
        conn.request(request.method, target, body=body, headers=headers)
        upstream = conn.getresponse()
        data = upstream.read(MAX_RESPONSE)
    except OSError as exc:
        return HttpResponse(_reasons()["start_failed"] % {"detail": exc}, status=502, content_type="text/plain")
    finally:
        conn.close()
    tensorboard_server.touch(job.name)
    data = tensorboard_assets.rewrite_root_urls(data, upstream.getheader("Content-Type") or "", server.prefix)
    response = HttpResponse(data, status=upstream.status)
    for h in PASSED_RESPONSE_HEADERS:
        if upstream.getheader(h):
            response[h] = upstream.getheader(h)
    if upstream.status in (301, 302, 303, 307, 308) and upstream.getheader("Location"):
        response["Location"] = upstream.getheader("Location")
    response["X-Frame-Options"] = "SAMEORIGIN"
    return response


urlpatterns = [
    path("<str:name>/tensorboard/", tensorboard, name="tensorboard"),
    path("<str:name>/tensorboard/<path:rest>", tensorboard, name="tensorboard-path"),
]
