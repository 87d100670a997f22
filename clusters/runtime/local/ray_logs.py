"""Ray logs of failed local Worker runs, kept so a failed start can still be diagnosed.

A Worker's Ray sessions write their logs under its private ``/tmp`` (``<pod dir>/tmp/ray/session_*/logs``),
which is wiped when the container restarts or the Pod goes. The logs of a run that ended with a non-zero exit
code are moved first to ``<root>/ray-logs/<cluster>/<job>/<pod>/run-<n>/<session>/`` (root-only, like the rest of
the root), and kept until the job is deleted. :func:`kept_bytes` says how much is kept for a Pod, :func:`bundle`
streams it as a bounded tar.gz (what the console's log archive keeps and the Diagnosis links to).
"""

from __future__ import annotations

import io
import logging
import shutil
import tarfile
from collections.abc import Iterable, Iterator
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


LEFT_OUT = "NOT-INCLUDED.txt"  # member listing the files a bounded bundle left out


def kept_files(root: Path, cluster: str, job: str, pod: str) -> list[Path]:
    """The kept Ray log files of ``pod`` (``run-<n>/<session>/...``), oldest run first; [] when none are kept.
    Symlinks are never followed (a Worker wrote these directories)."""
    base = ray_logs_dir(root, cluster, job) / pod
    if not base.is_dir() or base.is_symlink():
        return []
    return sorted(p for p in base.rglob("*") if p.is_file() and not p.is_symlink())


def kept_bytes(root: Path, cluster: str, job: str, pod: str) -> int:
    """Total size in bytes of the kept Ray log files of ``pod`` (0: none kept)."""
    return sum(p.stat().st_size for p in kept_files(root, cluster, job, pod))


class _Chunks:
    """A write-only file object whose writes are collected and handed out by :meth:`take`."""

    def __init__(self) -> None:
        self.parts: list[bytes] = []

    def write(self, data: bytes) -> int:
        self.parts.append(bytes(data))
        return len(data)

    def take(self) -> bytes:
        out, self.parts = b"".join(self.parts), []
        return out


def bundle(root: Path, cluster: str, job: str, pod: str, max_bytes: int) -> Iterator[bytes]:
    """A gzip-compressed tar of the kept Ray logs of ``pod`` (members ``<pod>/run-<n>/<session>/<file>``), as
    byte chunks. Files are taken oldest run first until their sizes would pass ``max_bytes`` (raw bytes, so the
    compressed bundle is never larger); the rest are named in a ``NOT-INCLUDED.txt`` member. Files that vanish
    while it is written are skipped."""
    base = ray_logs_dir(root, cluster, job) / pod
    out = _Chunks()
    left_out: list[str] = []
    used = 0
    with tarfile.open(fileobj=out, mode="w|gz") as tar:  # type: ignore[call-overload]
        for path in kept_files(root, cluster, job, pod):
            rel = path.relative_to(base).as_posix()
            try:
                size = path.stat().st_size
                if used + size > max_bytes:
                    left_out.append(f"{rel}\t{size}")
                    continue
                with open(path, "rb") as fh:
                    info = tar.gettarinfo(fileobj=fh, arcname=f"{pod}/{rel}")
                    info.uid = info.gid = 0
                    info.uname = info.gname = ""
                    info.mode = 0o644
                    tar.addfile(info, fh)
                used += size
            except OSError:
                continue
            yield out.take()
        if left_out:
            text = ("left out to stay under the size cap (path, bytes):\n" + "\n".join(left_out) + "\n").encode()
            info = tarfile.TarInfo(f"{pod}/{LEFT_OUT}")
            info.size = len(text)
            tar.addfile(info, io.BytesIO(text))
    yield out.take()
