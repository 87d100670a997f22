"""Experiment-tracking credentials on the local runtime: the job's W&B / SwanLab variables, given to its Workers
as files.

The console puts them in each Task's tracking Secret (:mod:`clusters.tracking_secret`); :func:`take` removes the
Secret's ``data`` before the manifest reaches ``state.json``, and :func:`store` keeps the values in a file only
the supervisor reads. Files under the supervisor's state root ``<root>`` (hidden from every Worker)::

    tracking/                   0700, the supervisor's
    tracking/<job>.json         0600, the supervisor's: {variable: value}
    tracking/<job>/<uid>/       0755, root's: bind-mounted read-only at /rlark/tracking
    tracking/<job>/<uid>/<VAR>  0440, owner root, group the job's host id (its Workers' root group): one file per
                                variable, so only that job's Workers (and the supervisor) can read it; 0400 and
                                the supervisor's own when it runs unprivileged

The wrapper scripts (``ray_head.sh``, ``ray_worker.sh``) export each file of ``/rlark/tracking`` under its name
before Ray starts, so the run script and RLinf's ``MetricLogger`` see ``WANDB_API_KEY`` and the others; the values
are in neither the Pod's declared env, ``state.json`` nor the logs. Errors: ``ValueError`` for a job name that is
not a DNS label; ``OSError`` from the file system.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Any

from clusters import tracking_secret
from clusters.runtime.local import job_files, launcher

MOUNT = "/rlark/tracking"


def take(manifest: dict[str, Any]) -> tuple[dict[str, Any], dict[str, str] | None]:
    """``(manifest without the values, values)``: the variables of the Task's tracking Secret, whose ``data`` is
    dropped from the returned copy; ``None`` when the manifest carries no tracking Secret. Not changed in place."""
    return job_files.take_secret(manifest, tracking_secret.values_of)


def store(root: Path, job: str, values: dict[str, str] | None) -> None:
    """Keep the job's variables in ``<root>/tracking/<job>.json`` (0600); ``None`` or ``{}`` removes them (the job
    no longer picks a credential)."""
    path = job_files.state_dir(root, "tracking") / f"{job_files.job_name(job)}.json"
    if not values:
        forget(root, job)
        return
    job_files.write(path, json.dumps(values, sort_keys=True), 0o600)


def _values(root: Path, job: str) -> dict[str, str]:
    try:
        data = json.loads((Path(root) / "tracking" / f"{job_files.job_name(job)}.json").read_text())
    except (FileNotFoundError, ValueError):
        return {}
    return {k: str(v) for k, v in data.items() if k in tracking_secret.VARIABLES} if isinstance(data, dict) else {}


def worker_mount(root: Path, job: str, ids: tuple[int, int] | None) -> launcher.Mount | None:
    """The job's Worker-readable copy of its variables (one file each, see the module's table) as a read-only
    bind mount at :data:`MOUNT`; ``None`` when the job has none. ``ids``: the job's host ids (None: unprivileged)."""
    values = _values(root, job)
    if not values:
        return None
    wdir = job_files.worker_dir(root, "tracking", job, ids)
    for old in wdir.iterdir():
        if old.name not in values:
            old.unlink()
    for name, value in values.items():
        if ids is not None:
            job_files.write(wdir / name, value, 0o440, (os.geteuid(), ids[0]))
        else:
            job_files.write(wdir / name, value, 0o400)
    return launcher.Mount("bind", str(wdir), MOUNT, read_only=True)


def forget(root: Path, job: str) -> None:
    """Remove the job's variables and its Workers' copies (its last Task is gone, or it picks none)."""
    base = Path(root) / "tracking"
    (base / f"{job_files.job_name(job)}.json").unlink(missing_ok=True)
    shutil.rmtree(base / job, ignore_errors=True)
