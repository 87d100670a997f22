"""The logs of many Workers of one Job at once, for the Diagnosis tab, the pending reasons and the Run check
(read one by one, with a query and a new runtime client each, a 200-Worker job's logs took too long).

:func:`read_logs` takes the job's Tasks as the caller already loaded them (with their clusters), builds one
runtime per cluster, and reads the logs concurrently (at most ``PARALLEL`` in flight): each log as
``status.read_pod_log`` gives it (the first ``LOG_HEAD_LINES`` and last ``LOG_TAIL_LINES`` lines, else the
archived copy / a plain read). No database query is made; a log that cannot be read is "".
"""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import TypeVar

from clusters.runtime import registry
from clusters.runtime.base import Runtime, RuntimeFailure
from jobs.control import log_archive
from jobs.observe.status import head_and_tail

PARALLEL = 8  # log reads in flight per request (as the sync's LOG_READ_PARALLEL)
T = TypeVar("T")
R = TypeVar("R")


def _read_one(job_name: str, runtime: Runtime | None, namespace: str, pod: str) -> str:
    """One Worker's log, the way ``status.read_pod_log`` reads it, without its Task lookup."""
    if runtime is None:
        return ""
    try:
        text = head_and_tail(runtime.stream_log(namespace, pod))
        if text:
            return text
    except (RuntimeFailure, OSError, NotImplementedError):
        pass
    try:
        try:
            return runtime.read_log(namespace, pod, tail_lines=None)
        except RuntimeFailure:
            return archived_log(job_name, pod) or ""
    except Exception:  # noqa: BLE001 - a missing log is shown as "no log", never an error page
        return ""


def archived_log(job_name: str, pod: str) -> str | None:
    """The whole archived log of ``pod`` (``log_archive``: what Stop and Delete kept), None when there is none or
    it cannot be read."""
    try:
        path = log_archive.find(job_name, pod)
        return log_archive.read_tail(path, None) if path is not None else None
    except OSError:
        return None


def cluster_runtime(runtimes: dict[int, Runtime | None], task) -> Runtime | None:
    """The runtime of ``task``'s cluster (``task.cluster`` loaded), built once per cluster into ``runtimes``;
    None when it cannot be built."""
    if task.cluster_id not in runtimes:
        try:
            runtimes[task.cluster_id] = registry.runtime_for(task.cluster)
        except RuntimeFailure:
            runtimes[task.cluster_id] = None
    return runtimes[task.cluster_id]


def map_concurrently(read: Callable[[T], R], work: list[T], name: str) -> list[R]:
    """``[read(w) for w in work]``, at most ``PARALLEL`` at a time on threads named ``name`` (in this thread when
    there is one item)."""
    if len(work) <= 1:
        return [read(item) for item in work]
    with ThreadPoolExecutor(max_workers=min(PARALLEL, len(work)), thread_name_prefix=name) as pool:
        return list(pool.map(read, work))


def read_logs(job, tasks, names: list[str]) -> dict[str, str]:
    """Pod name -> log text for ``names`` (Pods of ``tasks``, the job's Tasks with ``cluster`` loaded; a name
    whose Task is not among them reads as ""). One runtime per cluster; reads run concurrently."""
    by_name = {t.name: t for t in tasks}
    runtimes: dict[int, Runtime | None] = {}
    work: list[tuple[str, Runtime | None, str]] = []
    for pod in names:
        task = by_name.get(pod.rpartition("-")[0])
        if task is None:
            work.append((pod, None, ""))
            continue
        work.append((pod, cluster_runtime(runtimes, task), task.namespace))

    def read(item: tuple[str, Runtime | None, str]) -> str:
        pod, runtime, namespace = item
        return _read_one(job.name, runtime, namespace, pod)

    return dict(zip([item[0] for item in work], map_concurrently(read, work, "rlark-diag-log"), strict=True))
