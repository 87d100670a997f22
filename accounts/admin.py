"""Back office: the audit log (read-only) and API tokens (revocable, keys never stored)."""

from __future__ import annotations

from django.contrib import admin
from django.utils.translation import gettext_lazy as _
from django.utils.translation import gettext_noop

from accounts.models import APIToken, AuditEvent

# The admin index title set in rlark_console/urls.py; its translation lives in this app's catalog.
BACK_OFFICE_TITLE = gettext_noop("Back office")


@admin.register(AuditEvent)
class AuditEventAdmin(admin.ModelAdmin):
    list_display = ["at", "actor_name", "action", "object_type", "object_id", "remote_addr"]
    list_filter = ["action", "object_type"]
    search_fields = ["actor_name", "action", "object_type", "object_id"]
    date_hierarchy = "at"
    readonly_fields = ["at", "actor", "actor_name", "action", "object_type", "object_id", "detail", "remote_addr"]
    fields = readonly_fields

    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False

    def has_delete_permission(self, request, obj=None):
        return False


@admin.register(APIToken)
class APITokenAdmin(admin.ModelAdmin):
    list_display = ["name", "user", "prefix", "created_at", "last_used_at", "revoked"]
    list_filter = ["revoked"]
    search_fields = ["name", "prefix", "user__username"]
    readonly_fields = ["user", "name", "prefix", "created_at", "last_used_at"]
    fields = ["user", "name", "prefix", "created_at", "last_used_at", "revoked"]
    actions = ["revoke"]

    def has_add_permission(self, request):  # tokens are created by their owner; the key is shown once there
        return False

    @admin.action(description=_("Revoke selected tokens"))
    def revoke(self, request, queryset):
        from accounts import audit

        for token in queryset.filter(revoked=False):
            token.revoked = True
            token.save(update_fields=["revoked"])
            audit.record(request.user, "token.revoke", "api_token", token.pk, request=request, prefix=token.prefix)
