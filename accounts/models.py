"""API tokens and the audit log."""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.utils.translation import gettext_lazy as _

from rlark_console.crypto import EncryptedTextField


class APIToken(models.Model):
    """A per-user API token. Only a SHA-256 hash of the key is stored; ``prefix`` (first 8 chars) identifies it."""

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="api_tokens")
    name = models.CharField(_("name"), max_length=128)
    prefix = models.CharField(_("prefix"), max_length=12, db_index=True)
    key_hash = models.CharField(_("key hash"), max_length=64, unique=True)
    created_at = models.DateTimeField(_("created"), auto_now_add=True)
    last_used_at = models.DateTimeField(_("last used"), null=True, blank=True)
    revoked = models.BooleanField(_("revoked"), default=False)

    class Meta:
        ordering = ["-created_at"]
        verbose_name = _("API token")
        verbose_name_plural = _("API tokens")

    def __str__(self) -> str:
        return f"{self.name} ({self.prefix}…)"


class AuditEvent(models.Model):
    """Who did what to which object, when. ``detail`` never holds secrets."""

    actor = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, blank=True, related_name="+"
    )
    actor_name = models.CharField(_("actor"), max_length=150, blank=True)
    action = models.CharField(_("action"), max_length=64)
    object_type = models.CharField(_("object type"), max_length=64, blank=True)
    object_id = models.CharField(_("object"), max_length=255, blank=True)
    detail = models.JSONField(_("detail"), default=dict, blank=True)
    remote_addr = models.CharField(_("address"), max_length=64, blank=True)
    at = models.DateTimeField(_("time"), auto_now_add=True, db_index=True)

    class Meta:
        ordering = ["-at"]
        verbose_name = _("audit event")
        verbose_name_plural = _("audit events")

    def __str__(self) -> str:
        return f"{self.at:%Y-%m-%d %H:%M:%S} {self.actor_name} {self.action} {self.object_type}:{self.object_id}"


class TrackingCredential(models.Model):
    """A user's experiment-tracking credential (W&B or SwanLab): an API key, encrypted at rest, an optional
    self-hosted host URL and, for W&B, an optional entity (team or user name; not secret, ``WANDB_ENTITY``). A
    job picks credentials by ``name`` (``spec.trackingCredentials``); the key reaches its Workers only through a
    Secret (``clusters.tracking_secret``), never the job's document, pages or logs."""

    class Kind(models.TextChoices):
        WANDB = "wandb", "W&B"
        SWANLAB = "swanlab", "SwanLab"

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="tracking_credentials")
    name = models.CharField(_("name"), max_length=63)
    kind = models.CharField(_("tracking service"), max_length=16, choices=Kind.choices)
    api_key = EncryptedTextField(_("API key"))
    host = models.CharField(_("self-hosted URL"), max_length=255, blank=True)
    entity = models.CharField(_("W&B entity"), max_length=64, blank=True)
    created_at = models.DateTimeField(_("created"), auto_now_add=True)

    class Meta:
        ordering = ["name"]
        constraints = [models.UniqueConstraint(fields=["user", "name"], name="tracking_credential_user_name")]
        verbose_name = _("tracking credential")
        verbose_name_plural = _("tracking credentials")

    def __str__(self) -> str:
        return f"{self.name} ({self.kind})"
