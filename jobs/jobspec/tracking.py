"""``spec.trackingCredentials``: the experiment-tracking credentials (W&B, SwanLab) a Job's Workers receive.

A list of at most two names of the submitter's credentials (``accounts.TrackingCredential``), at most one per
service. The validator refuses a list of another shape (``tracking_invalid``), a name the submitter has no
credential for (``tracking_unknown``) and two of one service (``tracking_same_kind``). The names are not secret;
the keys they stand for reach the Workers only through a Secret (``clusters.tracking_secret``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

SPEC_KEY = "trackingCredentials"
MAX_NAMES = 2
MAX_NAME_CHARS = 63
CODES = ("tracking_invalid", "tracking_unknown", "tracking_same_kind")


def names_in(spec: Mapping[str, Any]) -> list[str]:
    """The names a document's ``spec`` lists (strings only, at most :data:`MAX_NAMES`)."""
    names = spec.get(SPEC_KEY) if isinstance(spec, Mapping) else None
    if not isinstance(names, list):
        return []
    return [n for n in names if isinstance(n, str)][:MAX_NAMES]


def check(spec: Mapping[str, Any], known: Callable[[], Mapping[str, str]], add: Callable[..., None]) -> None:
    """Report the problems of ``spec.trackingCredentials`` through ``add(path, code, **params)``; ``known()``: the
    submitter's credential name -> service (``wandb``/``swanlab``), asked only when the document names one."""
    names = spec.get(SPEC_KEY)
    if names is None:
        return
    if (
        not isinstance(names, list)
        or len(names) > MAX_NAMES
        or not all(isinstance(n, str) and 0 < len(n) <= MAX_NAME_CHARS for n in names)
    ):
        add(f"spec.{SPEC_KEY}", "tracking_invalid", most=MAX_NAMES)
        return
    seen: dict[str, str] = {}
    kinds = known() if names else {}
    for i, name in enumerate(names):
        kind = kinds.get(name)
        if kind is None:
            add(f"spec.{SPEC_KEY}[{i}]", "tracking_unknown", name=name)
        elif kind in seen:
            add(f"spec.{SPEC_KEY}[{i}]", "tracking_same_kind", name=name, other=seen[kind])
        else:
            seen[kind] = name
