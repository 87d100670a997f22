"""Check 5's output path: does the run's output exist and can it be read again (seed 02-confirm-job-running,
check 5: "需要保留的 checkpoint 或输出已经写入持久存储，并且可以重新读取").

On the local runtime the container path is resolved through the hostPath mount that covers it and scanned on this
host (:mod:`jobs.explain.output_scan`); elsewhere the scan runs inside a running Worker whose hostPath or PVC mount
covers it (:mod:`jobs.explain.output_probe`). A path no such mount covers is ``unsupported`` (to confirm).
"""

from __future__ import annotations

import os
from collections.abc import Callable

from jobs.explain import output_scan
from jobs.explain.runcheck_input import OutputCheck
from jobs.jobspec.mounts import host_path_for, persistent_mount_for

HASH_LIMIT = 256 * 2**20  # bytes read to hash one output file
# (template name, container path) -> output_scan.scan's result read inside a running Worker, or None
OutputProbe = Callable[[str, str], "dict | None"]


def check_output(path: str, templates: list[dict], runtime_kind: str, probe: OutputProbe | None = None) -> OutputCheck:
    """Check that ``path`` (container path, globs allowed) exists and is readable: on the local runtime through the
    hostPath mount that covers it; elsewhere inside a running Worker whose hostPath or PVC mount covers it
    (``probe``: ``(template name, container path) -> scan result or None``, see :func:`output_probe.probe`)."""
    if not path:
        return OutputCheck("unset")
    if runtime_kind != "local":
        covering = [str(t.get("name")) for t in templates if persistent_mount_for(t, path)]
        if not covering:
            return OutputCheck("unsupported", path, detail="no hostPath or PVC mount covers it")
        result = next((r for name in covering if probe is not None and (r := probe(name, path)) is not None), None)
        if result is None:
            return OutputCheck("unsupported", path, detail="no running Worker mounts it")
        return _output_result(path, path, result)
    host = next((h for t in templates if (h := host_path_for(t, path)) is not None), None)
    if host is None:
        return OutputCheck("unsupported", path, detail="no hostPath mount covers it")
    return _output_result(path, host, output_scan.scan(host, HASH_LIMIT))


def _output_result(path: str, where: str, result: dict) -> OutputCheck:
    """An :class:`OutputCheck` of ``output_scan.scan(where)`` for the container path ``path``."""
    if result.get("state") != "ok":
        return OutputCheck(str(result.get("state")), path, detail=str(result.get("detail") or ""))
    newest = str(result["newest"])
    prefix = where.split("*")[0].rstrip("/") if "*" in where else where
    single = not any(c in where for c in "*?[") and newest == where
    rel = os.path.relpath(newest, prefix if not single else os.path.dirname(prefix))
    base = path.split("*")[0].rstrip("/") if "*" in path else path
    sample = base if single or rel == "." else f"{base.rstrip('/')}/{rel}"
    return OutputCheck("ok", path, int(result["files"]), sample, int(result["size"]), str(result["sha256"]))
