"""Fill empty msgstr entries of a .po file from a JSON/YAML dict {msgid: msgstr} (developer tool).

Usage: python tools/fill_po.py path/to/django.po translations.yaml
Plural entries take a list [msgstr[0], msgstr[1]] (Chinese uses the same text for both).
Entries already translated are kept; fuzzy flags are removed for the entries it fills.
"""

from __future__ import annotations

import ast
import re
import sys
from pathlib import Path

import yaml


def _quote(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'


def _unquote_block(lines: list[str]) -> str:
    """Join PO string continuation lines (C-style escapes, as Python string literals)."""
    return "".join(ast.literal_eval(line.strip()) for line in lines)


def fill(po_path: Path, mapping: dict) -> int:
    """Return the number of entries filled."""
    blocks = po_path.read_text(encoding="utf-8").split("\n\n")
    filled = 0
    out = []
    for block in blocks:
        m = re.search(r'^msgid ((?:".*"\n?)+)', block, re.M)
        if not m or m.group(1).strip() == '""':
            out.append(block)
            continue
        msgid = _unquote_block(m.group(1).strip().splitlines())
        if msgid not in mapping:
            out.append(block)
            continue
        value = mapping[msgid]
        if "msgid_plural" in block:
            values = value if isinstance(value, list) else [value, value]
            if re.search(r'^msgstr\[0\] ""\s*$', block, re.M):
                block = re.sub(r'^msgstr\[0\] "".*', "msgstr[0] " + _quote(values[0]), block, flags=re.M)
                block = re.sub(r'^msgstr\[1\] "".*', "msgstr[1] " + _quote(values[1]), block, flags=re.M)
                filled += 1
        elif re.search(r'^msgstr ""\s*\Z', block, re.M):
            block = re.sub(r'^msgstr ""\s*\Z', "msgstr " + _quote(value), block, flags=re.M)
            filled += 1
        block = block.replace("#, fuzzy\n", "")
        out.append(block)
    po_path.write_text("\n\n".join(out), encoding="utf-8")
    return filled


if __name__ == "__main__":
    print(fill(Path(sys.argv[1]), yaml.safe_load(Path(sys.argv[2]).read_text(encoding="utf-8"))))
