"""DRF authentication with per-user API tokens (``Authorization: Token <key>`` or ``Bearer <key>``)."""

from __future__ import annotations

import hashlib
import secrets
from datetime import timedelta

from django.utils import timezone
from django.utils.translation import gettext_lazy as _
from drf_spectacular.extensions import OpenApiAuthenticationExtension
from rest_framework import authentication, exceptions

from accounts.models import APIToken

TOKEN_BYTES = 30
LAST_USED_STEP = timedelta(seconds=60)  # "last used" is stored at most once a minute per token


def hash_key(key: str) -> str:
    """SHA-256 hex digest of a token key (only the hash is stored)."""
    return hashlib.sha256(key.encode()).hexdigest()


def issue_token(user, name: str) -> tuple[APIToken, str]:
    """Create a token for ``user``; returns (row, plaintext key). The key is shown once."""
    key = "rlk_" + secrets.token_urlsafe(TOKEN_BYTES)
    token = APIToken.objects.create(user=user, name=name, prefix=key[:12], key_hash=hash_key(key))
    return token, key


class APITokenAuthentication(authentication.BaseAuthentication):
    """Authenticate ``Authorization: Token|Bearer <key>`` against non-revoked APIToken rows."""

    keywords = ("token", "bearer")

    def authenticate(self, request):  # noqa: D102
        header = authentication.get_authorization_header(request).split()
        if not header or header[0].lower().decode(errors="replace") not in self.keywords:
            return None
        if len(header) != 2:
            raise exceptions.AuthenticationFailed(_("Invalid token header."))
        key = header[1].decode(errors="replace")
        try:
            token = APIToken.objects.select_related("user").get(key_hash=hash_key(key), revoked=False)
        except APIToken.DoesNotExist as exc:
            raise exceptions.AuthenticationFailed(_("Invalid or revoked token.")) from exc
        if not token.user.is_active:
            raise exceptions.AuthenticationFailed(_("User inactive."))
        now = timezone.now()
        if token.last_used_at is None or now - token.last_used_at >= LAST_USED_STEP:
            # not a write per API call (a busy script's every request waited for it): a minute's precision
            APIToken.objects.filter(pk=token.pk).update(last_used_at=now)
        return token.user, token

    def authenticate_header(self, request):  # noqa: D102
        return "Token"


class APITokenScheme(OpenApiAuthenticationExtension):
    """Documents token authentication in the OpenAPI schema."""

    target_class = "accounts.authentication.APITokenAuthentication"
    name = "tokenAuth"

    def get_security_definition(self, auto_schema):  # noqa: D102
        return {
            "type": "apiKey",
            "in": "header",
            "name": "Authorization",
            "description": 'API token from "API tokens": `Token <key>` (or `Bearer <key>`).',
        }
