"""Clusters, their Nodes and image registry credentials."""

from __future__ import annotations

from django.core.validators import RegexValidator
from django.db import models
from django.utils.translation import gettext_lazy as _

from rlark_console.crypto import EncryptedTextField

dns_label = RegexValidator(
    r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$",
    _("Use lowercase letters, numbers or hyphens; do not start or end with a hyphen."),
)


class Cluster(models.Model):
    """A data-plane cluster: a real Kubernetes cluster or the embedded local runtime."""

    class Runtime(models.TextChoices):
        KUBERNETES = "kubernetes", _("Kubernetes")
        LOCAL = "local", _("Local")

    class Status(models.TextChoices):
        ONLINE = "online", _("Online")
        OFFLINE = "offline", _("Offline")
        DEGRADED = "degraded", _("Degraded")

    name = models.CharField(_("name"), max_length=63, unique=True, validators=[dns_label])
    runtime = models.CharField(_("runtime"), max_length=16, choices=Runtime.choices, default=Runtime.LOCAL)
    status = models.CharField(_("status"), max_length=16, choices=Status.choices, default=Status.OFFLINE)
    status_message = models.TextField(_("status message"), blank=True)
    namespace = models.CharField(_("namespace"), max_length=63, default="rlark-system", validators=[dns_label])
    pod_cidr = models.CharField(_("Pod CIDR"), max_length=43, blank=True)
    service_cidr = models.CharField(_("Service CIDR"), max_length=43, blank=True)
    in_cluster = models.BooleanField(_("in-cluster service account"), default=False)
    kubeconfig = EncryptedTextField(_("kubeconfig"), blank=True)
    allow_host_path = models.BooleanField(
        _("allow hostPath mounts"),
        default=False,
        help_text=_("Host directories need an administrator's confirmation before jobs can use them."),
    )
    host_path_roots = models.TextField(
        _("allowed host directories"),
        blank=True,
        default="",
        help_text=_(
            "One absolute path per line: hostPath volumes must lie in one of them (nothing is allowed when empty)."
            " <code>{user}</code> stands for the submitting user's name. System directories and the console's own"
            " files are always refused."
        ),
    )
    isolated_network = models.BooleanField(
        _("isolated network"),
        default=False,
        help_text=_(
            "Local clusters only: each Worker gets a network namespace of its own on the cluster's own bridge; "
            "Workers of other clusters cannot reach it. Needs the local runtime to run as root."
        ),
    )
    network_agent_image = models.CharField(
        _("network agent image"),
        max_length=512,
        blank=True,
        help_text=_(
            "Kubernetes clusters: the image of the network-domain sidecar (built from this repository with "
            "docker build --target netagent). Empty: rlark-console-netagent:latest."
        ),
    )
    last_sync_at = models.DateTimeField(_("last sync"), null=True, blank=True)
    created_at = models.DateTimeField(_("created"), auto_now_add=True)
    location = models.CharField(_("location"), max_length=128, blank=True)
    contact = models.CharField(_("contact"), max_length=255, blank=True)
    description = models.TextField(_("description"), blank=True, max_length=2000)
    last_error = models.TextField(_("last error"), blank=True)
    last_error_at = models.DateTimeField(_("last error at"), null=True, blank=True)
    offline_since = models.DateTimeField(_("offline since"), null=True, blank=True)

    class Meta:
        ordering = ["name"]
        verbose_name = _("cluster")
        verbose_name_plural = _("clusters")

    def __str__(self) -> str:
        return self.name


class Node(models.Model):
    """A node of a cluster as last synced. Resource maps: name -> number (cpu cores, memory bytes, counts).

    ``labels``/``annotations`` are the *effective* metadata every reader uses (selectors, category, GPU model):
    ``discovered_*`` (what the cluster reports) merged with ``console_*`` (what an admin set in the console) by
    ``clusters.services.node_metadata.merge``: console-owned keys win, discovered keys are kept for the rest.
    """

    cluster = models.ForeignKey(Cluster, on_delete=models.CASCADE, related_name="nodes", verbose_name=_("cluster"))
    name = models.CharField(_("name"), max_length=253)
    labels = models.JSONField(_("labels"), default=dict, blank=True)
    annotations = models.JSONField(_("annotations"), default=dict, blank=True)
    capacity = models.JSONField(_("capacity"), default=dict, blank=True)
    allocatable = models.JSONField(_("allocatable"), default=dict, blank=True)
    used = models.JSONField(_("used"), default=dict, blank=True)
    gpu_model = models.CharField(_("GPU model"), max_length=128, blank=True)
    category = models.CharField(_("category"), max_length=32, blank=True)
    online = models.BooleanField(_("online"), default=True)
    unschedulable = models.BooleanField(_("cordoned"), default=False)
    system = models.BooleanField(
        _("system node"),
        default=False,
        db_index=True,
        help_text=_("A control-plane node: hidden from node lists, totals and job matching."),
    )
    discovered_labels = models.JSONField(_("discovered labels"), default=dict, blank=True)
    discovered_annotations = models.JSONField(_("discovered annotations"), default=dict, blank=True)
    console_labels = models.JSONField(_("console labels"), default=dict, blank=True)
    console_annotations = models.JSONField(_("console annotations"), default=dict, blank=True)
    conditions = models.JSONField(_("conditions"), default=list, blank=True)
    events = models.JSONField(_("recent Warning events"), default=list, blank=True)
    images = models.JSONField(_("pulled images"), default=list, blank=True)
    last_seen = models.DateTimeField(_("last seen"), null=True, blank=True)

    class Meta:
        ordering = ["cluster__name", "name"]
        unique_together = [("cluster", "name")]
        verbose_name = _("node")
        verbose_name_plural = _("nodes")

    def __str__(self) -> str:
        return f"{self.cluster.name}/{self.name}"


class ClusterOutage(models.Model):
    """One finished offline period of a cluster (the current one, if any, is ``Cluster.offline_since``)."""

    cluster = models.ForeignKey(Cluster, on_delete=models.CASCADE, related_name="outages")
    started_at = models.DateTimeField(_("offline from"))
    ended_at = models.DateTimeField(_("back online at"))
    reason = models.TextField(_("reason"), blank=True)

    class Meta:
        ordering = ["-started_at"]
        verbose_name = _("offline period")
        verbose_name_plural = _("offline periods")

    def __str__(self) -> str:
        return f"{self.cluster.name} {self.started_at:%Y-%m-%d %H:%M} - {self.ended_at:%H:%M}"


class ImageRegistry(models.Model):
    """Credentials for pulling images whose reference starts with ``registry``."""

    name = models.CharField(_("name"), max_length=63, unique=True, validators=[dns_label])
    registry = models.CharField(_("registry host"), max_length=253)
    username = models.CharField(_("username"), max_length=253, blank=True)
    password = EncryptedTextField(_("password"), blank=True)
    public = models.BooleanField(_("public (no credentials needed)"), default=False)
    created_at = models.DateTimeField(_("created"), auto_now_add=True)

    class Meta:
        ordering = ["name"]
        verbose_name = _("image registry")
        verbose_name_plural = _("image registries")

    def __str__(self) -> str:
        return self.registry
