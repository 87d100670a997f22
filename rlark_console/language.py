"""The language of a request or a websocket's page: ``zh-hans`` or ``en``.

:func:`lang` reads the active language, which LocaleMiddleware set for the request; the messages kept in
``(zh, en)`` pairs choose with it. Channels runs no LocaleMiddleware, so :func:`scope_language` picks a websocket's
language as Django does for a page: the ``django_language`` cookie (``LANGUAGE_COOKIE_NAME``, set by the language
switch), else the browser's ``Accept-Language``, else ``LANGUAGE_CODE`` (zh-hans). The request body limit uses it
too, for the message of a refused body.
"""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.utils import translation
from django.utils.translation.trans_real import parse_accept_lang_header

MAX_HEADER = 512  # bytes of Accept-Language looked at


def scope_language(scope: dict[str, Any]) -> str:
    """A supported language code (``zh-hans`` / ``en``) for the websocket ``scope``."""
    candidates = [(scope.get("cookies") or {}).get(settings.LANGUAGE_COOKIE_NAME) or ""]
    for name, value in scope.get("headers") or []:
        if name == b"accept-language":
            header = value[:MAX_HEADER].decode("latin-1", "replace")
            candidates += [code for code, _q in parse_accept_lang_header(header)]
    for code in candidates:
        if code and code != "*":
            try:
                return translation.get_supported_language_variant(code)
            except LookupError:
                continue
    return settings.LANGUAGE_CODE


def lang() -> str:
    """``en`` or ``zh-hans`` from the active language (LocaleMiddleware reads the cookie or Accept-Language)."""
    return "en" if (translation.get_language() or "").lower().startswith("en") else "zh-hans"
