"""Check 5 of seed 02-confirm-job-running: the workload progresses and its output is persisted.

Seed 02, check 5 ("业务有进展且输出已持久化"): the progress pattern (default RLinf's ``Global Step``) appeared in a
log, and the output path exists and is readable (``runcheck_output.check_output``: on the local runtime through the
role's hostPath mounts, elsewhere inside a running Worker; a path the console cannot read stays to confirm).
"""

from __future__ import annotations

from django.utils.translation import gettext_noop

from jobs.explain.runcheck_input import MET, NOT_MET, TO_CONFIRM, RunCheckInput, head_first, missing_status, tr
from jobs.explain.runcheck_settings import progress_pattern
from jobs.observe.log_markers import LogScan


def check_progress(data: RunCheckInput, lang: str, scans: dict[str, LogScan]) -> tuple[str, list[str]]:
    """Check 5 over ``scans`` (Pod name -> its log scan) -> ``(status, evidence lines in lang)``: the first
    progress line (header first) and the state of the output path (``data.output``)."""
    pattern = progress_pattern(data.settings)
    order = head_first(data)
    hit = next(
        ((p.name, scans[p.name].pattern_hits["progress"]) for p in order if "progress" in scans[p.name].pattern_hits),
        None,
    )
    ev: list[str] = []
    missing: list[str] = []
    bad: list[str] = []
    if hit is None:
        missing.append(tr(lang, gettext_noop("No progress line matching {p} in the logs yet."), p=pattern))
    else:
        pod, (line_no, line) = hit
        ev.append(tr(lang, gettext_noop("Progress: {pod} line {n}: {line}"), pod=pod, n=line_no, line=line))
    out = data.output
    if out.state == "ok":
        ev.append(
            tr(
                lang,
                gettext_noop(
                    "Output {path}: {files} files, readable; newest file {sample} ({size} bytes, sha256 {sha})."
                ),
                path=out.path,
                files=out.files,
                sample=out.sample,
                size=out.size,
                sha=out.sha256[:16],
            )
        )
    elif out.state == "unset":
        missing.append(
            tr(lang, gettext_noop("No output or checkpoint path is set, so persisted output cannot be confirmed."))
        )
    elif out.state == "unsupported":
        missing.append(
            tr(
                lang,
                gettext_noop(
                    "Output {path} is not where the console can read it ({detail}); confirm it is readable in the"
                    " target storage."
                ),
                path=out.path,
                detail=out.detail,
            )
        )
        if hit is not None:
            return TO_CONFIRM, missing + ev
    else:
        msg = tr(
            lang,
            gettext_noop("Output {path} does not exist or cannot be read ({detail})."),
            path=out.path,
            detail=out.detail or out.state,
        )
        (bad if out.state == "unreadable" else missing).append(msg)
    if bad:
        return NOT_MET, bad + missing + ev
    if missing:
        return missing_status(data), missing + ev
    return MET, ev
