"""Back office for storage classes: S3 fields as form fields, the secret write-only (never rendered)."""

from __future__ import annotations

from django import forms
from django.contrib import admin
from django.utils.translation import gettext_lazy as _
from django.utils.translation import gettext_noop

from storage import services
from storage.models import StorageClass

# Fallback zh translations for the ImageRegistry model (clusters app) whose API and services live in this app;
# the clusters catalog, listed earlier in INSTALLED_APPS, wins when it has its own.
REGISTRY_STRINGS = (
    gettext_noop("image registry"),
    gettext_noop("image registries"),
    gettext_noop("registry host"),
    gettext_noop("username"),
    gettext_noop("password"),
    gettext_noop("public (no credentials needed)"),
)


class StorageClassForm(forms.ModelForm):
    """Edits ``parameters`` through separate fields and validates with :mod:`storage.services`."""

    endpoint = forms.CharField(label=_("Endpoint"), required=False, help_text=_("e.g. https://s3.example.com"))
    bucket = forms.CharField(label=_("Bucket"), required=False)
    region = forms.CharField(label=_("Region"), required=False)
    access_key_id = forms.CharField(label=_("Access Key ID"), required=False)
    secret_input = forms.CharField(
        label=_("Access Key Secret"),
        required=False,
        widget=forms.PasswordInput(render_value=False, attrs={"autocomplete": "new-password"}),
        help_text=_("Stored encrypted and never shown again. Leave empty to keep the current secret."),
    )
    path_style = forms.BooleanField(label=_("Path-style addressing"), required=False)
    storage_class_name = forms.CharField(
        label=_("Kubernetes StorageClass"), required=False, help_text=_("Name of an existing StorageClass")
    )

    class Meta:
        model = StorageClass
        fields = ["cluster", "name", "provider", "description"]
        labels = {"cluster": _("Cluster")}

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        params = self.instance.parameters or {}
        for key in ("endpoint", "bucket", "region", "access_key_id", "path_style", "storage_class_name"):
            if key in params:
                self.fields[key].initial = params[key]
        if self.instance.pk:
            self.fields["cluster"].disabled = True
            self.fields["name"].disabled = True
            if self.instance.secret:
                self.fields["secret_input"].help_text = _(
                    "A secret is stored (encrypted). Leave empty to keep it, or enter a new one to replace it."
                )

    def clean(self):
        cleaned = super().clean()
        data = {**cleaned, "secret": cleaned.get("secret_input") or ""}
        existing = self.instance if self.instance.pk else None
        try:
            params, secret = services.clean_storage_class(data, existing)
        except services.StorageError as exc:
            for field, message in exc.errors.items():
                self.add_error("secret_input" if field == "secret" else field, message)
            return cleaned
        self.instance.parameters = params
        if secret is not None:
            self.instance.secret = secret
        if cleaned.get("provider") != StorageClass.Provider.S3:
            self.instance.secret = ""
        return cleaned


@admin.register(StorageClass)
class StorageClassAdmin(admin.ModelAdmin):
    form = StorageClassForm
    list_display = ["name", "cluster_name", "provider", "description", "target", "has_secret", "created_at"]
    list_filter = ["provider", "cluster"]
    search_fields = ["name", "description", "cluster__name"]
    fieldsets = [
        (None, {"fields": ["cluster", "name", "provider", "description"]}),
        (
            _("S3-compatible object storage"),
            {"fields": ["endpoint", "bucket", "region", "access_key_id", "secret_input", "path_style"]},
        ),
        (_("Existing Kubernetes StorageClass"), {"fields": ["storage_class_name"]}),
    ]

    @admin.display(description=_("Cluster"), ordering="cluster__name")
    def cluster_name(self, obj):
        return obj.cluster.name

    @admin.display(description=_("Target"))
    def target(self, obj):
        p = obj.parameters or {}
        if obj.provider == StorageClass.Provider.S3:
            return f"{p.get('endpoint', '')} / {p.get('bucket', '')}"
        return p.get("storage_class_name", "")

    @admin.display(description=_("Secret stored"), boolean=True)
    def has_secret(self, obj):
        return bool(obj.secret)
