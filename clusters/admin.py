"""Back office for clusters, nodes and image registries (issue 5).

The kubeconfig is write-only: uploaded as a file or pasted into a textarea, checked by a connectivity test
before it is saved (encrypted), never rendered back (not even masked) and never logged. Registry passwords
are write-only the same way (blank keeps the stored one).
"""

from __future__ import annotations

from django import forms
from django.contrib import admin, messages
from django.utils.translation import gettext_lazy as _

from accounts.audit import record
from clusters.models import Cluster, ImageRegistry, Node
from clusters.runtime.base import RuntimeFailure
from clusters.services import node_sync
from clusters.services.registration import RegistrationError, normalise_kubeconfig, set_cordon, test_connection


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
        ]

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
        if runtime == Cluster.Runtime.KUBERNETES:
            has_config = bool(self._new_kubeconfig) or bool(cluster.pk and cluster.kubeconfig)
            if not data.get("in_cluster") and not has_config:
                raise forms.ValidationError(_("A Kubernetes cluster needs a kubeconfig or the in-cluster mode."))
            if not data.get("skip_connection_test"):
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
    list_display = ("name", "runtime", "status", "status_message", "namespace", "node_count", "last_sync_at")
    list_filter = ("runtime", "status")
    search_fields = ("name",)
    readonly_fields = ("status", "status_message", "last_sync_at", "credentials")
    actions = ["sync_nodes"]
    fieldsets = (
        (None, {"fields": ("name", "runtime", "namespace", "pod_cidr", "service_cidr", "allow_host_path")}),
        (
            _("Credentials"),
            {"fields": ("in_cluster", "credentials", "kubeconfig_file", "kubeconfig_text", "skip_connection_test")},
        ),
        (_("Status"), {"fields": ("status", "status_message", "last_sync_at")}),
    )

    @admin.display(description=_("nodes"))
    def node_count(self, obj):
        return obj.nodes.count()

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
                _("%(name)s: %(n)d nodes") % {"name": cluster.name, "n": result.nodes}
                if result.ok
                else (f"{cluster.name}: {result.error}")
            )
            self.message_user(request, text, level)


@admin.register(Node)
class NodeAdmin(admin.ModelAdmin):
    list_display = ("name", "cluster", "category", "gpu_model", "online", "unschedulable", "last_seen")
    list_filter = ("cluster", "category", "gpu_model", "online", "unschedulable")
    search_fields = ("name",)
    readonly_fields = ("capacity", "allocatable", "used", "last_seen")
    actions = ["cordon", "uncordon"]

    def _set(self, request, queryset, value: bool):
        done = 0
        for node in queryset.select_related("cluster"):
            try:
                set_cordon(node, value, actor=request.user, request=request)
                done += 1
            except RuntimeFailure as exc:
                self.message_user(request, f"{node.cluster.name}/{node.name}: {exc}", messages.ERROR)
        if done:
            msg = _("Cordoned %(n)d nodes.") if value else _("Uncordoned %(n)d nodes.")
            self.message_user(request, msg % {"n": done}, messages.SUCCESS)

    @admin.action(description=_("Cordon (no new Workers; running ones keep running)"))
    def cordon(self, request, queryset):
        self._set(request, queryset, True)

    @admin.action(description=_("Uncordon (resume scheduling)"))
    def uncordon(self, request, queryset):
        self._set(request, queryset, False)


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
