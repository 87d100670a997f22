"""Back office: the audit log (read-only) and API tokens (revocable, keys never stored)."""

from __future__ import annotations

from django.contrib import admin, messages
from django.contrib.auth.admin import GroupAdmin, UserAdmin
from django.contrib.auth.decorators import login_not_required
from django.contrib.auth.models import Group
from django.contrib.auth.views import redirect_to_login
from django.core.exceptions import PermissionDenied
from django.shortcuts import redirect
from django.urls import reverse
from django.utils.html import format_html_join
from django.utils.translation import gettext_lazy as _
from django.utils.translation import gettext_noop, ngettext

from accounts import permission_labels, users
from accounts.models import APIToken, AuditEvent
from rlark_console.redirects import safe_next


@login_not_required
def _admin_login(request, extra_context=None):
    """The back office signs in through the console's login page, which is rate limited and audited
    (accounts.views.RateLimitedLoginView); Django admin's own login form would bypass both."""
    target = safe_next(request, request.GET.get("next"), reverse("admin:index"))
    if request.user.is_authenticated:
        if request.user.is_active and request.user.is_staff:
            return redirect(target)
        raise PermissionDenied("administrators only")
    return redirect_to_login(target, reverse("login"))


admin.site.login = _admin_login

# The admin index title set in launcher/urls.py; its translation lives in this app's catalog.
BACK_OFFICE_TITLE = gettext_noop("Back office")
# The hint of Django's admin/auth/user/add_form.html: Django 5.2's zh_Hans catalog has no translation for it.
USER_ADD_HINT = gettext_noop("After you’ve created a user, you’ll be able to edit more user options.")


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


class APITokenInline(admin.TabularInline):
    model = APIToken
    fields = ["name", "prefix", "created_at", "last_used_at", "revoked"]
    readonly_fields = ["name", "prefix", "created_at", "last_used_at"]
    extra = 0
    can_delete = False
    verbose_name_plural = _("API tokens")

    def has_add_permission(self, request, obj=None):
        return False


class ConsoleUserAdmin(UserAdmin):
    """Users in the back office: Django's UserAdmin plus each user's API tokens (revocable), the actions that
    deactivate, reactivate and reset passwords, and the permission picker in the page's language. The apps above
    add their parts (a user's SSH keys, their jobs) in ``launcher.admin``, which registers the whole."""

    inlines = [*UserAdmin.inlines, APITokenInline]
    list_display = ["username", "email", "is_staff", "is_active", "last_login", "date_joined"]
    actions = ["deactivate", "reactivate", "reset_passwords"]

    def formfield_for_manytomany(self, db_field, request, **kwargs):
        field = super().formfield_for_manytomany(db_field, request, **kwargs)
        if db_field.name == "user_permissions":
            permission_labels.localize_field(field)
        return field

    def save_model(self, request, obj, form, change):
        deactivating = change and "is_active" in form.changed_data and not obj.is_active
        super().save_model(request, obj, form, change)
        if deactivating:  # unticking "active" closes everything the user holds, as the action does
            users.deactivate_user(obj, actor=request.user, request=request)

    @admin.action(description=_("Deactivate (revoke tokens, end sessions and terminals)"))
    def deactivate(self, request, queryset):
        done = tokens = 0
        for user in queryset.exclude(pk=request.user.pk):
            result = users.deactivate_user(user, actor=request.user, request=request)
            done, tokens = done + 1, tokens + result.tokens
        self.message_user(
            request,
            ngettext("Deactivated %(n)d user;", "Deactivated %(n)d users;", done) % {"n": done}
            + ngettext(" %(t)d API token revoked.", " %(t)d API tokens revoked.", tokens) % {"t": tokens},
            messages.SUCCESS,
        )
        if queryset.filter(pk=request.user.pk).exists():
            self.message_user(request, _("You cannot deactivate yourself."), messages.WARNING)

    @admin.action(description=_("Reactivate"))
    def reactivate(self, request, queryset):
        for user in queryset:
            users.reactivate_user(user, actor=request.user, request=request)
        n = queryset.count()
        self.message_user(
            request, ngettext("Reactivated %(n)d user.", "Reactivated %(n)d users.", n) % {"n": n}, messages.SUCCESS
        )

    @admin.action(description=_("Reset passwords (shown once)"))
    def reset_passwords(self, request, queryset):
        for user in queryset:
            password = users.reset_password(user, actor=request.user, request=request)
            self.message_user(
                request,
                _("New password of %(user)s: %(password)s (shown once; their sessions were ended)")
                % {"user": user.username, "password": password},
                messages.WARNING,
            )


class ConsoleGroupAdmin(GroupAdmin):
    """Groups with their permission picker in the page's language (accounts.permission_labels)."""

    def formfield_for_manytomany(self, db_field, request, **kwargs):
        field = super().formfield_for_manytomany(db_field, request, **kwargs)
        if db_field.name == "permissions":
            permission_labels.localize_field(field)
        return field


admin.site.unregister(Group)
admin.site.register(Group, ConsoleGroupAdmin)
