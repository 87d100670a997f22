"""JSON text with bounded nesting, without Django (used by ``jobs.jobspec`` and the API parsers).

:func:`loads` checks the nesting depth with a linear scan BEFORE ``json.loads`` recurses, so ``[[[[...]]]]``
10,000 deep is a ``ValueError`` and not a RecursionError (a 500).
"""

from __future__ import annotations

import json
import re
from typing import Any

MAX_DEPTH = 100
_TOKENS = re.compile(r'"(?:[^"\\]++|\\.)*+"|[\[\]{}]', re.DOTALL)


def too_deep(text: str, limit: int = MAX_DEPTH) -> bool:
    """True when JSON ``text`` nests arrays/objects deeper than ``limit`` (brackets inside strings skipped).
    Linear time: possessive quantifiers never backtrack."""
    if text.count("[") + text.count("{") <= limit:
        return False
    depth = 0
    for token in _TOKENS.finditer(text):
        ch = token.group()
        if ch in "[{":
            depth += 1
            if depth > limit:
                return True
        elif ch in "]}":
            depth -= 1
    return False


def loads(text: str | bytes) -> Any:
    """``json.loads`` that raises ``ValueError`` (never RecursionError) for nesting deeper than ``MAX_DEPTH``."""
    if isinstance(text, bytes):
        text = text.decode("utf-8")
    if too_deep(text):
        raise ValueError(f"nested deeper than {MAX_DEPTH} levels")
    return json.loads(text)
