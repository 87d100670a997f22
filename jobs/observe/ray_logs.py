"""Ray's own log files (raylet, GCS, dashboard agent ...) of a Worker's failed runs, for download.

Seed 05-troubleshooting-jobs-workers.txt asks for the failing Worker's evidence; when a Ray Worker could not
start, Ray's files hold it and the Worker's ``/tmp`` goes with the container. The local runtime keeps them until
the job is deleted (``clusters.runtime.local.ray_logs``); the log archive copies them when the job stops or ends
(``jobs.control.log_archive``), so they stay readable after Stop and, for the retention period, after Delete.

- :func:`available` ``(job, pod) -> bool``: the runtime keeps some, or the archive has a copy.
- :func:`open_bundle` ``(job, pod) -> Iterator[bytes]``: a tar.gz, from the runtime while it keeps them (bounded by
  the job's log archive cap), else the archived copy. Raises ``Pod.DoesNotExist`` for a Pod that is not one of
  the job's Workers, :class:`RuntimeFailure` (``not_found``) when neither has them.
"""

from __future__ import annotations

from collections.abc import Iterator

from clusters.runtime import registry
from clusters.runtime.base import RuntimeFailure
from jobs.control import log_archive
from jobs.models import Job, Pod
from jobs.observe.status import task_of_pod


def _kept_bytes(job: Job, pod: str) -> int:
    task = task_of_pod(job, pod)
    try:
        return registry.runtime_for(task.cluster).kept_ray_logs_bytes(task.namespace, job.name, pod)
    except (RuntimeFailure, OSError):
        return 0


def available(job: Job, pod: str) -> bool:
    """Whether Ray logs of ``pod``'s failed runs can be downloaded (False for a Pod not of this job)."""
    try:
        return log_archive.find_ray(job.name, pod) is not None or _kept_bytes(job, pod) > 0
    except Pod.DoesNotExist:
        return False


def open_bundle(job: Job, pod: str) -> Iterator[bytes]:
    """The tar.gz of ``pod``'s kept Ray logs as byte chunks (see the module docstring for the errors)."""
    task = task_of_pod(job, pod)
    if _kept_bytes(job, pod) > 0:
        runtime = registry.runtime_for(task.cluster)
        return runtime.stream_ray_logs(task.namespace, job.name, pod, max_bytes=log_archive.cap_for(job))
    path = log_archive.find_ray(job.name, pod)
    if path is None:
        raise RuntimeFailure(f"no Ray logs are kept for pod {pod}", "not_found")
    return log_archive.raw_chunks(path)
