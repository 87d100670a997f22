"""The log archive: the full ``main`` log of every Worker instance, gzip-compressed, kept after Stop and
after Delete (seeds 02-confirm-job-running.txt and 05-troubleshooting-jobs-workers.txt ask users to keep a run's
logs as its record).

Layout under ``VAR_DIR/logs`` (directories 0700, files 0600)::

    <job>/<pod>.log.gz              the Pod's last instance, archived when the job stops or ends
    <job>/<pod>.previous.log.gz     the instance before it (a restarted container)
    <job>/history/<pod>.<uid>.<restarts>.log.gz   instances archived earlier (an older attempt)
    <job>/<pod>.ray.tgz             Ray's own log files of the Pod's failed runs, where the runtime kept them
                                    (the local runtime: ``clusters.runtime.local.ray_logs``), a tar.gz
    <job>/meta.json                 {"job", "owner", "ownerId", "capBytes", "cut": [file names], "deletedAt"}
    .deleted/<job>-<YYYYmmddHHMMSS>/  the same for a deleted job, until the retention period ends

Rules:
- :func:`archive_task_logs` streams each Pod's log from its runtime (constant memory) into gzip. All files
  of a job together stay under its cap: ``Job.log_archive_max_bytes`` when the admin set one, else
  ``settings.RLARK_LOG_ARCHIVE_MAX_BYTES`` (compressed bytes, default 256 MiB). The header is archived first.
  A log that reaches the cap is cut there, gets the line :data:`CUT_LINE` and is listed in ``cut``; the
  page says so (:func:`cut_files`).
- The Ray logs of failed runs count against the same cap; files that would pass it are left out of the tar and
  named in its ``NOT-INCLUDED.txt``.
- :func:`retire` (Delete) moves the job's archive to ``.deleted/``; :func:`purge_expired` removes those older
  than ``settings.RLARK_LOG_ARCHIVE_RETENTION_DAYS`` (default 30; the beat task ``jobs.tasks.purge_log_archives``).
- Readers (:func:`find`, :func:`chunks`, :func:`read_tail`) also read an uncompressed archive (a ``.log``
  written by an older version), recognised by its first bytes.
"""

from __future__ import annotations

import collections
import gzip
import json
import logging
import os
import re
import shutil
from collections.abc import Iterator
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from django.conf import settings
from django.utils import timezone

from clusters.runtime import registry

logger = logging.getLogger(__name__)

CUT_LINE = "[rlark] log archive cut here: the job's log archive reached its size cap of {cap} bytes\n"
GZIP_MAGIC = b"\x1f\x8b"
CHUNK = 64 * 1024
DELETED = ".deleted"
_ID_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,200}$")


def root() -> Path:
    return Path(settings.VAR_DIR) / "logs"


def job_dir(job_name: str) -> Path:
    return root() / job_name


def path_for(job_name: str, pod: str, previous: bool = False, base: Path | None = None) -> Path:
    """Where the (current or previous instance's) archived log of ``pod`` is kept."""
    return (base or job_dir(job_name)) / f"{pod}{'.previous' if previous else ''}.log.gz"


RAY_SUFFIX = ".ray.tgz"


def ray_path_for(job_name: str, pod: str, base: Path | None = None) -> Path:
    """Where the tar.gz of ``pod``'s kept Ray logs is archived."""
    return (base or job_dir(job_name)) / f"{pod}{RAY_SUFFIX}"


def find_ray(job_name: str, pod: str, base: Path | None = None) -> Path | None:
    """The archived Ray logs of ``pod``, None when there are none."""
    path = ray_path_for(job_name, pod, base)
    return path if path.is_file() else None


def find(job_name: str, pod: str, previous: bool = False, base: Path | None = None) -> Path | None:
    """The archived log of ``pod``, gzip or (older archives) plain ``.log``; None when there is none."""
    path = path_for(job_name, pod, previous, base)
    if path.is_file():
        return path
    legacy = path.with_suffix("")  # <pod>[.previous].log
    return legacy if legacy.is_file() else None


def _open(path: Path):
    with open(path, "rb") as probe:
        magic = probe.read(2)
    return gzip.open(path, "rb") if magic == GZIP_MAGIC else open(path, "rb")  # noqa: SIM115


def chunks(path: Path, size: int = CHUNK) -> Iterator[bytes]:
    """The uncompressed bytes of an archived log, in chunks (constant memory)."""
    with _open(path) as fh:
        while chunk := fh.read(size):
            yield chunk


def raw_chunks(path: Path, size: int = CHUNK) -> Iterator[bytes]:
    """The bytes of an archived file as stored (the Ray logs' tar.gz stays compressed), in chunks."""
    with open(path, "rb") as fh:
        while chunk := fh.read(size):
            yield chunk


def read_tail(path: Path, lines: int | None) -> str:
    """The last ``lines`` lines (all when None) of an archived log, decoded as UTF-8."""
    with _open(path) as fh:
        if lines is None:
            return fh.read().decode("utf-8", "replace")
        tail = collections.deque(fh, maxlen=max(int(lines), 0))
    return b"".join(tail).decode("utf-8", "replace")


# --- meta ------------------------------------------------------------------------------------------------


def read_meta(base: Path) -> dict[str, Any]:
    try:
        return json.loads((base / "meta.json").read_text())
    except (OSError, ValueError):
        return {}


def _write_meta(base: Path, meta: dict[str, Any]) -> None:
    tmp = base / "meta.json.tmp"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        json.dump(meta, f, sort_keys=True)
    os.replace(tmp, base / "meta.json")


def cap_for(job) -> int:
    """The job's archive cap in compressed bytes (its own value if the admin set one, else the setting)."""
    own = getattr(job, "log_archive_max_bytes", None)
    return int(own if own is not None else settings.RLARK_LOG_ARCHIVE_MAX_BYTES)


def cut_files(job_name: str, base: Path | None = None) -> list[str]:
    """Names of the archived Worker logs the cap cut (``<pod>`` or ``<pod> (previous)``), for the page."""
    meta = read_meta(base or job_dir(job_name))
    out = []
    for name in meta.get("cut") or []:
        pod = name.removesuffix(".log.gz")
        out.append(f"{pod.removesuffix('.previous')} (previous)" if pod.endswith(".previous") else pod)
    return out


# --- writing -----------------------------------------------------------------------------------------------


def _used_bytes(base: Path, skip: set[Path]) -> int:
    total = 0
    for path in [*base.rglob("*.log*"), *base.glob(f"*{RAY_SUFFIX}")]:
        if path.is_file() and path not in skip:
            total += path.stat().st_size
    return total


def _rotate(base: Path, path: Path, pod: str, identity: str) -> None:
    """Keep an archived instance that is about to be replaced by another one under history/."""
    meta = read_meta(base)
    old_identity = (meta.get("identities") or {}).get(path.name)
    if path.is_file() and old_identity and old_identity != identity:
        history = base / "history"
        history.mkdir(mode=0o700, exist_ok=True)
        os.replace(path, history / f"{pod}.{old_identity.replace(':', '.')}.log.gz")


def _write(path: Path, source: Iterator[bytes], budget: int, cap: int) -> tuple[int, bool]:
    """Compress ``source`` into ``path`` until its compressed size would pass ``budget`` bytes. Returns
    (compressed size, cut)."""
    tmp = path.with_name(path.name + ".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    cut = False
    with os.fdopen(fd, "wb") as raw:
        with gzip.GzipFile(filename="", mode="wb", fileobj=raw, compresslevel=6) as gz:
            for chunk in source:
                gz.write(chunk)
                if raw.tell() + len(chunk) >= budget - 512:
                    gz.flush()
                    if raw.tell() >= budget - 512:
                        cut = True
                        break
            if cut:
                gz.write(b"\n" + CUT_LINE.format(cap=cap).encode())
        size = raw.tell()
    os.replace(tmp, path)
    return size, cut


def archive_task_logs(job, task) -> None:
    """Archive the full log of each of ``task``'s Workers (and of the previous instance) under the job's
    cap, so the logs stay readable once the Pods are gone. Best effort: a Pod whose log cannot be read
    (gone already) is skipped, an archive of it kept earlier stays."""
    try:
        runtime = registry.runtime_for(task.cluster)
    except Exception:  # noqa: BLE001
        return
    base = job_dir(job.name)
    base.mkdir(mode=0o700, parents=True, exist_ok=True)
    cap = cap_for(job)
    meta = read_meta(base)
    meta.update(job=job.name, owner=job.owner.username, ownerId=job.owner_id, capBytes=cap)
    cut = set(meta.get("cut") or [])
    identities = dict(meta.get("identities") or {})
    for pod in task.pods.order_by("ordinal"):
        # The previous instance is asked for even when the synced restart count is 0: the kubelet may have
        # restarted the container since the last sync, and then the failed run's log is the previous one.
        for previous in (False, True):
            path = path_for(job.name, pod.name, previous)
            identity = f"{pod.uid}:{max(pod.restart_count - (1 if previous else 0), 0)}"
            try:
                source = iter(runtime.stream_log(task.namespace, pod.name, previous=previous))
                first = next(source, b"")
            except Exception:  # noqa: BLE001 - gone already, or nothing to keep
                continue
            if previous and not first:
                continue  # no previous instance
            _rotate(base, path, pod.name, identity)
            budget = cap - _used_bytes(base, {path})
            if budget <= 1024:
                cut.add(path.name)
                logger.warning("log archive of job %s is full (%s bytes); %s not archived", job.name, cap, pod.name)
                continue

            def stream(first=first, source=source):
                yield first
                yield from source

            try:
                _size, was_cut = _write(path, stream(), budget, cap)
            except Exception:  # noqa: BLE001 - the runtime stopped answering mid-stream: keep what we had
                logger.exception("archiving the log of %s", pod.name)
                continue
            (cut.add if was_cut else cut.discard)(path.name)
            identities[path.name] = identity
        _archive_ray_logs(job, task, runtime, pod.name, cap)
    meta.update(cut=sorted(cut), identities=identities)
    _write_meta(base, meta)


def _archive_ray_logs(job, task, runtime, pod: str, cap: int) -> None:
    """Archive the Ray logs the runtime kept of ``pod``'s failed runs (none kept: nothing written, an earlier
    copy stays), within what the job's cap leaves. Best effort, like the main logs."""
    try:
        if runtime.kept_ray_logs_bytes(task.namespace, job.name, pod) <= 0:
            return
        path = ray_path_for(job.name, pod)
        budget = cap - _used_bytes(path.parent, {path})
        if budget <= 1024:
            logger.warning("log archive of job %s is full; the Ray logs of %s not archived", job.name, pod)
            return
        source = runtime.stream_ray_logs(task.namespace, job.name, pod, max_bytes=budget - 1024)
        tmp = path.with_name(path.name + ".tmp")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "wb") as out:
            for chunk in source:
                out.write(chunk)
        os.replace(tmp, path)
    except Exception:  # noqa: BLE001 - gone already, or the runtime stopped answering: keep what we had
        logger.exception("archiving the Ray logs of %s", pod)


def archive_job_logs(job) -> None:
    """Archive every Task's Worker logs, the header's Task first (its log is the run's record)."""
    for task in sorted(job.tasks.select_related("cluster"), key=lambda t: (not t.head, t.order, t.name)):
        archive_task_logs(job, task)


# --- after Delete ------------------------------------------------------------------------------------------


def retire(job_name: str, now: datetime | None = None) -> Path | None:
    """On Delete: keep the job's archive under ``.deleted/<job>-<stamp>/`` until the retention period
    ends (a job created later with the same name starts a fresh archive). Returns the new directory."""
    base = job_dir(job_name)
    if not base.is_dir():
        return None
    now = now or timezone.now()
    target = root() / DELETED / f"{job_name}-{now.strftime('%Y%m%d%H%M%S%f')}"
    target.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    os.replace(base, target)
    meta = read_meta(target)
    meta.update(job=meta.get("job") or job_name, deletedAt=now.isoformat())
    _write_meta(target, meta)
    return target


def forget_job_logs(job_name: str) -> None:
    """Delete keeps the archive for the retention period (:func:`retire`)."""
    retire(job_name)


def deleted_archives() -> list[dict[str, Any]]:
    """Archives of deleted jobs still kept: ``[{"id", "job", "owner", "ownerId", "deletedAt", "expiresAt",
    "capBytes", "cut", "files": [{"pod", "previous", "bytes"}], "rayLogs": [{"pod", "bytes"}]}]``, newest
    first (``rayLogs``: the archived Ray logs of failed runs, :func:`find_ray`)."""
    out = []
    days = float(settings.RLARK_LOG_ARCHIVE_RETENTION_DAYS)
    for base in sorted((root() / DELETED).glob("*"), reverse=True):
        meta = read_meta(base)
        if not base.is_dir() or not meta.get("deletedAt"):
            continue
        deleted = datetime.fromisoformat(meta["deletedAt"])
        files = []
        for path in sorted(base.glob("*.log*")):
            name = path.name.removesuffix(".gz").removesuffix(".log")
            previous = name.endswith(".previous")
            files.append({"pod": name.removesuffix(".previous"), "previous": previous, "bytes": path.stat().st_size})
        out.append(
            {
                "id": base.name,
                "job": meta.get("job", ""),
                "owner": meta.get("owner", ""),
                "ownerId": meta.get("ownerId"),
                "deletedAt": meta["deletedAt"],
                "expiresAt": (deleted + timedelta(days=days)).isoformat(),
                "capBytes": meta.get("capBytes"),
                "cut": cut_files("", base),
                "files": files,
                "rayLogs": [
                    {"pod": p.name.removesuffix(RAY_SUFFIX), "bytes": p.stat().st_size}
                    for p in sorted(base.glob(f"*{RAY_SUFFIX}"))
                ],
            }
        )
    return out


def deleted_dir(archive_id: str) -> Path | None:
    """The directory of a deleted job's archive by id; None for an unknown or malformed id."""
    if not _ID_RE.match(archive_id or ""):
        return None
    base = root() / DELETED / archive_id
    return base if base.is_dir() else None


def purge_expired(now: datetime | None = None) -> int:
    """Remove deleted jobs' archives older than the retention period; returns how many were removed."""
    now = now or timezone.now()
    days = float(settings.RLARK_LOG_ARCHIVE_RETENTION_DAYS)
    removed = 0
    for base in (root() / DELETED).glob("*"):
        meta = read_meta(base)
        try:
            deleted = datetime.fromisoformat(meta["deletedAt"])
        except (KeyError, TypeError, ValueError):
            deleted = datetime.fromtimestamp(base.stat().st_mtime, tz=timezone.get_current_timezone())
        if now - deleted >= timedelta(days=days):
            shutil.rmtree(base, ignore_errors=True)
            removed += 1
    return removed
