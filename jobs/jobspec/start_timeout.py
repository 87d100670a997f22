"""``spec.startTimeout``: how long RLinf may wait for its nodes before the job fails (optional; off by default).

RLinf's ``Cluster`` waits for ``cluster.num_nodes`` Ray nodes without a timeout (rlinf.md 3 and 7), so a job whose
Workers never all join stays Running for ever. With ``startTimeout: <seconds>`` the status sync fails it, reason
``StartTimeout``, once RLinf's ``Waiting for N nodes to be ready`` has lasted longer (``jobs.observe.ray_nodes``).

A whole number of seconds from ``MIN_SECONDS`` to ``MAX_SECONDS``, or a string of digits with an ``s``, ``m`` or
``h`` suffix (``"900"``, ``"15m"``, ``"2h"``).
"""

from __future__ import annotations

import re
from typing import Any

from jobs.jobspec.messages import Problem

MIN_SECONDS = 30
MAX_SECONDS = 7 * 24 * 3600  # a week
_TEXT = re.compile(r"^\s*(\d{1,7})\s*([smh]?)\s*$")
_UNIT = {"": 1, "s": 1, "m": 60, "h": 3600}


def parse(value: Any) -> int:
    """Seconds of a ``startTimeout`` value. Raises ValueError for anything but a whole number (or digits with an
    ``s``/``m``/``h`` suffix) from ``MIN_SECONDS`` to ``MAX_SECONDS`` seconds."""
    if isinstance(value, bool):
        raise ValueError("not a duration")
    if isinstance(value, int):
        seconds = value
    elif isinstance(value, str) and (m := _TEXT.match(value)):
        seconds = int(m[1]) * _UNIT[m[2]]
    else:
        raise ValueError("not a duration")
    if not MIN_SECONDS <= seconds <= MAX_SECONDS:
        raise ValueError("out of range")
    return seconds


def start_timeout_of(spec: dict) -> int | None:
    """The job's start timeout in seconds, None when it has none (or an invalid one: the validator refused it)."""
    value = (spec or {}).get("startTimeout")
    if value in (None, ""):
        return None
    try:
        return parse(value)
    except ValueError:
        return None


def problems(spec: dict) -> list[Problem]:
    """The validator's ``start_timeout_invalid`` error for a ``spec.startTimeout`` that :func:`parse` refuses."""
    value = (spec or {}).get("startTimeout")
    if value in (None, ""):
        return []
    try:
        parse(value)
    except ValueError:
        params = {"value": str(value)[:40], "low": MIN_SECONDS, "high": MAX_SECONDS}
        return [Problem("spec.startTimeout", "start_timeout_invalid", params)]
    return []
