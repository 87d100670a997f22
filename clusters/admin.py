"""Back office for clusters, nodes and image registries.

The kubeconfig is write-only: uploaded as a file or pasted into a textarea, checked by a connectivity test
before it is saved (encrypted), never rendered back (not even masked) and never logged. Registry passwords
are write-only the same way (blank keeps the stored one).
"""

from __future__ import annotations

from django import forms
from django.contrib import admin, messages
from django.utils.translation import gettext_lazy as _
from django.utils.translation import ngettext

from accounts.audit import record
from clusters import (
    host_paths,
    node_admin,  # noqa: F401  (registers Node)
)
from clusters.models import Cluster, ImageRegistry
from clusters.services import cluster_contents, cluster_profile, node_sync, registration
from clusters.services.registration import RegistrationError, normalise_kubeconfig, test_connection


class ClusterForm(forms.ModelForm):
    kubeconfig_file = forms.FileField(
        label=_("kubeconfig file"),
        required=False,
        help_text=_("Upload a kubeconfig. It is stored encrypted and never shown again."),
    )
    kubeconfig_text = forms.CharField(
        label=_("kubeconfig (paste)"),
        required=False,
        widget=forms.Textarea(attrs={"rows": 6, "autocomplete": "off", "spellcheck": "false"}),
        help_text=_("Or paste it here. Leave both empty to keep the stored kubeconfig."),
    )
    skip_connection_test = forms.BooleanField(label=_("skip the connectivity test"), required=False, initial=False)

    class Meta:
        model = Cluster
        fields = [
            "name",
            "runtime",
            "namespace",
            "in_cluster",
            "pod_cidr",
            "service_cidr",
            "allow_host_path",
            "host_path_roots",
            "isolated_network",
            "network_agent_image",
            "location",
            "contact",
            "description",
        ]

    def clean_host_path_roots(self) -> str:
        """One absolute path per line, none of them a system directory (``clusters.host_paths``)."""
        text = self.cleaned_data.get("host_path_roots") or ""
        try:
            host_paths.parse_roots(text)
        except host_paths.HostPathRefused as exc:
            raise forms.ValidationError(
                _(
                    "The allowed host directory %(path)s is invalid: it must be an absolute path and not a system"
                    " directory."
                ),
                params={"path": exc.params.get("path", "")},
            ) from None
        return text

    def clean(self):
        data = super().clean()
        upload = data.get("kubeconfig_file")
        text = data.get("kubeconfig_text") or ""
        if upload:
            text = upload.read().decode("utf-8", "replace")
        cluster = self.instance
        if text.strip():
            try:
                self._new_kubeconfig = normalise_kubeconfig(text)
            except RegistrationError as exc:
                raise forms.ValidationError({"kubeconfig_text": exc.message}) from None
        else:
            self._new_kubeconfig = None
        runtime = data.get("runtime")
        if data.get("isolated_network") and not (cluster.pk and cluster.isolated_network):
            if runtime != Cluster.Runtime.LOCAL:
                msg = _("Only a local cluster can have an isolated network.")
                raise forms.ValidationError({"isolated_network": msg})
            try:
                registration.check_isolated_network()
            except RegistrationError as exc:
                raise forms.ValidationError({"isolated_network": exc.message}) from None
        if runtime == Cluster.Runtime.KUBERNETES:
            has_config = bool(self._new_kubeconfig) or bool(cluster.pk and cluster.kubeconfig)
            if not data.get("in_cluster") and not has_config:
                raise forms.ValidationError(_("A Kubernetes cluster needs a kubeconfig or the in-cluster mode."))
            # replacing a registered cluster's credential is always tested first (no downtime: the old one stays
            # until the new one passes, clusters.services.rotation); skipping is for first registrations only
            rotating = bool(cluster.pk and self._new_kubeconfig)
            if rotating or not data.get("skip_connection_test"):
                probe = Cluster(
                    name=data.get("name") or "probe",
                    runtime=runtime,
                    namespace=data.get("namespace") or "rlark-system",
                    in_cluster=bool(data.get("in_cluster")),
                    kubeconfig=self._new_kubeconfig or (cluster.kubeconfig if cluster.pk else ""),
                )
                try:
                    test_connection(probe)
                except RegistrationError as exc:
                    raise forms.ValidationError(exc.message) from None
        return data

    def save(self, commit=True):
        cluster = super().save(commit=False)
        if getattr(self, "_new_kubeconfig", None):
            cluster.kubeconfig = self._new_kubeconfig
        if commit:
            cluster.save()
        return cluster


@admin.register(Cluster)
class ClusterAdmin(admin.ModelAdmin):
    form = ClusterForm
    list_display = ("name", "runtime", "status", "status_message", "location", "contact", "node_count", "last_sync_at")
    list_filter = ("runtime", "status")
    search_fields = ("name",)
    readonly_fields = (
        "status",
        "status_message",
        "last_sync_at",
        "credentials",
        "last_error",
        "last_error_at",
        "offline_since",
        "offline_periods",
        "namespaces",
        "storage_classes",
        "images",
    )
    actions = ["sync_nodes"]
    fieldsets = (
        (
            None,
            {
                "fields": (
                    "name",
                    "runtime",
                    "namespace",
                    "pod_cidr",
                    "service_cidr",
                    "allow_host_path",
                    "host_path_roots",
                    "isolated_network",
                    "network_agent_image",
                )
            },
        ),
        (_("Location and contact"), {"fields": ("location", "contact", "description")}),
        (
            _("Credentials"),
            {"fields": ("in_cluster", "credentials", "kubeconfig_file", "kubeconfig_text", "skip_connection_test")},
        ),
        (_("Status"), {"fields": ("status", "status_message", "last_sync_at")}),
        (_("Health history"), {"fields": ("last_error", "last_error_at", "offline_since", "offline_periods")}),
        (_("What the cluster has"), {"fields": ("namespaces", "storage_classes", "images")}),
    )

    def get_fieldsets(self, request, obj=None):
        fieldsets = super().get_fieldsets(request, obj)
        return fieldsets if obj is not None else fieldsets[:3]  # history and contents once registered

    @admin.display(description=_("offline periods (latest 20)"))
    def offline_periods(self, obj):
        return cluster_profile.offline_periods_html(obj)

    def _contents(self, obj):
        """The cluster's namespaces and StorageClasses, read once per page (two fields show them)."""
        cached = getattr(obj, "_rl_contents", None)
        if cached is None:
            cached = obj._rl_contents = cluster_contents.contents(obj)
        return cached

    @admin.display(description=_("namespaces"))
    def namespaces(self, obj):
        return cluster_profile.namespaces_html(self._contents(obj)[0])

    @admin.display(description=_("storage classes"))
    def storage_classes(self, obj):
        return cluster_profile.storage_classes_html(self._contents(obj)[1])

    @admin.display(description=_("images on its nodes"))
    def images(self, obj):
        return cluster_profile.images_html(obj)

    @admin.display(description=_("nodes"))
    def node_count(self, obj):
        return obj.nodes.filter(system=False).count()

    @admin.display(description=_("stored kubeconfig"))
    def credentials(self, obj):
        if obj.in_cluster:
            return _("in-cluster service account")
        return _("stored (encrypted, not shown)") if obj.pk and obj.kubeconfig else _("none")

    def save_model(self, request, obj, form, change):
        super().save_model(request, obj, form, change)
        record(
            request.user,
            "cluster.update" if change else "cluster.create",
            "cluster",
            obj.name,
            request=request,
            runtime=str(obj.runtime),
            kubeconfig_changed=bool(getattr(form, "_new_kubeconfig", None)),
        )
        if obj.runtime == Cluster.Runtime.KUBERNETES:
            result = node_sync.sync_cluster_nodes(obj, force=True)
            if not result.ok:
                self.message_user(request, result.error, messages.WARNING)

    @admin.action(description=_("Sync nodes now"))
    def sync_nodes(self, request, queryset):
        for cluster in queryset:
            result = node_sync.sync_cluster_nodes(cluster, force=True)
            level = messages.SUCCESS if result.ok else messages.ERROR
            text = (
                ngettext("%(name)s: %(n)d node", "%(name)s: %(n)d nodes", result.nodes)
                % {"name": cluster.name, "n": result.nodes}
                if result.ok
                else (f"{cluster.name}: {result.error}")
            )
            self.message_user(request, text, level)


class ImageRegistryForm(forms.ModelForm):
    password = forms.CharField(
        label=_("password"),
        required=False,
        widget=forms.PasswordInput(render_value=False, attrs={"autocomplete": "new-password"}),
        help_text=_("Write-only. Leave empty to keep the stored password."),
    )

    class Meta:
        model = ImageRegistry
        fields = ["name", "registry", "username", "password", "public"]

    def save(self, commit=True):
        reg = super().save(commit=False)
        new = self.cleaned_data.get("password")
        if new:
            reg.password = new
        elif reg.pk:
            reg.password = ImageRegistry.objects.get(pk=reg.pk).password
        if commit:
            reg.save()
        return reg


@admin.register(ImageRegistry)
class ImageRegistryAdmin(admin.ModelAdmin):
    form = ImageRegistryForm
    list_display = ("name", "registry", "username", "public", "created_at")
    search_fields = ("name", "registry")

    def save_model(self, request, obj, form, change):
        super().save_model(request, obj, form, change)
        record(
            request.user,
            "registry.update" if change else "registry.create",
            "image_registry",
            obj.name,
            request=request,
            password_changed=bool(form.cleaned_data.get("password")),
        )
