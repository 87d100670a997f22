"""Request bodies larger than ``RLARK_MAX_REQUEST_BYTES`` are refused with a 413 before Django reads them.

Django's ASGI handler spools the whole body to a temporary file before any middleware or view runs, and the views
that take a body (job documents and RLinf configs, kubeconfigs, TensorBoard plugin queries) need kilobytes: a
50 MB upload was read, spooled and parsed for 18 s before the parser refused it. Two places refuse it early:

- :class:`BodyLimitMiddleware` wraps the ASGI application: a ``Content-Length`` above the limit is answered at
  once; a body without one (chunked) is counted as it arrives and answered as soon as it passes the limit, so
  Django never sees it. Any ASGI server.
- :class:`LimitedWebRequest` is daphne's request in the web tier's workers (``rlark_console.daphne_worker``):
  daphne buffers the whole body before it calls the application, so there the same check runs on the request's
  headers (``Content-Length``) and on every received chunk, and the connection is closed after the answer.

The answer is ``413`` in the request's language (``django_language`` cookie, else ``Accept-Language``):
``{"code": "request_too_large", "detail", "limit"}`` (JSON) under ``/api/``, a short HTML page elsewhere.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Iterable
from http.cookies import SimpleCookie
from typing import Any

from django.conf import settings
from django.utils import translation
from django.utils.translation import gettext as _

from rlark_console.language import scope_language

Scope = dict[str, Any]
Message = dict[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]


def max_request_bytes() -> int:
    """The largest request body accepted, in bytes (``RLARK_MAX_REQUEST_BYTES``; 0 or less: no limit)."""
    return int(settings.RLARK_MAX_REQUEST_BYTES or 0)


def declared_length(headers: Iterable[tuple[bytes, bytes]]) -> int | None:
    """The ``Content-Length`` of raw ASGI ``headers`` in bytes; None when absent or not a number."""
    for name, value in headers:
        if name.lower() == b"content-length":
            try:
                return int(value)
            except ValueError:
                return None
    return None


def request_language(headers: Iterable[tuple[bytes, bytes]]) -> str:
    """The supported language (``zh-hans`` / ``en``) a page would use for a request with raw ``headers``."""
    headers = list(headers)
    cookies: dict[str, str] = {}
    for name, value in headers:
        if name.lower() == b"cookie":
            jar = SimpleCookie()
            try:
                jar.load(value.decode("latin-1"))
            except Exception:  # noqa: BLE001 - a malformed cookie header only loses the language choice
                continue
            cookies.update({key: morsel.value for key, morsel in jar.items()})
    lowered = [(name.lower(), value) for name, value in headers]
    return scope_language({"cookies": cookies, "headers": lowered})


def too_large_response(
    path: str, headers: Iterable[tuple[bytes, bytes]]
) -> tuple[int, list[tuple[bytes, bytes]], bytes]:
    """``(413, response headers, body)`` for a request to ``path``: JSON under ``/api/``, else HTML; the text is
    in the request's language (:func:`request_language`)."""
    limit = max_request_bytes()
    with translation.override(request_language(headers)):
        detail = _("The request is too large: at most %(megabytes)s MB are accepted.") % {
            "megabytes": f"{limit / 2**20:g}"
        }
    if path.startswith("/api/"):
        body = json.dumps({"code": "request_too_large", "detail": detail, "limit": limit}, ensure_ascii=False)
        content_type = b"application/json"
    else:
        body = f"<!doctype html><title>413</title><p>{detail}</p>"
        content_type = b"text/html; charset=utf-8"
    raw = body.encode()
    response_headers = [
        (b"content-type", content_type),
        (b"content-length", str(len(raw)).encode()),
        (b"connection", b"close"),
    ]
    return 413, response_headers, raw


async def send_too_large(scope: Scope, send: Send) -> None:
    """Answer the HTTP ``scope`` with :func:`too_large_response`."""
    status, headers, body = too_large_response(scope.get("path", ""), scope.get("headers") or [])
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


class BodyLimitMiddleware:
    """ASGI middleware: 413 for an HTTP request whose body is larger than :func:`max_request_bytes`."""

    def __init__(self, application: Callable[[Scope, Receive, Send], Awaitable[None]]) -> None:
        self.application = application

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:  # noqa: D102
        limit = max_request_bytes()
        if scope["type"] != "http" or limit <= 0:
            return await self.application(scope, receive, send)
        length = declared_length(scope.get("headers") or [])
        if length is not None:
            if length > limit:
                return await send_too_large(scope, send)
            return await self.application(scope, receive, send)
        messages = await self._read_within(receive, limit)
        if messages is None:
            return await send_too_large(scope, send)
        return await self.application(scope, _replay(messages, receive), send)

    @staticmethod
    async def _read_within(receive: Receive, limit: int) -> list[Message] | None:
        """The body's messages of a request without ``Content-Length``, or None once more than ``limit`` bytes
        arrived (the rest is not read) or the client went away (nothing to answer)."""
        messages: list[Message] = []
        total = 0
        while True:
            message = await receive()
            messages.append(message)
            if message["type"] != "http.request":
                return messages
            total += len(message.get("body", b""))
            if total > limit:
                return None
            if not message.get("more_body", False):
                return messages


def _replay(messages: list[Message], receive: Receive) -> Receive:
    """A ``receive`` that gives ``messages`` first, then what ``receive`` gives."""
    pending = list(messages)

    async def replay() -> Message:
        if pending:
            return pending.pop(0)
        return await receive()

    return replay
