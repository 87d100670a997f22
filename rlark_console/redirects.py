"""The one rule for ``next`` parameters: follow it only to this host (Django's url_has_allowed_host_and_scheme,
https required on https requests), else go to ``fallback``. ``//evil.example/``, ``https://evil.example``,
``/\\evil.example`` and ``javascript:`` all fall back."""

from __future__ import annotations

from django.http import HttpRequest
from django.utils.http import url_has_allowed_host_and_scheme


def safe_next(request: HttpRequest, target: str | None, fallback: str) -> str:
    """``target`` when it stays on this console, else ``fallback`` (a path or URL name for ``redirect``)."""
    target = (target or "").strip()
    if target and url_has_allowed_host_and_scheme(target, {request.get_host()}, require_https=request.is_secure()):
        return target
    return fallback
