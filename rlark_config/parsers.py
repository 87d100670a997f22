"""How one environment value becomes a typed setting.

Each parser takes the raw string of a variable that is set (possibly empty) and returns the value, or raises
``ValueError`` with a short reason (:func:`rlark_config.loading.load` adds the variable's name). The parsers keep
the readings the console has always had: four spellings of "on" are in use, and each setting keeps its own.
"""

from __future__ import annotations

import ipaddress
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

Parser = Callable[[str], Any]
TRUE_WORDS = frozenset({"1", "true", "yes", "on"})


def text(raw: str) -> str:
    """The value as it is."""
    return raw


def stripped(raw: str) -> str:
    """The value without surrounding blanks."""
    return raw.strip()


def text_or_none(raw: str) -> str | None:
    """The value; None when empty (the setting then falls back, e.g. to a generated key)."""
    return raw or None


def path(raw: str) -> Path:
    """A filesystem path (not resolved)."""
    return Path(raw)


def words_flag(raw: str) -> bool:
    """True for ``1``/``true``/``yes``/``on`` (any case, blanks ignored), else False."""
    return raw.strip().lower() in TRUE_WORDS


def one_flag(raw: str) -> bool:
    """True only for exactly ``1``."""
    return raw == "1"


def not_zero_flag(raw: str) -> bool:
    """False only for exactly ``0``."""
    return raw != "0"


def any_flag(raw: str) -> bool:
    """True for any non-empty value."""
    return bool(raw)


def comma_list(raw: str) -> tuple[str, ...]:
    """Comma-separated items, blanks stripped, empty items dropped."""
    return tuple(item.strip() for item in raw.split(",") if item.strip())


def path_list(raw: str) -> tuple[str, ...]:
    """Paths separated by ``os.pathsep`` (``:``), empty items dropped."""
    return tuple(item for item in raw.split(os.pathsep) if item)


def ipv4_list(most: int) -> Parser:
    """A :func:`comma_list` of at most ``most`` IPv4 addresses."""

    def parse(raw: str) -> tuple[str, ...]:
        items = comma_list(raw)
        if len(items) > most:
            raise ValueError(f"at most {most} addresses, got {len(items)}")
        for item in items:
            try:
                ipaddress.IPv4Address(item)
            except ValueError:
                raise ValueError(f"{item!r} is not an IPv4 address") from None
        return items

    return parse


def number(kind: type[int] | type[float], low: float | None = None, high: float | None = None) -> Parser:
    """An ``int`` or ``float`` within ``[low, high]`` (either end may be open); outside, a ``ValueError``."""

    def parse(raw: str) -> int | float:
        try:
            value = kind(raw)
        except ValueError:
            raise ValueError(f"{raw!r} is not {'an integer' if kind is int else 'a number'}") from None
        if (low is not None and value < low) or (high is not None and value > high):
            raise ValueError(f"{raw!r} is {_span(low, high)}")
        return value

    return parse


def clamped_int(low: int, high: int | None = None, empty: int | None = None) -> Parser:
    """An ``int`` pulled into ``[low, high]`` (values outside are moved to the nearest end, not refused);
    ``empty`` is the value of a set but empty (or blank) variable, None for "as if unset"."""

    def parse(raw: str) -> int | None:
        if not raw.strip():
            return empty
        try:
            value = int(raw)
        except ValueError:
            raise ValueError(f"{raw!r} is not an integer") from None
        value = max(low, value)
        return value if high is None else min(high, value)

    return parse


def port_or_none(raw: str) -> int | None:
    """A TCP port (0..65535); None when empty."""
    return number(int, 0, 65535)(raw) if raw else None


def _span(low: float | None, high: float | None) -> str:
    if low is not None and high is not None:
        return f"outside {low:g}..{high:g}"
    return f"less than {low:g}" if low is not None else f"more than {high:g}"
