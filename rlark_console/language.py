"""The language of a request or a websocket's page: ``zh-hans`` or ``en``.

:func:`lang` reads the active language, which LocaleMiddleware set for the request, or names the language of a
given code; :func:`translate` renders a catalog message (an English msgid) in the language of a code, for the
messages a caller asks for in a language it names (an API body, a run record). Every message has one source: the
gettext catalogs (English msgids, their Chinese in ``*/locale/zh_Hans``). Channels runs no LocaleMiddleware, so
:func:`scope_language` picks a websocket's language as Django does for a page: the ``django_language`` cookie
(``LANGUAGE_COOKIE_NAME``, set by the language switch), else the browser's ``Accept-Language``, else
``LANGUAGE_CODE`` (zh-hans). The request body limit uses it too, for the message of a refused body.
"""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.utils import translation
from django.utils.translation import gettext
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


def lang(code: str | None = None) -> str:
    """``en`` or ``zh-hans``: of ``code`` when one is given (a code starting with ``en`` is English, any other
    Chinese), else of the active language (LocaleMiddleware reads the cookie or Accept-Language)."""
    if code is None:
        code = translation.get_language() or ""
    return "en" if str(code).lower().startswith("en") else "zh-hans"


def translate(message: str, code: str | None = None) -> str:
    """``message``, an English msgid of the catalogs, in the language :func:`lang` gives for ``code`` (the
    active language when ``code`` is None); the msgid itself when no catalog translates it."""
    target = lang(code)
    if translation.get_language() == target:
        return gettext(message)
    with translation.override(target):
        return gettext(message)
