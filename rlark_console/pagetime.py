"""One time zone per page, labelled: pages show times in the active zone (the server's
``TIME_ZONE`` unless a request activates another) with its abbreviation, e.g. ``2026-12-01 22:40:17 CST``.

``label(value)`` formats a datetime (or an ISO 8601 string) that way; ``page_time_zone`` (a context processor)
gives every page ``page_tz`` = ``{"name", "abbr", "offset", "abbrs"}``: the header's label (now), and for the
scripts that format times themselves (static/js/pagetime.js) the zone's abbreviation per UTC offset, so a time on
the other side of a daylight-saving change gets its own (New York: ``-05:00`` EST in January, ``-04:00`` EDT in
July), not the one of now.
"""

from __future__ import annotations

import functools
import json
from datetime import UTC, datetime, timedelta, tzinfo

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


def offset_text(delta: timedelta | None) -> str:
    """``+08:00`` / ``-04:00`` / ``+05:45`` (as ``Intl``'s longOffset gives it, without ``GMT``)."""
    minutes = round((delta or timedelta()).total_seconds() / 60)
    sign = "-" if minutes < 0 else "+"
    return f"{sign}{abs(minutes) // 60:02d}:{abs(minutes) % 60:02d}"


@functools.lru_cache(maxsize=64)
def _abbreviations(zone: tzinfo, year: int) -> str:
    """JSON ``{offset: abbreviation}`` of ``zone`` from ``year`` - 3 to ``year`` + 1 (weekly samples: every
    daylight-saving period lasts months); a later abbreviation for the same offset wins."""
    out: dict[str, str] = {}
    when = datetime(year - 3, 1, 1, tzinfo=UTC)
    end = datetime(year + 2, 1, 1, tzinfo=UTC)
    while when < end:
        local = when.astimezone(zone)
        out[offset_text(local.utcoffset())] = local.tzname() or ""
        when += timedelta(days=7)
    return json.dumps(out, sort_keys=True)


def page_time_zone(request) -> dict:
    """Context processor: the page's zone (name, abbreviation, ``UTC+08:00``-style offset)."""
    now = timezone.localtime()
    offset = now.strftime("%z")
    return {
        "page_tz": {
            "name": str(timezone.get_current_timezone_name()),
            "abbr": now.tzname(),
            "offset": f"UTC{offset[:3]}:{offset[3:]}" if offset else "UTC",
            "abbrs": _abbreviations(timezone.get_current_timezone(), now.year),
        }
    }
