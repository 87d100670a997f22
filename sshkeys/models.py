"""Users' SSH public keys, injected into Workers' ``~/.ssh/authorized_keys``."""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.utils.translation import gettext_lazy as _


class SSHPublicKey(models.Model):
    """One public key of one user. ``key`` is normalised to ``<type> <base64>``."""

    owner = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="ssh_keys")
    name = models.CharField(_("name"), max_length=128)
    key = models.TextField(_("public key"))
    key_type = models.CharField(_("type"), max_length=64, blank=True)
    bits = models.PositiveIntegerField(_("bits"), null=True, blank=True)
    fingerprint = models.CharField(_("fingerprint"), max_length=100)
    created_at = models.DateTimeField(_("added"), auto_now_add=True)

    class Meta:
        ordering = ["owner__username", "created_at"]
        constraints = [models.UniqueConstraint(fields=["owner", "fingerprint"], name="ssh_key_unique_per_owner")]
        verbose_name = _("SSH public key")
        verbose_name_plural = _("SSH public keys")

    def __str__(self) -> str:
        return f"{self.name} ({self.fingerprint})"
