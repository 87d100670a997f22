"""The current run's output prefix (seed 02-confirm-job-running.txt, check 5: "checkpoint 使用本次运行的
唯一前缀").

Every Header Pod gets ``RLARK_RUN_ID`` = its Pod UID (``jobs.jobspec.manifests.injected_env``, downward API), so a
run script can write under ``/output/$RLARK_RUN_ID``. A new attempt (start, restart, edit-and-restart) creates new
Pods and so a new id; a container restart inside one attempt keeps it. A ``tensorBoardDir`` or run-check
``output_path`` that contains ``$RLARK_RUN_ID`` (or ``${RLARK_RUN_ID}``) is read with the current run's id in its
place, so the Metrics tab and the Run check never count another run's (or another job's) files.
"""

from __future__ import annotations

import re

RUN_ID_ENV = "RLARK_RUN_ID"
_VARIABLE = re.compile(r"\$(?:\{RLARK_RUN_ID\}|RLARK_RUN_ID(?![A-Za-z0-9_]))")


def uses_run_id(path: str) -> bool:
    """True when ``path`` names the per-run prefix (``$RLARK_RUN_ID`` / ``${RLARK_RUN_ID}``)."""
    return bool(_VARIABLE.search(path or ""))


def current_run_id(job) -> str:
    """The ``RLARK_RUN_ID`` of the job's current run (``Job.current_run_id``: its newest Header Pod's UID)."""
    return job.current_run_id()


def with_run_id(path: str, run_id: str) -> str:
    """``path`` with ``$RLARK_RUN_ID`` / ``${RLARK_RUN_ID}`` replaced by ``run_id`` (any run, not only the current
    one: the Checkpoints tab reads the earlier runs' prefixes too)."""
    return _VARIABLE.sub(run_id, path)


def run_path(job, path: str) -> str | None:
    """``path`` with the current run's id substituted; ``path`` itself when it does not use the run id; None when
    it does but the run has no Header Pod yet (nothing of this run can exist)."""
    if not uses_run_id(path):
        return path
    run_id = current_run_id(job)
    if not run_id:
        return None
    return _VARIABLE.sub(run_id, path)
