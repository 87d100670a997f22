"""The resolved RLinf config a run wrote beside its TensorBoard events, shown byte for byte with its sha256.

RLinf's ``MetricLogger`` (``rlinf/utils/metric_logger.py``) saves the resolved Hydra config as ``config.yaml`` in
its TensorBoard directory (``<runner.logger.log_path>/tensorboard/``, ``OmegaConf.save(..., resolve=True)``)
when ``runner.logger.logger_backends`` lists ``tensorboard``. That is check 4's "解析后的配置文件位置与校验和"
(seed 02-confirm-job-running.txt). The file is found where the Metrics tab finds the event files
(:func:`jobs.observe.metrics.tensorboard_source`: the Header's ``tensorBoardDir`` of the current run, on this
machine through a hostPath mount): ``config.yaml`` in that directory or in its ``tensorboard/`` child, else the
newest ``config.yaml`` that sits beside event files at most :data:`MAX_DEPTH` levels down (``tensorBoardDir`` may
be the parent of timestamped run folders, reference rlinf.md), looking at no more than
:data:`MAX_ENTRIES` directory entries.

Bounds: at most :data:`MAX_SHOW` bytes are shown (``truncated`` says when the file is longer); the checksum covers
the whole file up to :data:`MAX_HASH` bytes (``hashed_all`` is False beyond). The file is opened without
following a link, and a path that resolves outside the TensorBoard directory is not read.
"""

from __future__ import annotations

import hashlib
import os
import stat
from dataclasses import dataclass
from typing import Any

from jobs.observe.metrics import tensorboard_source

FILE = "config.yaml"
MAX_SHOW = 256 * 1024  # bytes shown on the page
MAX_HASH = 64 * 1024 * 1024  # bytes the checksum reads
CHUNK = 1024 * 1024
MAX_DEPTH = 3  # directory levels below tensorBoardDir searched for a run's config.yaml
MAX_ENTRIES = 5000  # directory entries looked at by that search


@dataclass
class ResolvedConfig:
    """``path`` (container path), ``size`` (bytes), ``sha256`` (hex of the file, or of its first MAX_HASH bytes
    when ``hashed_all`` is False), ``text`` (the first MAX_SHOW bytes, UTF-8; undecodable bytes replaced)."""

    path: str
    size: int
    sha256: str
    text: str
    truncated: bool
    hashed_all: bool

    def to_dict(self) -> dict[str, Any]:
        return {
            "path": self.path,
            "size": self.size,
            "sha256": self.sha256,
            "text": self.text,
            "truncated": self.truncated,
            "hashedAll": self.hashed_all,
        }


def _read(host_file: str) -> tuple[bytes, str, int, bool] | None:
    """``(first MAX_SHOW bytes, sha256 hex, size, hashed whole file)`` of a regular file, or None."""
    try:
        fd = os.open(host_file, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        return None
    with os.fdopen(fd, "rb") as f:
        st = os.fstat(f.fileno())
        if not stat.S_ISREG(st.st_mode):
            return None
        digest = hashlib.sha256()
        head = b""
        read = 0
        while read < MAX_HASH:
            chunk = f.read(min(CHUNK, MAX_HASH - read))
            if not chunk:
                break
            if len(head) < MAX_SHOW:
                head += chunk[: MAX_SHOW - len(head)]
            digest.update(chunk)
            read += len(chunk)
        return head, digest.hexdigest(), st.st_size, read >= st.st_size


def _run_configs(base: str) -> list[str]:
    """Relative paths of the ``config.yaml`` files beside event files under ``base`` (depth <= MAX_DEPTH, links
    not followed, MAX_ENTRIES entries at most), newest first."""
    found: list[tuple[float, str]] = []
    seen = 0
    for root, dirs, files in os.walk(base):
        seen += len(dirs) + len(files)
        depth = os.path.relpath(root, base).count(os.sep) + (root != base)
        if depth >= MAX_DEPTH or seen > MAX_ENTRIES:
            dirs[:] = []
        if FILE in files and any("tfevents" in f for f in files):
            try:
                found.append(
                    (os.lstat(os.path.join(root, FILE)).st_mtime, os.path.relpath(os.path.join(root, FILE), base))
                )
            except OSError:
                continue
        if seen > MAX_ENTRIES:
            break
    return [rel for _, rel in sorted(found, reverse=True)]


def resolved_config(job) -> ResolvedConfig | None:
    """The current run's resolved ``config.yaml`` of ``job`` when the console can read it, else None."""
    source = tensorboard_source(job)
    if not source.host_dir:
        return None
    base = os.path.realpath(source.host_dir)
    for rel in (FILE, os.path.join("tensorboard", FILE), *_run_configs(source.host_dir)):
        host_file = os.path.join(source.host_dir, rel)
        real = os.path.realpath(host_file)
        if os.path.commonpath([base, real]) != base or not os.path.isfile(real):
            continue
        found = _read(host_file)
        if found is None:
            continue
        head, sha, size, whole = found
        return ResolvedConfig(
            path=f"{source.container_dir.rstrip('/')}/{rel}",
            size=size,
            sha256=sha,
            text=head.decode("utf-8", errors="replace"),
            truncated=size > len(head),
            hashed_all=whole,
        )
    return None
