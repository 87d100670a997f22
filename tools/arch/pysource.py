"""Parse Python source for the architecture and single-source checks: ``parse(source, filename) -> ast.Module``.

CPython 3.11 keeps the depth counter of its AST-to-object conversion in one place per interpreter, shared by every
thread: when another thread converts an AST at the same moment (3.11's ``traceback`` parses source lines to place
its carets), the conversion fails with ``SystemError: AST constructor recursion depth mismatch`` although the
source is fine. Each conversion resets the counter, so the parse is tried again, up to ``ATTEMPTS`` times.
Raises ``SyntaxError`` for bad source, and the ``SystemError`` when every attempt met it.
"""

from __future__ import annotations

import ast
from pathlib import Path

ATTEMPTS = 5


def parse(source: str, filename: str = "<unknown>") -> ast.Module:
    for attempt in range(ATTEMPTS):
        try:
            return ast.parse(source, filename)
        except SystemError as exc:
            if "recursion depth mismatch" not in str(exc) or attempt == ATTEMPTS - 1:
                raise
    raise AssertionError("unreachable")


def parse_file(path: Path) -> ast.Module:
    """The module of ``path`` (UTF-8)."""
    return parse(path.read_text(encoding="utf-8"), str(path))
