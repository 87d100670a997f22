"""Back office: the audit log (read-only) and API tokens (revocable, keys never stored)."""

from __future__ import annotations

from django.contrib import admin
from django.contrib.auth.decorators import login_not_required
from django.contrib.auth.views import redirect_to_login
from django.core.exceptions import PermissionDenied
from django.shortcuts import redirect
from django.urls import reverse
from django.utils.html import format_html_join
from django.utils.http import url_has_allowed_host_and_scheme
from django.utils.translation import gettext_lazy as _
from django.utils.translation import gettext_noop

from accounts.models import APIToken, AuditEvent


@login_not_required
def _admin_login(request, extra_context=None):
    """The back office signs in through the console's login page, which is rate limited and audited
    (accounts.views.RateLimitedLoginView); Django admin's own login form would bypass both."""
    target = request.GET.get("next") or reverse("admin:index")
    if not url_has_allowed_host_and_scheme(target, allowed_hosts={request.get_host()}):
        target = reverse("admin:index")
    if request.user.is_authenticated:
        if request.user.is_active and request.user.is_staff:
            return redirect(target)
        raise PermissionDenied("administrators only")
    return redirect_to_login(target, reverse("login"))


admin.site.login = _admin_login

# The admin index title set in rlark_console/urls.py; its translation lives in this app's catalog.
BACK_OFFICE_TITLE = gettext_noop("Back office")


@admin.register(AuditEvent)
class AuditEventAdmin(admin.ModelAdmin):
    list_display = ["when", "actor_name", "action", "object_type", "object_id", "summary", "remote_addr"]
    list_filter = ["action", "object_type"]
    search_fields = ["actor_name", "action", "object_type", "object_id", "detail__icontains"]
    date_hierarchy = "at"
    readonly_fields = ["at", "actor", "actor_name", "action", "object_type", "object_id", "detail", "remote_addr"]
    fields = readonly_fields

    @admin.display(description=_("time"), ordering="at")
    def when(self, obj):
        from django.utils import timezone

        return timezone.localtime(obj.at).strftime("%Y-%m-%d %H:%M:%S")

    @admin.display(description=_("detail"))
    def summary(self, obj):
        items = list((obj.detail or {}).items())[:6]
        return format_html_join(" ", "<code>{}={}</code>", ((k, str(v)[:80]) for k, v in items))

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
