"""Ray logs of failed local Worker runs, kept so a failed start can still be diagnosed.

A Worker's Ray sessions write their logs under its private ``/tmp`` (``<pod dir>/tmp/ray/session_*/logs``),
which is wiped when the container restarts or the Pod goes. The logs of a run that ended with a non-zero exit
code are moved first to ``<root>/ray-logs/<cluster>/<job>/<pod>/run-<n>/<session>/`` (root-only, like the rest of
the root), and kept until the job is deleted.
"""

from __future__ import annotations

import logging
import shutil
from collections.abc import Iterable
from pathlib import Path
from typing import Any

log = logging.getLogger("rlark.local_supervisor")


def ray_logs_dir(root: Path, cluster: str, job: str) -> Path:
    """Where the Ray logs of ``job``'s failed Worker runs are kept until the job is deleted:
    ``<root>/ray-logs/<cluster>/<job>/<pod>/run-<n>/<session>/`` (root-only, like the rest of the root)."""
    return Path(root) / "ray-logs" / cluster / job


def keep(root: Path, tasks: Iterable[dict[str, Any]], pod: dict[str, Any], pdir: Path) -> None:
    """Move the Ray session logs of a Worker run that ended with a non-zero exit code out of its private /tmp
    before it is wiped, so a failed start can still be diagnosed. ``tasks``: the supervisor's desired Tasks (a
    job none of them names is deleted: nothing kept). Never raises."""
    c = pod.get("container") or {}
    failed = c.get("exit_code") not in (None, 0) or (
        c.get("state") == "waiting" and c.get("last_exit_code") not in (None, 0)
    )
    job_kept = any(x["cluster"] == pod["cluster"] and x["job"] == pod["job"] for x in tasks)
    if not failed or not job_kept:  # a Worker stopped on purpose, or a deleted job: nothing to keep
        return
    sessions = sorted((pdir / "tmp" / "ray").glob("session_2*"))
    if not sessions:
        return
    dest = ray_logs_dir(root, pod["cluster"], pod["job"]) / pod["name"] / f"run-{pod.get('runs', 0)}"
    try:
        dest.mkdir(parents=True, exist_ok=True)
        for session in sessions:
            if (session / "logs").is_dir() and not (session / "logs").is_symlink():
                shutil.move(str(session / "logs"), str(dest / session.name))
    except OSError:
        log.exception("could not keep the Ray logs of %s", pod["name"])
