"""One rule for times in the API: every datetime is ISO 8601 in UTC, written with ``Z``.

Serializer fields render in the active time zone (``+08:00`` with ``TIME_ZONE = Asia/Shanghai``) and services
call ``isoformat()`` on UTC values (``+00:00``); :class:`UTCJSONRenderer` (the API's renderer) normalises both,
and datetime objects, on the way out. Only a string that is exactly one ISO 8601 date-time with an offset is
rewritten, never text that merely contains one (log lines, messages).
"""

from __future__ import annotations

import re
from datetime import UTC, datetime
from typing import Any

from rest_framework.renderers import JSONRenderer

_ISO = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d(?::\d\d(?:\.\d{1,6})?)?(?:Z|[+-]\d\d:\d\d)$")


def utc_iso(value: datetime) -> str:
    """``value`` (aware) as ``YYYY-MM-DDTHH:MM:SS[.ffffff]Z``; a naive value is taken as UTC."""
    if value.tzinfo is None:
        value = value.replace(tzinfo=UTC)
    return value.astimezone(UTC).isoformat().replace("+00:00", "Z")


def normalise(data: Any) -> Any:
    """``data`` with every datetime (object or exact ISO string with an offset) in UTC ``Z`` form."""
    if isinstance(data, dict):
        return {k: normalise(v) for k, v in data.items()}
    if isinstance(data, (list, tuple)):
        return [normalise(v) for v in data]
    if isinstance(data, datetime):
        return utc_iso(data)
    if isinstance(data, str) and len(data) <= 40 and _ISO.match(data):
        try:
            return utc_iso(datetime.fromisoformat(data.replace("Z", "+00:00")))
        except ValueError:
            return data
    return data


class UTCJSONRenderer(JSONRenderer):
    """DRF's JSON renderer with :func:`normalise` applied to the response data."""

    def render(self, data, accepted_media_type=None, renderer_context=None):  # noqa: D102
        return super().render(normalise(data), accepted_media_type, renderer_context)
