"""Audit rows of bastion sessions (``sshgate.models.SSHSession``) and who is connected now.

One row per inner SSH connection to a Worker; it is created when the client has authenticated to the Worker and
closed (end, exit code of the last command, bytes, forwarded ports, reason) when the connection ends. Commands
are never recorded. Also mirrored to the audit log as ``ssh.open`` / ``ssh.session``. Synchronous (database).
"""

from __future__ import annotations

from django.contrib.auth import get_user_model
from django.utils import timezone

from accounts.audit import record
from sshgate.models import SSHSession


def open_row(identity, target, remote: str) -> int:
    """Create the row of a starting session; returns its id."""
    user = get_user_model().objects.filter(pk=identity.user_id).first()
    row = SSHSession.objects.create(
        user=user,
        username=identity.username,
        key_fingerprint=identity.fingerprint,
        job=target.job,
        worker=target.pod,
        remote_addr=remote[:64],
    )
    record(user, "ssh.open", "pod", target.pod, job=target.job, session=row.pk, key=identity.fingerprint)
    return row.pk


def close_row(
    row_id: int, exit_code: int | None, bytes_in: int, bytes_out: int, ports: list, channels: list, reason: str
) -> None:
    """End the row (idempotent: an ended row is left as it is)."""
    row = SSHSession.objects.filter(pk=row_id, ended_at__isnull=True).select_related("user").first()
    if row is None:
        return
    row.ended_at = timezone.now()
    row.exit_code = exit_code
    row.bytes_in, row.bytes_out = bytes_in, bytes_out
    row.forwarded_ports = sorted(set(ports))
    row.channels = sorted(set(channels))
    row.end_reason = reason[:200]
    row.save()
    record(
        row.user,
        "ssh.session",
        "pod",
        row.worker,
        job=row.job,
        session=row.pk,
        key=row.key_fingerprint,
        started=row.started_at.isoformat(),
        ended=row.ended_at.isoformat(),
        exit_code=exit_code,
        bytes_in=bytes_in,
        bytes_out=bytes_out,
        forwarded_ports=row.forwarded_ports,
        reason=row.end_reason,
    )


def close_stale(reason: str = "bastion restarted") -> int:
    """End rows a previous bastion process left open (it died without closing them)."""
    return SSHSession.objects.filter(ended_at__isnull=True).update(ended_at=timezone.now(), end_reason=reason)


def connected_now(job: str) -> list[SSHSession]:
    """Sessions into ``job``'s Workers that are open now (the job page's "connected now")."""
    return list(SSHSession.objects.filter(job=job, ended_at__isnull=True).order_by("started_at"))
