"""The supervisor's private per-job files: the state directories and the file writes that the Ray token
(:mod:`clusters.runtime.local.ray_auth`) and the tracking credentials (:mod:`clusters.runtime.local.tracking`) share.

Errors: ``ValueError`` for a job name that is not a DNS label; ``OSError`` from the file system.
"""

from __future__ import annotations

import copy
import os
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

_JOB = re.compile(r"[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?")
T = TypeVar("T")


def state_dir(root: Path, name: str) -> Path:
    """``<root>/<name>``, made 0700 (the supervisor's) when missing and set to 0700 when it was not."""
    path = Path(root) / name
    path.mkdir(mode=0o700, exist_ok=True)
    path.chmod(0o700)
    return path


def job_name(job: str) -> str:
    """``job`` when it is a DNS label (a safe path component); ``ValueError`` otherwise."""
    if not _JOB.fullmatch(job):
        raise ValueError(f"invalid job name {job!r}")
    return job


def worker_dir(root: Path, name: str, job: str, ids: tuple[int, int] | None) -> Path:
    """``<root>/<name>/<job>/<uid>`` (``uid``: the job's host uid ``ids[0]``, the supervisor's own when ``ids`` is
    None), each level a real directory (a link or a file in its place is removed), 0755 and owned by the
    supervisor: the folder a job's Workers see read-only. ``ValueError`` for a bad job name."""
    wdir = state_dir(root, name) / job_name(job)
    for d in (wdir, wdir / str(ids[0] if ids is not None else os.geteuid())):
        if d.is_symlink() or (d.exists() and not d.is_dir()):
            d.unlink()
        d.mkdir(mode=0o755, exist_ok=True)
        os.chown(d, os.geteuid(), os.getegid(), follow_symlinks=False)
        d.chmod(0o755)
        wdir = d
    return wdir


def write(path: Path, text: str, mode: int, owner: tuple[int, int] | None = None) -> None:
    """Write ``text`` to ``path`` with ``mode`` (and ``(uid, gid)`` ``owner``) through a fresh file, never through
    a link; the file replaces ``path`` at once."""
    tmp = path.with_name(path.name + ".tmp")
    tmp.unlink(missing_ok=True)
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    try:
        os.write(fd, text.encode())
    finally:
        os.close(fd)
    if owner is not None:
        os.chown(tmp, owner[0], owner[1], follow_symlinks=False)
    tmp.chmod(mode)
    os.replace(tmp, path)


def take_secret(manifest: dict[str, Any], found_in: Callable[[dict], T | None]) -> tuple[dict[str, Any], T | None]:
    """``(manifest without the values, values)``: the values ``found_in`` reads from one of the manifest's
    ``extra_objects`` (a Secret), whose ``data`` / ``stringData`` are dropped from the returned copy so they never
    reach ``state.json``; ``(manifest, None)`` when no object carries them. ``manifest`` is not changed."""
    values = None
    kept = []
    for obj in manifest.get("extra_objects") or []:
        found = found_in(obj)
        if found is not None:
            values = found
            obj = {k: copy.deepcopy(v) for k, v in obj.items() if k not in ("data", "stringData")}
        kept.append(obj)
    if values is None:
        return manifest, None
    return {**manifest, "extra_objects": kept}, values
