"""Node selectors: string form ``k=v,k2=v2`` <-> dict, and label matching.

Source: upstream-rlark 4.6. Parsing splits on ``,``; a segment containing ``=`` starts a new key (key and value
trimmed); a segment without ``=`` is appended to the previous key's value as a comma alternative
(``kubernetes.io/hostname=a,b,c,rlark.io/x=1`` -> ``{"kubernetes.io/hostname": "a,b,c", "rlark.io/x": "1"}``).
RLark Console goes further: a value containing ``=`` is rejected, and matching ANDs keys while a comma value
means "any of" (whitespace trimmed) - the same semantics for cluster resolution and scheduling.
"""

from __future__ import annotations

from collections.abc import Mapping


class SelectorError(ValueError):
    """A selector string or mapping that cannot be parsed. ``code`` is a validator code."""

    def __init__(self, message: str, code: str = "node_selector_invalid"):
        super().__init__(message)
        self.code = code


def parse_selector(value: str | Mapping | None) -> dict[str, str]:
    """Parse a selector given as ``"k=v,k2=v2"`` or as a mapping into ``{key: value}`` (strings, trimmed).

    Raises ``SelectorError`` for a segment without ``=`` before any key, an empty key, or a value with ``=``.
    ``None``/``""``/``{}`` -> ``{}``.
    """
    if value is None:
        return {}
    if isinstance(value, Mapping):
        out: dict[str, str] = {}
        for k, v in value.items():
            key = str(k).strip()
            val = "" if v is None else (str(v).lower() if isinstance(v, bool) else str(v)).strip()
            if not key:
                raise SelectorError("empty selector key")
            if "=" in val:
                raise SelectorError(f"selector value for {key!r} must not contain '='")
            out[key] = val
        return out
    if not isinstance(value, str):
        raise SelectorError("a node selector must be a string or a mapping")
    out = {}
    last: str | None = None
    for segment in value.split(","):
        if not segment.strip():
            continue
        if "=" in segment:
            key, _, val = segment.partition("=")
            key, val = key.strip(), val.strip()
            if not key:
                raise SelectorError(f"empty selector key in {segment.strip()!r}")
            if "=" in val:
                raise SelectorError(f"selector value for {key!r} must not contain '='")
            out[key] = val
            last = key
        else:
            if last is None:
                raise SelectorError(f"selector segment {segment.strip()!r} has no key")
            out[last] = f"{out[last]},{segment.strip()}" if out[last] else segment.strip()
    return out


def template_selector(template: Mapping) -> dict[str, str]:
    """The ``nodeSelector`` of a Task template as ``{key: value}``; ``{}`` when it is absent or invalid (the
    validator reports an invalid one; pending reasons and the run check then treat the role as unconstrained)."""
    try:
        return parse_selector(template.get("nodeSelector"))
    except SelectorError:
        return {}


def values_of(value: str) -> list[str]:
    """Comma alternatives of one selector value, trimmed, empty ones dropped."""
    return [v.strip() for v in str(value).split(",") if v.strip()]


def matches(selector: Mapping[str, str] | None, labels: Mapping[str, str] | None) -> bool:
    """True when every key of ``selector`` is in ``labels`` with one of its comma values (keys ANDed).

    Empty/None selector matches everything (upstream 4.6: nil -> true).
    """
    if not selector:
        return True
    labels = labels or {}
    for key, value in selector.items():
        if key not in labels:
            return False
        if str(labels[key]).strip() not in values_of(value):
            return False
    return True


def matcher(selector: Mapping[str, str] | None):
    """A fast ``labels -> bool`` with the semantics of ``matches`` (alternatives parsed once)."""
    wanted = [(key, frozenset(values_of(value))) for key, value in (selector or {}).items()]

    def match(labels: Mapping[str, str] | None) -> bool:
        labels = labels or {}
        for key, alternatives in wanted:
            value = labels.get(key)
            if value is None or str(value).strip() not in alternatives:
                return False
        return True

    return match


def format_selector(selector: Mapping[str, str] | None) -> str:
    """``{"a": "1", "b": "x,y"}`` -> ``"a=1,b=x,y"`` (insertion order)."""
    return ",".join(f"{k}={v}" for k, v in (selector or {}).items())
