"""Check 4 of seed 02-confirm-job-running: the application reported its versions and configuration.

Seed 02, check 4 ("应用和配置版本一致"): every user pattern (``app_patterns``; default RLinf's ``RLinf is running on a
cluster with N nodes``) matched a log line, and RLinf's N equals ``cluster.num_nodes``. The lines found are shown so
that people compare them with the run ID, code version and config recorded before submission.
"""

from __future__ import annotations

from django.utils.translation import gettext_noop

from jobs.explain.runcheck_input import MET, NOT_MET, RunCheckInput, head_first, missing_status, tr
from jobs.observe.log_markers import RLINF_CLUSTER, LogScan


def check_app(data: RunCheckInput, lang: str, scans: dict[str, LogScan]) -> tuple[str, list[str]]:
    """Check 4 over ``scans`` (Pod name -> its log scan) -> ``(status, evidence lines in lang)``: the first line
    (header first) each app pattern matched; RLinf's node count must equal ``cluster.num_nodes``."""
    patterns = list(data.settings.get("app_patterns") or [])
    ev: list[str] = []
    missing: list[str] = []
    bad: list[str] = []
    order = head_first(data)
    for idx, pattern in enumerate(patterns):
        hit = next(
            (
                (p.name, scans[p.name].pattern_hits[f"app{idx}"])
                for p in order
                if f"app{idx}" in scans[p.name].pattern_hits
            ),
            None,
        )
        if hit is None:
            missing.append(tr(lang, gettext_noop("No log line matches the application pattern {p}."), p=pattern))
            continue
        pod, (line_no, line) = hit
        ev.append(tr(lang, gettext_noop("{pod} line {n}: {line}"), pod=pod, n=line_no, line=line))
        m = RLINF_CLUSTER.search(line)
        if m and data.num_nodes is not None and int(m["n"]) != data.num_nodes:
            bad.append(
                tr(
                    lang,
                    gettext_noop("RLinf reports {n} nodes, but cluster.num_nodes = {want}."),
                    n=m["n"],
                    want=data.num_nodes,
                )
            )
    if bad:
        return NOT_MET, bad + ev + missing
    if missing:
        return missing_status(data), missing + ev
    ev.append(
        tr(
            lang,
            gettext_noop(
                "Compare these values one by one with the run ID, code version and config recorded before submission."
            ),
        )
    )
    return MET, ev
