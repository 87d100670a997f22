"""A delivery's last error, stored as its English msgid and parameters (``{"m": msgid, "p": {...}}`` JSON, at most
500 characters) so each page and API answer shows it in its own language; :func:`render` gives the sentence."""

from __future__ import annotations

import json
from typing import Any

from django.utils.translation import gettext

MAX_STORED = 500


def encode(msgid: str, params: dict[str, Any] | None = None) -> str:
    """The stored form of one error (``msgid`` marked with ``gettext_noop`` where it is written)."""
    stored = json.dumps({"m": msgid, "p": params or {}}, ensure_ascii=False)
    if len(stored) > MAX_STORED:
        stored = json.dumps({"m": msgid[: MAX_STORED - 20], "p": {}}, ensure_ascii=False)[:MAX_STORED]
    return stored


def render(stored: str) -> str:
    """The error in the active language ("" for none); a value not in the stored form is shown as it is."""
    if not stored:
        return ""
    try:
        doc = json.loads(stored)
        text = gettext(doc["m"])
        return text % doc["p"] if doc.get("p") else text
    except (ValueError, KeyError, TypeError):
        return stored
