"""The resolved RLinf config a run wrote beside its TensorBoard events, shown byte for byte with its sha256.

RLinf's ``MetricLogger`` (``rlinf/utils/metric_logger.py``) saves the resolved Hydra config as ``config.yaml`` in
its TensorBoard directory (``<runner.logger.log_path>/tensorboard/``, ``OmegaConf.save(..., resolve=True)``)
when ``runner.logger.logger_backends`` lists ``tensorboard``. That is check 4's "解析后的配置文件位置与校验和"
(seed 02-confirm-job-running.txt). The file is found where the Metrics tab finds the event files
(:func:`jobs.observe.metrics.tensorboard_source`: the Header's ``tensorBoardDir`` of the current run), by
:mod:`jobs.observe.config_scan`'s search: on this machine through a hostPath mount (local runtime), or, on a
cluster whose nodes the console cannot read (Kubernetes), inside the job's running Header through the runtime's
exec (``pods/exec``, the way Run check 5 reads an output path), its answer kept :data:`CACHE_SECONDS`.

Bounds: at most :data:`MAX_SHOW` bytes are shown (``truncated`` says when the file is longer); the checksum covers
the whole file up to :data:`MAX_HASH` bytes (``hashed_all`` is False beyond). The file is opened without
following a link, and a path that resolves outside the TensorBoard directory is not read. One exec reads at most
:data:`MAX_OUTPUT` bytes and waits :data:`TIMEOUT` seconds.
"""

from __future__ import annotations

import base64
import hashlib
import itertools
import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from django.core.cache import cache

from jobs.observe import config_scan
from jobs.observe.metrics import tensorboard_source
from jobs.observe.run_prefix import run_path
from jobs.observe.worker_script import first_answer, running_pods

log = logging.getLogger("rlark.metrics")
FILE = config_scan.FILE
MAX_SHOW = config_scan.MAX_SHOW  # bytes shown on the page
MAX_HASH = config_scan.MAX_HASH  # bytes the checksum reads
CACHE_SECONDS = 30  # a Header's answer is kept this long (a page refreshed every few seconds opens one exec)
MAX_OUTPUT = 512 << 10  # bytes read from one exec (the shown bytes in base64, and the rest of the answer)
TIMEOUT = 30.0  # seconds one exec may take
SCRIPT = Path(config_scan.__file__).read_text(encoding="utf-8")


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


def resolved_config(job) -> ResolvedConfig | None:
    """The current run's resolved ``config.yaml`` of ``job`` when the console can read it, else None: on this
    machine through a hostPath mount (local runtime), or inside the job's running Header (Kubernetes)."""
    source = tensorboard_source(job)
    if source.host_dir:
        found = config_scan.find(source.host_dir)
        base = source.container_dir
    elif source.reason == "not_local" and (base := run_path(job, source.container_dir) or ""):
        found = _in_header(job, base)
    else:
        return None
    if found is None:
        return None
    head = base64.b64decode(found["head"])[:MAX_SHOW]
    size = int(found["size"])
    return ResolvedConfig(
        path=f"{base.rstrip('/')}/{found['rel']}",
        size=size,
        sha256=str(found["sha256"]),
        text=head.decode("utf-8", errors="replace"),
        truncated=size > len(head),
        hashed_all=bool(found["hashed_all"]),
    )


def _in_header(job, directory: str) -> dict | None:
    """:func:`config_scan.find` of ``directory`` run inside the job's running Header Pod (``pods/exec``), kept
    :data:`CACHE_SECONDS` per (job, run, directory); None when no Header runs or it does not answer."""
    header = next((t for t in job.tasks.select_related("cluster") if t.head), None)
    pods = list(itertools.islice(running_pods([header] if header is not None else []), 1))
    if not pods:
        return None
    key = "rlark:resolved-config:" + hashlib.sha256(f"{job.pk}\0{pods[0][1].uid}\0{directory}".encode()).hexdigest()
    cached = cache.get(key)
    if cached is not None:
        return cached.get("config")
    argv = ["python3", "-c", SCRIPT, directory]
    result = first_answer(
        pods, argv, config_scan.MARKER, config_scan.decode,
        log=log, what="resolved config", timeout=TIMEOUT, max_output=MAX_OUTPUT,
    )  # fmt: skip
    if result is None:
        return None
    cache.set(key, result, CACHE_SECONDS)
    return result.get("config")
