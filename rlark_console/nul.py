"""No NUL characters in requests (odd input is a 400, never a 500).

PostgreSQL text and jsonb cannot store U+0000, so a NUL anywhere in a path, query string, form field or JSON
string used to reach the database and fail there with a 500. One middleware refuses paths, query strings and
url-encoded form bodies that carry one; the JSON parsers check the parsed data (:func:`has_nul`).
"""

from __future__ import annotations

from typing import Any
from urllib.parse import unquote_to_bytes

from django.http import HttpResponseBadRequest, JsonResponse
from django.utils.translation import gettext as _

NUL_MESSAGE = "Text may not contain NUL (U+0000) characters."


def has_nul(value: Any) -> bool:
    """True when any string (key or value) in JSON-like ``value`` contains ``\\x00``. Iterative."""
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            if "\x00" in item:
                return True
        elif isinstance(item, dict):
            stack.extend(item.keys())
            stack.extend(item.values())
        elif isinstance(item, list | tuple):
            stack.extend(item)
    return False


def _encoded_nul(raw: bytes) -> bool:
    return b"\x00" in raw or (b"%00" in raw and b"\x00" in unquote_to_bytes(raw.replace(b"+", b" ")))


class RejectNulMiddleware:
    """400 (JSON for ``/api/``, text elsewhere, localized) for a NUL in the path, query or url-encoded body."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        bad = "\x00" in request.path or _encoded_nul(request.META.get("QUERY_STRING", "").encode("latin-1"))
        if not bad and request.content_type == "application/x-www-form-urlencoded" and request.method != "GET":
            bad = _encoded_nul(request.body)
        if bad:
            message = _(NUL_MESSAGE)
            if request.path.startswith("/api/"):
                return JsonResponse({"detail": message}, status=400)
            return HttpResponseBadRequest(message, content_type="text/plain; charset=utf-8")
        return self.get_response(request)
