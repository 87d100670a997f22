"""One audit row per SSH session through the bastion.

Recorded: user, key fingerprint, job, Worker, start and end, exit code, bytes in and out, forwarded ports.
Never the commands. ``ended_at`` is NULL while the session is connected (the job page's "connected now").
"""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.utils.translation import gettext_lazy as _


class SSHSession(models.Model):
    """One inner SSH connection to a Worker (everything a ``ssh -J`` / ``scp`` / ``sftp`` run does)."""

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, related_name="+")
    username = models.CharField(_("user"), max_length=150)
    key_fingerprint = models.CharField(_("key fingerprint"), max_length=100)
    job = models.CharField(_("job"), max_length=63, db_index=True)
    worker = models.CharField(_("Worker"), max_length=253)
    remote_addr = models.CharField(_("client address"), max_length=64, blank=True)
    started_at = models.DateTimeField(_("started"), auto_now_add=True)
    ended_at = models.DateTimeField(_("ended"), null=True, blank=True)
    exit_code = models.IntegerField(_("exit code"), null=True, blank=True)
    bytes_in = models.PositiveBigIntegerField(_("bytes in"), default=0)
    bytes_out = models.PositiveBigIntegerField(_("bytes out"), default=0)
    forwarded_ports = models.JSONField(_("forwarded ports"), default=list, blank=True)
    channels = models.JSONField(_("channels"), default=list, blank=True)  # e.g. ["shell", "exec", "sftp"]
    end_reason = models.CharField(_("end reason"), max_length=200, blank=True)

    class Meta:
        ordering = ["-started_at"]
        verbose_name = _("SSH session")
        verbose_name_plural = _("SSH sessions")

    def __str__(self) -> str:
        return f"{self.username}@{self.worker}"
