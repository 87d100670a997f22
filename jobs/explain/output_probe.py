"""Run check 5 on a cluster whose nodes the console cannot read (Kubernetes): :func:`probe_for` a job returns the
``OutputProbe`` of ``jobs.explain.runcheck_output.check_output``, which runs :mod:`jobs.explain.output_scan` inside a
running Worker of the Task template whose hostPath or PVC mount covers the output path (the Header first), through
the runtime's exec (``pods/exec``), and reads its one result line.

A result is kept for :data:`CACHE_SECONDS` per (job, template, path), so a page refreshed every few seconds does not
open an exec each time. Bounded: at most :data:`MAX_OUTPUT` bytes are read and :data:`TIMEOUT` seconds waited; a
Worker that does not answer (not running, no ``python3``, exec refused) is skipped and the next one is tried.
"""

from __future__ import annotations

import hashlib
import logging
from pathlib import Path

from django.core.cache import cache

from jobs.explain import output_scan
from jobs.observe.worker_script import first_answer, running_pods

log = logging.getLogger("rlark.runcheck")
CACHE_SECONDS = 30
MAX_OUTPUT = 64 << 10  # bytes read from one exec
TIMEOUT = 30.0  # seconds one exec may take
SCRIPT = Path(output_scan.__file__).read_text(encoding="utf-8")


def probe_for(job, hash_limit: int):
    """``(template name, container path) -> scan result | None`` for ``job`` (see the module docstring)."""

    def probe(template: str, path: str) -> dict | None:
        key = "rlark:output-probe:" + hashlib.sha256(f"{job.pk}\0{template}\0{path}".encode()).hexdigest()
        cached = cache.get(key)
        if cached is not None:
            return cached
        result = _probe(job, template, path, hash_limit)
        if result is not None:
            cache.set(key, result, CACHE_SECONDS)
        return result

    return probe


def _probe(job, template: str, path: str, hash_limit: int) -> dict | None:
    tasks = job.tasks.filter(template_name=template).select_related("cluster")
    argv = ["python3", "-c", SCRIPT, path, str(hash_limit)]
    return first_answer(
        running_pods(tasks), argv, output_scan.MARKER, output_scan.decode,
        log=log, what="output check", timeout=TIMEOUT, max_output=MAX_OUTPUT,
    )  # fmt: skip
