"""The level a logger wrote a log line at: ``below_error_level(line) -> bool``.

Pure; used by :mod:`jobs.observe.log_markers` to choose a Worker's first error.
"""

from __future__ import annotations

import re

# The level a logger wrote a line at, when it wrote one: Python logging and Ray's Python loggers (``INFO``,
# ``WARNING`` ... as a word near the start), Ray's C++ loggers (``[<date> <time>,<ms> I <pid> <tid>]``) and glog
# (``I1206 10:00:00.000000 ...``), after an optional Ray prefix such as ``(raylet)`` or ``(pid=123)``; Python's
# ``warnings`` (``UserWarning: ...``). Seed 05 asks for "第一条错误": a line at a level below ERROR never is one,
# whatever words it holds (an ``INFO`` line that says "failed to connect, retrying" is routine output).
_RAY_PREFIX = r"^\s*(?:\([^)]{0,120}\)\s*)?"
_LETTER_LEVEL = re.compile(
    _RAY_PREFIX + r"(?:\[\d{4}-\d\d-\d\d[ T][\d:.,]+ (?P<a>[DIWEF]) \d+ \d+\]|(?P<b>[DIWEF])\d{4} \d\d:\d\d:\d\d)"
)
_LEVEL_WORD = re.compile(r"\b(DEBUG|INFO|NOTICE|WARNING|WARN|ERROR|CRITICAL|FATAL)\b")
_PY_WARNING = re.compile(r"\b[A-Z]\w*Warning: ")
LEVEL_SPAN = 96  # characters from the line's start where a logger's level word stands


def below_error_level(text: str) -> bool:
    """Whether a logger wrote ``text`` at a level below ERROR (DEBUG, INFO, NOTICE, WARNING), or it is a Python
    warning; False for a line without a level (a traceback, a program's own message)."""
    if (m := _LETTER_LEVEL.match(text)) is not None:
        return (m["a"] or m["b"]) in "DIW"
    head = text[:LEVEL_SPAN]
    if (m := _LEVEL_WORD.search(head)) is not None:
        return m[1] in ("DEBUG", "INFO", "NOTICE", "WARNING", "WARN")
    return _PY_WARNING.search(head) is not None
