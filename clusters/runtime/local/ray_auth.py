"""Ray token authentication on the local runtime: one token per job, given to its Workers as a file.

All local Workers share the host's loopback, where every job's GCS, dashboard and dashboard agent listen; with
Ray's token authentication (``RAY_AUTH_MODE=token``, see :mod:`clusters.ray_auth`) another job's Worker that
connects is refused. Files under the supervisor's state root ``<root>`` (hidden from every Worker)::

    ray-auth/                  0700, the supervisor's
    ray-auth/<job>.token       0600, the supervisor's: the job's token (64 hex characters)
    ray-auth/<job>/<uid>/token 0400, a host uid of the job: the copy its Workers read (a job on two local clusters
                               has one uid on each), in a 0755 directory bind-mounted read-only at /rlark/ray-auth,
                               so RAY_AUTH_TOKEN_PATH=/rlark/ray-auth/token

The token is the one the console put in the Task's ray-auth Secret (:func:`take_token`; the same token as the job's
Workers on other clusters), or, for a manifest without one, ``secrets.token_hex(32)`` made here. It is kept out of
``state.json``, the Worker's environment (only the path is there) and the logs. One token per job name on this
supervisor, removed with the job's last Task (:func:`forget`). Errors: ``ValueError`` for a job name that is not a
DNS label; ``OSError`` from the file system.
"""

from __future__ import annotations

import secrets
import shutil
from pathlib import Path
from typing import Any

from clusters import ray_auth as job_auth
from clusters.runtime.local import job_files, launcher

MOUNT = "/rlark/ray-auth"
TOKEN_FILE = "token"


def take_token(manifest: dict[str, Any]) -> tuple[dict[str, Any], str | None]:
    """``(manifest without the token, token)``: the token of the Task's ray-auth Secret (``extra_objects``), whose
    ``data`` is dropped from the returned copy so the token never reaches ``state.json``; ``None`` when the manifest
    carries none. ``manifest`` is the wire form of a ``TaskManifest`` (a dict); it is not changed."""
    return job_files.take_secret(manifest, job_auth.token_of)


def store(root: Path, job: str, token: str | None = None) -> str:
    """Make sure the job has a token in ``<root>/ray-auth/<job>.token`` (0600); ``token`` (from the console)
    replaces a different one, else an existing one is kept, else a new one is made. Returns the token."""
    path = job_files.state_dir(root, "ray-auth") / f"{job_files.job_name(job)}.token"
    try:
        current = path.read_text().strip()
    except FileNotFoundError:
        current = ""
    wanted = token or current or secrets.token_hex(32)
    if wanted != current:
        job_files.write(path, wanted, 0o600)
    return wanted


def worker_mount(root: Path, job: str, ids: tuple[int, int] | None) -> launcher.Mount:
    """The job's Worker-readable copy of its token (owned by the job's host uid ``ids[0]``, 0400; the supervisor's
    own uid when ``ids`` is None), refreshed from the job's token, as a read-only bind mount at :data:`MOUNT`."""
    token = store(root, job)
    wdir = job_files.worker_dir(root, "ray-auth", job, ids)
    job_files.write(wdir / TOKEN_FILE, token, 0o400, (ids[0], ids[0]) if ids is not None else None)
    return launcher.Mount("bind", str(wdir), MOUNT, read_only=True)


def worker_env() -> dict[str, str]:
    """What the Worker's environment gets (set after the Pod's own env): token mode and the token file's path."""
    return {job_auth.AUTH_MODE_VAR: job_auth.MODE_TOKEN, job_auth.TOKEN_PATH_VAR: f"{MOUNT}/{TOKEN_FILE}"}


def forget(root: Path, job: str) -> None:
    """Remove the job's token and its Workers' copy (its last Task is gone)."""
    base = Path(root) / "ray-auth"
    (base / f"{job_files.job_name(job)}.token").unlink(missing_ok=True)
    shutil.rmtree(base / job, ignore_errors=True)
