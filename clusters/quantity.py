"""Kubernetes resource quantities (``"500m"``, ``"64Gi"``, ``8``) as numbers: cores, bytes or counts."""

from __future__ import annotations

import functools
import math
import re

_QUANTITY = re.compile(r"^([+-]?(?:\d+(?:\.\d*)?|\.\d+))(Ki|Mi|Gi|Ti|Pi|Ei|m|k|M|G|T|P|E|[eE][+-]?\d+)?$")
_SUFFIX = {
    "": 1,
    "Ki": 2**10,
    "Mi": 2**20,
    "Gi": 2**30,
    "Ti": 2**40,
    "Pi": 2**50,
    "Ei": 2**60,
    "m": 1e-3,
    "k": 1e3,
    "M": 1e6,
    "G": 1e9,
    "T": 1e12,
    "P": 1e15,
    "E": 1e18,
}


# Kubernetes keeps a quantity as a 64-bit integer of its scale: anything beyond 2^63-1 is rejected by the API
# server (resource.Quantity), and a bound keeps absurd values (``1e308``) out of messages and pages.
MAX_QUANTITY = float(2**63 - 1)


def parse_quantity(value) -> float:
    """Parse a quantity; raises ``ValueError`` for anything Kubernetes would reject (or a bool/None), including a
    value that is not finite or beyond :data:`MAX_QUANTITY` in magnitude."""
    if isinstance(value, bool) or value is None:
        raise ValueError(f"invalid quantity {value!r}")
    if isinstance(value, int | float):
        number = float(value)
    else:
        text = str(value)
        if len(text) > 64:
            raise ValueError("invalid quantity: longer than 64 characters")
        number = _parse_text(text)
    if not math.isfinite(number) or abs(number) > MAX_QUANTITY:
        raise ValueError(f"quantity out of range: {str(value)[:32]}")
    return number


@functools.lru_cache(maxsize=4096)
def _parse_text(text: str) -> float:
    m = _QUANTITY.match(text.strip())
    if not m:
        raise ValueError(f"invalid quantity {text!r}")
    number, suffix = float(m.group(1)), m.group(2) or ""
    if suffix[:1] in ("e", "E"):
        return number * 10 ** int(suffix[1:])
    return number * _SUFFIX[suffix]


def is_quantity(value) -> bool:
    """True when ``parse_quantity`` accepts ``value`` and it is not negative."""
    try:
        return parse_quantity(value) >= 0
    except ValueError:
        return False


def format_number(value: float) -> str:
    """``2.0`` -> ``"2"``, ``0.5`` -> ``"0.5"`` (for messages)."""
    return str(int(value)) if float(value).is_integer() else f"{value:g}"
