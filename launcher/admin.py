"""The back office's user page, put together from the apps' parts: the accounts app's user admin (tokens, actions),
the user's SSH keys (sshkeys) and their jobs (jobs). It lives here, above every app, so that no app imports one
above it."""

from __future__ import annotations

from django.contrib import admin
from django.contrib.auth import get_user_model

from accounts.admin import ConsoleUserAdmin
from jobs.admin import UserJobsAdmin
from sshkeys.admin import SSHKeyInline


class UserAdmin(UserJobsAdmin, ConsoleUserAdmin):
    """Users in the back office: :class:`accounts.admin.ConsoleUserAdmin` with the user's SSH keys and jobs."""

    inlines = [*ConsoleUserAdmin.inlines, SSHKeyInline]


admin.site.unregister(get_user_model())
admin.site.register(get_user_model(), UserAdmin)
