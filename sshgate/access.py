"""Who may use the bastion and which Worker a ``<pod>:22`` names.

- A key authenticates user ``U`` only while it is one of U's registered keys (``sshkeys.SSHPublicKey``, looked up
  at every authentication, so a deleted key stops working at once) and U is active. No passwords.
- A Worker is reached only when ``jobs.policy.can_view_job`` allows the job, exactly as for the WebTerminal
  (owner or staff). Not-found and not-permitted get the same message, so other users' Worker names do not leak.
- The Worker must be Running as the runtime reports it now (``terminal.services.logs.resolve_targets``, the
  WebTerminal's own resolution); otherwise one clear line says why.

All functions here are synchronous and touch the database (call them with ``sync_to_async``).
"""

from __future__ import annotations

import dataclasses

from django.contrib.auth import get_user_model

from jobs.policy import can_view_job
from sshkeys.models import SSHPublicKey

SSH_PORT = 22


class Denied(Exception):
    """Refused; ``str(exc)`` is the one-line message the SSH client prints."""


@dataclasses.dataclass(frozen=True)
class Identity:
    """An authenticated bastion user: the console user and the key that proved it."""

    user_id: int
    username: str
    fingerprint: str
    is_staff: bool


@dataclasses.dataclass(frozen=True)
class WorkerTarget:
    """A Running Worker the identity may reach (from ``terminal.services.logs.LogTarget``)."""

    job: str
    pod: str
    namespace: str
    cluster: object  # clusters.models.Cluster
    rank: int


def authenticate(username: str, fingerprint: str) -> Identity | None:
    """The identity when ``fingerprint`` (``SHA256:…``) is a registered key of active user ``username``."""
    user = get_user_model().objects.filter(username=username, is_active=True).first()
    if user is None or not SSHPublicKey.objects.filter(owner=user, fingerprint=fingerprint).exists():
        return None
    return Identity(user.pk, user.username, fingerprint, bool(user.is_staff))


def still_valid(identity: Identity) -> bool:
    """True while the key is still registered and the user active (re-checked for open sessions)."""
    return authenticate(identity.username, identity.fingerprint) is not None


def _job_for_host(host: str):
    """``(job, pod_known)`` for a Worker name: the recorded Pod's job, else the job whose name prefixes it."""
    from jobs.models import Job, Pod

    pod = Pod.objects.filter(name=host).select_related("task__job__owner").first()
    if pod is not None:
        return pod.task.job, True
    parts = host.split("-")
    names = ["-".join(parts[:i]) for i in range(len(parts) - 1, 0, -1)]
    job = Job.objects.filter(name__in=names).select_related("owner").order_by("-name").first()
    return job, False


def resolve_worker(identity: Identity, host: str, port: int) -> WorkerTarget:
    """The Worker ``host`` for ``identity``; raises Denied with the reason to show."""
    from terminal.services import logs

    if port != SSH_PORT:
        raise Denied(f"only port {SSH_PORT} of a Worker can be reached through the bastion (asked: {port})")
    user = get_user_model().objects.filter(pk=identity.user_id, is_active=True).first()
    job, _known = _job_for_host(host)
    if user is None or job is None or not can_view_job(user, job):
        raise Denied(f"permission denied: no Worker {host} that you may reach (or it does not exist)")
    if job.stopped:
        raise Denied(f"job {job.name} is stopped: start it again to reach Worker {host}")
    layout = logs.load_layout(job)
    targets, warnings = logs.resolve_targets(layout)
    target = next((t for t in targets if t.pod == host), None)
    ended = logs.ended_reason(layout, host)  # a finished job's Worker: say so, not "no Pod yet"
    if target is None or not target.exists:
        if ended:
            raise Denied(ended)
        if warnings:
            raise Denied(f"Worker {host} cannot be reached now: {warnings[0]}")
        raise Denied(f"job {job.name} has no Worker {host} (phase {job.phase}; it may not have a Pod yet)")
    if target.phase != "Running":
        raise Denied(ended or f"Worker {host} is {target.phase}, not Running: try again when it runs")
    return WorkerTarget(job.name, target.pod, target.namespace, target.cluster, target.rank)


def worker_running(target: WorkerTarget) -> str:
    """ "" while the Worker still runs, else the reason its sessions end (job stopped, Pod gone or finished)."""
    from jobs.models import Job
    from terminal.services import logs

    job = Job.objects.filter(name=target.job).first()
    if job is None:
        return f"job {target.job} was deleted"
    if job.stopped:
        return f"job {target.job} was stopped"
    layout = logs.load_layout(job)
    targets, warnings = logs.resolve_targets(layout)
    if warnings:
        return ""  # the runtime did not answer: not a reason to cut a working session
    now = next((t for t in targets if t.pod == target.pod), None)
    if now is None or not now.exists:
        return logs.ended_reason(layout, target.pod) or f"Worker {target.pod} is gone"
    if now.phase != "Running":
        return logs.ended_reason(layout, target.pod) or f"Worker {target.pod} is {now.phase}"
    return ""
