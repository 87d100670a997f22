"""Back office: read-only views of Jobs, their Tasks and Pods (changes go through the controller:
the job pages, the REST API or the CLI, so every action is reconciled and audited)."""

from __future__ import annotations

from django.contrib import admin
from django.urls import reverse
from django.utils.html import format_html_join
from django.utils.translation import gettext_lazy as _

from jobs.models import Job, Pod, SafetyApproval, Task
from jobs.observe.state_words import state_label


class ReadOnlyAdmin(admin.ModelAdmin):
    def has_add_permission(self, request, obj=None):
        return False

    def has_change_permission(self, request, obj=None):
        return False

    def has_delete_permission(self, request, obj=None):
        return False


class TaskInline(admin.TabularInline):
    model = Task
    extra = 0
    can_delete = False
    fields = ["name", "cluster", "namespace", "replicas", "ready_replicas", "rank_start", "phase", "message"]
    readonly_fields = fields
    show_change_link = True

    def has_add_permission(self, request, obj=None):
        return False

    def has_change_permission(self, request, obj=None):
        return False


@admin.register(Job)
class JobAdmin(ReadOnlyAdmin):
    """Read-only, except the log archive cap, which a superuser may set per job."""

    list_display = ["name", "display_name", "owner", "phase", "attempt", "stopped", "created_at", "finished_at"]
    list_filter = ["phase", "stopped"]
    search_fields = ["name", "display_name", "owner__username"]
    date_hierarchy = "created_at"
    inlines = [TaskInline]
    exclude = ["rlinf_config"]
    editable = ("log_archive_max_bytes",)

    def get_readonly_fields(self, request, obj=None):
        return [f.name for f in Job._meta.fields if f.name not in (*self.editable, "id", "rlinf_config")]

    def has_change_permission(self, request, obj=None):
        return bool(request.user.is_active and request.user.is_superuser)


@admin.register(Task)
class TaskAdmin(ReadOnlyAdmin):
    list_display = ["name", "job", "cluster", "replicas", "ready_replicas", "rank_start", "phase"]
    list_filter = ["phase", "cluster"]
    search_fields = ["name", "job__name"]


@admin.register(Pod)
class PodAdmin(ReadOnlyAdmin):
    list_display = ["name", "task", "node", "ip", "phase", "restart_count", "exit_code", "started_at"]
    list_filter = ["phase"]
    search_fields = ["name", "task__name", "node"]


@admin.register(SafetyApproval)
class SafetyApprovalAdmin(ReadOnlyAdmin):
    """Safety approvals of robot jobs (given on the job page, the API or ``rlark approve``; never edited here)."""

    list_display = ["job", "approver_name", "approved_at", "spec_hash"]
    search_fields = ["job__name", "approver_name"]
    date_hierarchy = "approved_at"


class UserJobsAdmin(admin.ModelAdmin):
    """A user's jobs (the newest 50, linked to their pages) on their page in the back office; ``launcher.admin``
    mixes it into the user admin."""

    def get_readonly_fields(self, request, obj=None):
        return [*super().get_readonly_fields(request, obj), "user_jobs"]

    def get_fieldsets(self, request, obj=None):
        fieldsets = list(super().get_fieldsets(request, obj))
        if obj is not None:
            fieldsets.append((_("Jobs"), {"fields": ["user_jobs"]}))
        return fieldsets

    @admin.display(description=_("jobs of this user"))
    def user_jobs(self, obj):
        jobs = Job.objects.filter(owner=obj).order_by("-created_at")[:50]
        return (
            format_html_join(
                " ",
                '<a href="{}"><code>{}</code></a> {}',
                ((reverse("jobs:detail", args=[j.name]), j.name, state_label(j.phase)) for j in jobs),
            )
            or "—"
        )
