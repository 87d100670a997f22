"""One time zone per page, labelled (issue 14.8): pages show times in the active zone (the server's
``TIME_ZONE`` unless a request activates another) with its abbreviation, e.g. ``2026-12-01 22:40:17 CST``.

``label(value)`` formats a datetime (or an ISO 8601 string) that way; ``page_time_zone`` (a context processor)
gives every page ``page_tz`` = ``{"name", "abbr", "offset"}`` for the header's label.
"""

from __future__ import annotations

from datetime import UTC, datetime

from django.utils import timezone


def _aware(value: datetime | str | None) -> datetime | None:
    if isinstance(value, str):
        try:
            value = datetime.fromisoformat(value.replace("Z", "+00:00"))
        except ValueError:
            return None
    if not isinstance(value, datetime):
        return None
    return value if timezone.is_aware(value) else value.replace(tzinfo=UTC)


def label(value: datetime | str | None) -> str:
    """``YYYY-MM-DD HH:MM:SS ABBR`` in the active zone; ``—`` for None or unreadable input."""
    when = _aware(value)
    if when is None:
        return "—"
    local = timezone.localtime(when)
    return f"{local:%Y-%m-%d %H:%M:%S} {local.tzname()}"


def page_time_zone(request) -> dict:
    """Context processor: the page's zone (name, abbreviation, ``UTC+08:00``-style offset)."""
    now = timezone.localtime()
    offset = now.strftime("%z")
    return {
        "page_tz": {
            "name": str(timezone.get_current_timezone_name()),
            "abbr": now.tzname(),
            "offset": f"UTC{offset[:3]}:{offset[3:]}" if offset else "UTC",
        }
    }
