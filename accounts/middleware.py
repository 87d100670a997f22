"""Login enforcement: every page needs a logged-in user (the API answers 401/403 itself)."""

from __future__ import annotations

from django.conf import settings
from django.contrib.auth.middleware import LoginRequiredMiddleware as _DjangoLoginRequired


class LoginRequiredMiddleware(_DjangoLoginRequired):
    """Django's LoginRequiredMiddleware, except for the REST API (DRF authenticates
    sessions and tokens and answers 401/403) and static files."""

    exempt_prefixes = ("/api/", "/" + settings.STATIC_URL.lstrip("/"))

    def process_view(self, request, view_func, view_args, view_kwargs):  # noqa: D102
        if request.path.startswith(self.exempt_prefixes):
            return None
        return super().process_view(request, view_func, view_args, view_kwargs)
