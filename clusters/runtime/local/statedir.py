"""The local runtime's state directory and the names inside it.

State directory ``<root>`` (``settings.RLARK_LOCAL_ROOT``)::

    supervisor.sock, supervisor.lock, supervisor.pid
    state.json                        desired Tasks, Pods (PIDs, restart counts, ports), job GCS ports
    pods/<cluster>/<pod>/             main.log, main.previous.log, home/ work/ tmp/ (the Worker's
                                      /rlark/home, /rlark/work, /tmp), volumes/
    storage/<cluster>/<class>/<claim> PVC / object-storage mounts (kept when a job stops)
    ray-logs/<cluster>/<job>/         Ray logs of failed Worker runs (:mod:`.ray_logs`)

Tasks, Pods, jobs and domain members are keyed ``<cluster>/<name>`` in ``state.json`` (:func:`cluster_key`).
"""

from __future__ import annotations

import hashlib
from datetime import UTC, datetime
from pathlib import Path


def now_iso() -> str:
    """The current time, ISO 8601 in UTC (``2026-01-02T03:04:05.123456+00:00``)."""
    return datetime.now(UTC).isoformat()


def socket_path(root: Path) -> Path:
    """The control socket: ``<root>/supervisor.sock``, or a short path in /tmp when that would be
    too long for a unix socket (108 bytes)."""
    path = Path(root) / "supervisor.sock"
    if len(str(path)) < 100:
        return path
    digest = hashlib.sha1(str(Path(root).resolve()).encode()).hexdigest()[:12]
    return Path(f"/tmp/rlark-sup-{digest}.sock")


def pod_dir(root: Path, cluster: str, pod: str) -> Path:
    """``<root>/pods/<cluster>/<pod>``: the Pod's files (logs, home, work, tmp, volumes)."""
    return Path(root) / "pods" / cluster / pod


def cluster_key(cluster: str, name: str) -> str:
    """``<cluster>/<name>``: the key of a Task, Pod, job or domain member in ``state.json``."""
    return f"{cluster}/{name}"
