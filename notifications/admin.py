"""Back office: every user's notification channels (the URL readable by admins, the secret never shown), rules
and deliveries, read only (channels and rules are added by their owners, where they are validated)."""

from django.contrib import admin

from notifications.models import Channel, Delivery, Rule


class _ReadOnly(admin.ModelAdmin):
    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False


@admin.register(Channel)
class ChannelAdmin(_ReadOnly):
    list_display = ["name", "owner", "kind", "email", "language", "created_at"]
    list_filter = ["kind"]
    search_fields = ["name", "owner__username"]
    fields = ["owner", "name", "kind", "url", "email", "language", "created_at"]  # never the secret
    readonly_fields = fields


@admin.register(Rule)
class RuleAdmin(_ReadOnly):
    list_display = ["owner", "channel", "job", "events", "enabled", "last_status", "last_at"]
    list_filter = ["last_status", "enabled"]
    search_fields = ["owner__username", "job__name", "channel__name"]


@admin.register(Delivery)
class DeliveryAdmin(_ReadOnly):
    list_display = ["job", "rule", "key", "status", "attempts", "event_at", "delivered_at"]
    list_filter = ["status"]
    search_fields = ["job__name", "key"]
