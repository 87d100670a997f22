"""A Worker's stage timeline with repeated markers folded into one entry.

A Worker that waits for the head prints ``HEAD IP: <ip>`` on every attempt that resolves the head's name but
cannot reach its port yet (``clusters/scripts/ray_worker.sh``), so its log holds the same marker many times in a
row. The Diagnosis shows such a run as one entry with a count ("Head 地址已解析（7 次）"), as seed
05-troubleshooting-jobs-workers.txt reads it: repeated waiting is one symptom, not seven stages.
"""

from __future__ import annotations

from typing import Any


def fold_repeats(entries: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """``entries`` (timeline dicts ``{"key", "label", "lineNo", "line", "kind", "failed", "last"}``, in log order)
    with each run of consecutive entries of the same ``key`` folded into its first entry, which gets ``count``
    (entries in the run, 1 for a single one), ``lastLineNo`` (the run's last line number), ``failed`` and
    ``last`` when any entry of the run has them. A new list; ``entries`` is not changed."""
    out: list[dict[str, Any]] = []
    for entry in entries:
        prev = out[-1] if out else None
        if prev is not None and prev["key"] == entry["key"]:
            prev["count"] += 1
            prev["lastLineNo"] = entry.get("lineNo")
            prev["failed"] = bool(prev.get("failed") or entry.get("failed"))
            prev["last"] = bool(prev.get("last") or entry.get("last"))
            continue
        out.append({**entry, "count": 1, "lastLineNo": entry.get("lineNo")})
    return out
