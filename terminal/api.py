"""The terminal app's REST API: ``POST /api/v1/jobs/{name}/exec/`` runs one command in a Worker (``rlark exec``).

Body (JSON): ``{"command": ["sh", "-c", "..."], "worker": "rollout-1" (optional; default the Header),
"timeout": 60 (seconds, 1-600, optional)}``. Answers 200 ``{"pod", "output", "exitCode", "timedOut",
"droppedBytes"}`` (``exitCode`` null when the command outlived the timeout and was killed); 400 a bad body, 404 a
job the user may not see or no such Worker, 409 a Worker that does not run now, 503 a runtime that cannot be
reached, each as ``{"code", "detail"}``. The permission path and the audit are the WebTerminal's
(:mod:`terminal.services.command`).
"""

from __future__ import annotations

from django.utils.translation import gettext as _
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import extend_schema
from rest_framework.response import Response
from rest_framework.views import APIView

from rlark_console.clientaddr import request_address
from terminal.services import command

CODES = {400: "exec_invalid", 401: "not_authenticated", 404: "not_found", 409: "worker_not_running", 503: "runtime"}


class JobExecView(APIView):
    """Run one command in a Worker of job ``name`` and answer its output and exit code."""

    @extend_schema(request={"application/json": OpenApiTypes.OBJECT}, responses={200: OpenApiTypes.OBJECT})
    def post(self, request, name: str):
        body = request.data if isinstance(request.data, dict) else {}
        worker = body.get("worker") or ""
        try:
            job = command.check_access(request.user, name)
            if not isinstance(worker, str) or len(worker) > 253:
                raise command.CommandRefused(400, _("worker must be a Worker name"))
            argv, timeout = command.check_command(body.get("command"), body.get("timeout"))
            result = command.run_command(request.user, job, worker, argv, timeout, request_address(request))
        except command.CommandRefused as exc:
            return Response({"code": CODES.get(exc.status, "refused"), "detail": str(exc)}, status=exc.status)
        return Response(result.to_dict())
