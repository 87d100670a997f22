"""Label and field selectors of the fake Kubernetes API server: :func:`label_match` implements the equality- and
set-based label selector grammar (``k=v``, ``k!=v``, ``k in (a,b)``, ``k notin (..)``, ``k``, ``!k``) and
:func:`field_match` the ``path.to.field=value`` / ``!=`` field selectors, both with requirements ANDed."""

from __future__ import annotations

import re
from typing import Any

_SET_RE = re.compile(r"^\s*(!?)([A-Za-z0-9./_-]+)\s*(?:(notin|in)\s*\(([^)]*)\))?\s*$")


def _split_selector(text: str) -> list[str]:
    parts, depth, current = [], 0, ""
    for ch in text:
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
        if ch == "," and depth == 0:
            parts.append(current)
            current = ""
        else:
            current += ch
    if current.strip():
        parts.append(current)
    return parts


def label_match(selector: str | None, labels: dict[str, str]) -> bool:
    """Kubernetes label selector semantics: ``k=v``, ``k==v``, ``k!=v``, ``k in (a,b)``, ``k notin (..)``,
    ``k``, ``!k``; requirements ANDed."""
    if not selector:
        return True
    labels = labels or {}
    for req in _split_selector(selector):
        req = req.strip()
        if "!=" in req:
            key, value = (s.strip() for s in req.split("!=", 1))
            if labels.get(key) == value:
                return False
            continue
        if "=" in req:
            key, value = (s.strip() for s in req.replace("==", "=").split("=", 1))
            if labels.get(key) != value:
                return False
            continue
        m = _SET_RE.match(req)
        if not m:
            raise ValueError(f"unable to parse requirement: {req}")
        neg, key, op, values = m.groups()
        vals = {v.strip() for v in (values or "").split(",") if v.strip()}
        if op == "in" and labels.get(key) not in vals:
            return False
        if op == "notin" and key in labels and labels[key] in vals:
            return False
        if not op and bool(neg) == (key in labels):
            return False
    return True


def _path_get(obj: dict, dotted: str) -> str:
    cur: Any = obj
    for part in dotted.split("."):
        if not isinstance(cur, dict):
            return ""
        cur = cur.get(part)
    return "" if cur is None else str(cur)


def field_match(selector: str | None, obj: dict) -> bool:
    if not selector:
        return True
    for req in selector.split(","):
        req = req.strip()
        if not req:
            continue
        if "!=" in req:
            key, value = req.split("!=", 1)
            if _path_get(obj, key.strip()) == value.strip():
                return False
        else:
            key, value = req.replace("==", "=").split("=", 1)
            if _path_get(obj, key.strip()) != value.strip():
                return False
    return True
