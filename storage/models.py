"""Storage classes per cluster (object storage or an existing Kubernetes StorageClass)."""

from __future__ import annotations

from django.db import models
from django.utils.translation import gettext_lazy as _

from clusters.models import Cluster, dns_label
from rlark_console.crypto import EncryptedTextField


class StorageClass(models.Model):
    """A storage class users can mount. ``parameters``: endpoint, bucket, region,
    access_key_id, path_style (S3) or storage_class_name (Kubernetes). The S3
    secret key is in ``secret`` (encrypted, never returned by the API)."""

    class Provider(models.TextChoices):
        S3 = "s3", _("S3-compatible object storage")
        KUBERNETES = "kubernetes", _("Existing Kubernetes StorageClass")

    cluster = models.ForeignKey(Cluster, on_delete=models.CASCADE, related_name="storage_classes")
    name = models.CharField(_("name"), max_length=63, validators=[dns_label])
    provider = models.CharField(_("provider"), max_length=16, choices=Provider.choices, default=Provider.S3)
    description = models.CharField(_("description"), max_length=255, blank=True)
    parameters = models.JSONField(_("parameters"), default=dict, blank=True)
    secret = EncryptedTextField(_("secret"), blank=True)
    created_at = models.DateTimeField(_("created"), auto_now_add=True)

    class Meta:
        ordering = ["cluster__name", "name"]
        unique_together = [("cluster", "name")]
        verbose_name = _("storage class")
        verbose_name_plural = _("storage classes")

    def __str__(self) -> str:
        return f"{self.name} ({self.cluster.name})"
