"""Network domains (virtual networks for cross-cluster Workers) and their IP allocations."""

from __future__ import annotations

from django.db import models
from django.utils.translation import gettext_lazy as _

from clusters.models import dns_label


class Domain(models.Model):
    """A virtual IPv4 network; ``cidr`` is a canonical private network (seed 04)."""

    name = models.CharField(_("name"), max_length=63, unique=True, validators=[dns_label])
    cidr = models.CharField(_("CIDR"), max_length=18)
    created_at = models.DateTimeField(_("created"), auto_now_add=True)

    class Meta:
        ordering = ["name"]
        verbose_name = _("network domain")
        verbose_name_plural = _("network domains")

    def __str__(self) -> str:
        return f"{self.name} ({self.cidr})"


class IPAllocation(models.Model):
    """One virtual IP held by one Worker Pod (key: cluster/namespace/pod name)."""

    domain = models.ForeignKey(Domain, on_delete=models.CASCADE, related_name="allocations")
    ip = models.GenericIPAddressField(_("IP"), protocol="IPv4")
    pod_key = models.CharField(_("Pod"), max_length=300)
    job = models.CharField(_("job"), max_length=63, blank=True)
    task = models.CharField(_("task"), max_length=253, blank=True)
    created_at = models.DateTimeField(_("allocated"), auto_now_add=True)

    class Meta:
        ordering = ["domain__name", "created_at"]
        constraints = [
            models.UniqueConstraint(fields=["domain", "ip"], name="ip_unique_per_domain"),
            models.UniqueConstraint(fields=["domain", "pod_key"], name="pod_unique_per_domain"),
        ]
        verbose_name = _("IP allocation")
        verbose_name_plural = _("IP allocations")

    def __str__(self) -> str:
        return f"{self.ip} -> {self.pod_key}"
