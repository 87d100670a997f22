"""Websocket Origin check: scheme, host AND port of the browser's ``Origin`` must equal the request's own
origin (its ``Host`` header, itself in ALLOWED_HOSTS, with the connection's scheme) or one of
``CSRF_TRUSTED_ORIGINS`` (``https://*.example.com`` allows subdomains, as Django's CSRF check does).
Another port or scheme on an allowed host is refused; so is a missing Origin.

The request's scheme is ``https`` for ``wss`` connections, or when a trusted proxy
(``RLARK_TRUSTED_PROXIES``) says ``X-Forwarded-Proto: https``.
"""

from __future__ import annotations

from urllib.parse import urlsplit

from channels.security.websocket import WebsocketDenier
from django.conf import settings
from django.http.request import split_domain_port, validate_host

from rlark_console.clientaddr import forwarded_scheme

DEFAULT_PORTS = {"http": 80, "https": 443}
Origin = tuple[str, str, int]


def parse_origin(value: str) -> Origin | None:
    """``"https://Console.example.com"`` -> ``("https", "console.example.com", 443)``; None if not http(s)."""
    try:
        parts = urlsplit(value.strip())
        port = parts.port
    except ValueError:
        return None
    scheme = parts.scheme.lower()
    if scheme not in DEFAULT_PORTS or not parts.hostname:
        return None
    return scheme, parts.hostname.lower().rstrip("."), port or DEFAULT_PORTS[scheme]


def _header(scope, name: bytes) -> str | None:
    for key, value in scope.get("headers", ()):
        if key.lower() == name:
            return value.decode("latin-1")
    return None


def own_origin(scope) -> Origin | None:
    """The origin the request was addressed to, or None when its Host is not in ALLOWED_HOSTS."""
    host = _header(scope, b"host") or ""
    domain, port = split_domain_port(host)
    if not domain or not validate_host(domain, settings.ALLOWED_HOSTS):
        return None
    scheme = forwarded_scheme(scope) or ("https" if scope.get("scheme") in ("wss", "https") else "http")
    if scheme not in DEFAULT_PORTS:
        return None
    try:
        number = int(port) if port else DEFAULT_PORTS[scheme]
    except ValueError:
        return None
    return scheme, domain.rstrip("."), number


def _trusted_match(origin: Origin, pattern: str) -> bool:
    trusted = parse_origin(pattern.replace("://*.", "://wildcard-placeholder.", 1))
    if trusted is None or trusted[0] != origin[0] or trusted[2] != origin[2]:
        return False
    if "://*." in pattern:
        suffix = trusted[1][len("wildcard-placeholder") :]
        return origin[1].endswith(suffix)
    return trusted[1] == origin[1]


def origin_allowed(scope) -> bool:
    """True when the websocket's Origin is the request's own origin or a CSRF-trusted one."""
    raw = _header(scope, b"origin")
    origin = parse_origin(raw) if raw else None
    if origin is None:
        return False
    if origin == own_origin(scope):
        return True
    return any(_trusted_match(origin, pattern) for pattern in settings.CSRF_TRUSTED_ORIGINS)


class OriginValidator:
    """ASGI middleware: refuses (403 at the handshake) websockets whose Origin fails :func:`origin_allowed`."""

    def __init__(self, application):
        self.application = application

    async def __call__(self, scope, receive, send):
        if scope["type"] == "websocket" and not origin_allowed(scope):
            denier = WebsocketDenier()
            return await denier(scope, receive, send)
        return await self.application(scope, receive, send)
