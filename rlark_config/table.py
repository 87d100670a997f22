"""The README's configuration table, made from :class:`~rlark_config.schema.Config`.

The table sits in README.md between :data:`BEGIN` and :data:`END`; ``python -m rlark_config --readme`` writes it
there and ``tests/console/test_config.py`` fails when the two differ.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

from rlark_config.schema import BASE_DIR, fields

README = BASE_DIR / "README.md"
BEGIN = "<!-- configuration table: made by `python -m rlark_config --readme` from rlark_config/schema.py -->"
END = "<!-- end of the configuration table -->"


def shown_default(f: dataclasses.Field) -> str:
    """A field's default as the table shows it: its ``shown`` text, else the value in backticks (``empty`` for an
    empty string or list, ``0``/``1`` for a switch)."""
    if f.metadata["shown"] is not None:
        return f.metadata["shown"]
    value = f.default
    if isinstance(value, bool):
        return f"`{int(value)}`"
    if isinstance(value, tuple):
        value = ",".join(value)
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    return f"`{value}`" if value != "" else "empty"


def markdown() -> str:
    """The table (Markdown, one row per setting, in the order of the fields), ending with a newline."""
    rows = ["| Variable | Default | Meaning |", "|---|---|---|"]
    rows += [f"| `{f.metadata['env']}` | {shown_default(f)} | {f.metadata['doc']} |" for f in fields()]
    return "\n".join(rows) + "\n"


def with_table(readme: str) -> str:
    """``readme`` with the text between :data:`BEGIN` and :data:`END` replaced by :func:`markdown`. Raises
    ``ValueError`` when either marker is missing."""
    head, begin, rest = readme.partition(BEGIN + "\n")
    _old, end, tail = rest.partition(END)
    if not begin or not end:
        raise ValueError(f"README.md has no configuration table markers ({BEGIN!r} ... {END!r})")
    return head + begin + markdown() + end + tail


def write_readme(path: Path = README) -> bool:
    """Put the table into the README at ``path``; True when the file changed."""
    old = path.read_text(encoding="utf-8")
    new = with_table(old)
    if new != old:
        path.write_text(new, encoding="utf-8")
    return new != old
