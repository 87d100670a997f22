"""Back office: every user's SSH public keys (read-only key material)."""

from django.contrib import admin
from django.utils.translation import gettext_lazy as _

from sshkeys.models import SSHPublicKey


@admin.register(SSHPublicKey)
class SSHPublicKeyAdmin(admin.ModelAdmin):
    list_display = ["name", "owner", "key_type", "bits", "fingerprint", "created_at"]
    list_filter = ["key_type"]
    search_fields = ["name", "owner__username", "fingerprint"]
    readonly_fields = ["owner", "key", "key_type", "bits", "fingerprint", "created_at"]
    fields = ["owner", "name", "key", "key_type", "bits", "fingerprint", "created_at"]

    def has_add_permission(self, request):  # keys are added by their owners (page or API) where they are validated
        return False


class SSHKeyInline(admin.TabularInline):
    """A user's SSH public keys on their page in the back office (read only; ``launcher.admin`` adds it)."""

    model = SSHPublicKey
    fields = ["name", "key_type", "bits", "fingerprint", "created_at"]
    readonly_fields = fields
    extra = 0
    verbose_name_plural = _("SSH public keys")

    def has_add_permission(self, request, obj=None):
        return False
