"""``GET /api/v1/ssh/``: the bastion's address, host key fingerprint and the Workers the caller may reach.

Only the Workers of jobs that run (Pending or Running, not stopped) are listed: a finished, failed or stopped job's
Workers cannot be reached, so ``rlark ssh-config`` writes no entry for them. ``?job=<name>`` limits the list to one
job (404 when the caller may not see it); ``job_phase`` then names that job's phase, so ``rlark ssh`` can say that
the job has finished. Used by ``rlark ssh`` and ``rlark ssh-config``. Shape: ``{"user", "host", "port", "jump",
"host_key_fingerprint", "known_hosts": [line], "workers": [{"job", "pod", "role", "rank", "head", "phase",
"command"}], "job_phase"?}``; ``known_hosts`` holds the bastion's and each listed Worker's host key in OpenSSH
``known_hosts`` format (:func:`sshgate.hostkeys.known_hosts_lines`).
"""

from __future__ import annotations

from drf_spectacular.utils import OpenApiParameter, extend_schema, inline_serializer
from rest_framework import serializers
from rest_framework.response import Response
from rest_framework.views import APIView

from jobs.models import Pod
from jobs.observe.headline import ENDED
from jobs.policy import get_job_for, visible_jobs
from sshgate import commands, hostkeys

MAX_WORKERS = 5000  # bound of one answer (a staff user sees every job's Workers)


class SSHTargetsView(APIView):
    """The bastion and the caller's reachable Workers (authentication required, policy applied)."""

    @extend_schema(
        parameters=[OpenApiParameter("job", str, description="only this job's Workers")],
        responses=inline_serializer(
            "SSHTargets",
            {
                "user": serializers.CharField(),
                "host": serializers.CharField(),
                "port": serializers.IntegerField(),
                "jump": serializers.CharField(),
                "host_key_fingerprint": serializers.CharField(),
                "known_hosts": serializers.ListField(child=serializers.CharField()),
                "workers": serializers.ListField(child=serializers.DictField()),
                "job_phase": serializers.CharField(required=False),
            },
        ),
    )
    def get(self, request):
        user = request.user
        name = request.query_params.get("job", "")
        named = get_job_for(user, name) if name else None
        jobs = visible_jobs(user).filter(stopped=False).exclude(phase__in=ENDED)  # jobs that run
        if named is not None:
            jobs = jobs.filter(pk=named.pk)
        pods = (
            Pod.objects.filter(task__job__in=jobs)
            .select_related("task__job")
            .order_by("task__job__name", "task__order", "ordinal")[:MAX_WORKERS]
        )
        pods = list(pods)
        host, port = commands.jump_address(request)
        extra = {"job_phase": named.phase} if named is not None else {}
        return Response(
            {
                **extra,
                "user": user.username,
                "host": host,
                "port": port,
                "jump": commands.jump_spec(user.username, request),
                "host_key_fingerprint": hostkeys.bastion_fingerprint(),
                "known_hosts": hostkeys.known_hosts_lines(host, port, [p.name for p in pods]),
                "workers": [
                    {
                        "job": p.task.job.name,
                        "pod": p.name,
                        "role": p.task.template_name,
                        "rank": p.task.rank_start + p.ordinal,
                        "head": p.task.head,
                        "phase": p.phase,
                        "command": commands.ssh_command(user.username, p.name, request),
                    }
                    for p in pods
                ],
            }
        )
