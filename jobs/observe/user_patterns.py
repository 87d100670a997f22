"""A user's log patterns (the Run check's progress and application patterns): ``user_regex(pattern)`` compiles one
(an invalid regex is matched as plain text), ``is_literal`` / ``literal_prefix`` let a scan find its lines with a
plain substring search first (:class:`jobs.observe.log_markers.ScanState`).
"""

from __future__ import annotations

import re

_REGEX_CACHE: dict[str, re.Pattern[str]] = {}


_REGEX_SPECIAL = frozenset(".^$*+?{}[]\\|()\n\r")


def is_literal(pattern: str) -> bool:
    """``pattern`` is a regex that matches only its own text (no special character, no line break), so a plain
    substring search finds the same lines."""
    return bool(pattern) and not _REGEX_SPECIAL.intersection(pattern)


def literal_prefix(pattern: str) -> str:
    """The literal text every match of the user regex ``pattern`` starts with ("" when it has an alternation or
    starts with a special character), e.g. ``"RLinf is running on a cluster with "`` of the default app
    pattern: a line without it cannot match, so one search of the text skips the lines before its first."""
    if "|" in pattern:
        return ""
    end = 0
    while end < len(pattern) and pattern[end] not in _REGEX_SPECIAL:
        end += 1
    if end < len(pattern) and pattern[end] in "*?{":  # the last character is optional
        end -= 1
    return pattern[:end] if end >= 3 else ""


def user_regex(pattern: str) -> re.Pattern[str]:
    """A user's pattern compiled (an invalid regex is matched as plain text)."""
    regex = _REGEX_CACHE.get(pattern)
    if regex is None:
        try:
            regex = re.compile(pattern)
        except re.error:
            regex = re.compile(re.escape(pattern))
        if len(_REGEX_CACHE) > 1000:
            _REGEX_CACHE.clear()
        _REGEX_CACHE[pattern] = regex
    return regex
