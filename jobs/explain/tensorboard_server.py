"""Open in TensorBoard: a real TensorBoard (the PyPI package) per job, started on demand, bound to
127.0.0.1 on a free port, served by the console under ``/jobs/<job>/tensorboard/`` (TensorBoard's own
``--path_prefix``, so its pages and assets need no rewriting) and stopped when nobody used it for
``RLARK_TENSORBOARD_IDLE`` seconds (default 600).

It runs as the job itself (docs/security.md): as the uid of the job's Workers, in namespaces of its own where the
console's files are hidden, with only the job's TensorBoard directory mounted, read-only, at :data:`LOGDIR_MOUNT`
(``clusters.runtime.local.launcher``). TensorBoard follows symlinks and its plugins read files the run names, so a
job's files could otherwise make a root TensorBoard read anything on the host. A root console that cannot learn
the job's uid does not start it.

Who may open it is decided by the view (``jobs.policy.get_job_for``, the job's own permission); this module only
runs the processes. One process per job and web process; at most :data:`MAX_SERVERS` at once (the least recently used
is stopped to make room). Errors: :class:`TensorBoardUnavailable` with a reason code the view translates
(``unset`` | ``not_local`` | ``no_mount`` | ``missing`` | ``start_failed``).
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

from django.conf import settings

import rlark_config
from clusters.runtime import registry
from clusters.runtime.local import launcher
from jobs.observe.metrics import tensorboard_source

MAX_SERVERS = 4
START_TIMEOUT = 60.0  # seconds until TensorBoard answers (it loads its plugins first)


def idle_seconds() -> float:
    return float(settings.RLARK_TENSORBOARD_IDLE)


class TensorBoardUnavailable(Exception):
    """The job has no TensorBoard directory this console can read, or TensorBoard did not start."""

    def __init__(self, reason: str, detail: str = "") -> None:
        super().__init__(detail or reason)
        self.reason = reason


@dataclasses.dataclass
class Server:
    """A running TensorBoard: ``port`` on 127.0.0.1, serving ``logdir`` under ``prefix``."""

    job: str
    logdir: str
    port: int
    prefix: str
    proc: subprocess.Popen
    last_used: float = dataclasses.field(default_factory=time.monotonic)

    def alive(self) -> bool:
        return self.proc.poll() is None

    def stop(self) -> None:
        if self.proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(timeout=5)


_servers: dict[str, Server] = {}
_lock = threading.Lock()
_reaper: threading.Thread | None = None


def prefix_for(job_name: str) -> str:
    """The URL prefix TensorBoard serves under (``/jobs/<job>/tensorboard``)."""
    return f"/jobs/{job_name}/tensorboard"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _answers(port: int) -> bool:
    with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), timeout=0.5):
        return True
    return False


LOGDIR_MOUNT = "/rlark/tensorboard"


def _spawn(job_name: str, logdir: str, port: int, prefix: str, ids: tuple[int, int] | None) -> subprocess.Popen:
    """TensorBoard for ``logdir`` as host uid ``ids[0]`` (None: this console's own user, unprivileged) in a private
    user, mount and PID namespace, like a local Worker; its log goes to ``<VAR_DIR>/tensorboard/<job>/main.log``."""
    pod_dir = Path(settings.VAR_DIR) / "tensorboard" / job_name
    for d in (pod_dir, pod_dir / "home", pod_dir / "work"):
        d.mkdir(parents=True, exist_ok=True)
        if ids is not None and d != pod_dir:
            os.chown(d, ids[0], ids[0])
    pod_dir.chmod(0o700)
    extra = rlark_config.current().local_hide
    hidden = launcher.hidden_roots([settings.VAR_DIR, settings.RLARK_LOCAL_ROOT, *extra])
    env = {
        "PATH": f"{launcher.VENV_BIN}:{launcher.SYSTEM_PATH}",
        "HOME": launcher.POD_HOME,
        "LANG": "C.UTF-8",
        "PYTHONUNBUFFERED": "1",
        "POD_NAME": f"tb-{job_name}"[:63],
    }
    argv = [sys.executable, "-m", "tensorboard.main", "--logdir", LOGDIR_MOUNT, "--host", "127.0.0.1"]
    argv += ["--port", str(port), "--path_prefix", prefix, "--reload_interval", "15"]
    mounts = [launcher.Mount("bind", str(Path(logdir).resolve()), LOGDIR_MOUNT, read_only=True)]
    return launcher.spawn(pod_dir, argv, env, mounts, workdir="/", ids=ids, hidden=hidden)


def _start(job_name: str, logdir: str, ids: tuple[int, int] | None = None) -> Server:
    """Start TensorBoard for ``logdir`` as ``ids`` (:func:`_spawn`) and wait until it answers. Raises
    :class:`TensorBoardUnavailable` (``start_failed``) when it exits or does not answer within START_TIMEOUT s."""
    port = _free_port()
    prefix = prefix_for(job_name)
    proc = _spawn(job_name, logdir, port, prefix, ids)
    server = Server(job_name, logdir, port, prefix, proc)
    deadline = time.monotonic() + START_TIMEOUT
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise TensorBoardUnavailable("start_failed", f"TensorBoard exited with code {proc.returncode}")
        if _answers(port):
            return server
        time.sleep(0.2)
    server.stop()
    raise TensorBoardUnavailable("start_failed", "TensorBoard did not answer in time")


def _job_ids(job) -> tuple[int, int] | None:
    """The host uid range of ``job``'s Workers (its head Task's local cluster). Raises
    :class:`TensorBoardUnavailable` (``start_failed``) when a root console cannot learn it: TensorBoard never runs
    as root."""
    head = job.tasks.select_related("cluster").filter(head=True).first() or job.tasks.select_related("cluster").first()
    try:
        ids = registry.runtime_for(head.cluster).job_ids(job.name) if head is not None else None
    except Exception as exc:  # noqa: BLE001 - any runtime failure: refuse rather than run as root
        raise TensorBoardUnavailable("start_failed", f"the job's uid is unknown: {exc}") from None
    if ids is None and os.geteuid() == 0:
        raise TensorBoardUnavailable("start_failed", "the job's uid is unknown")
    return ids


def ensure(job) -> Server:
    """The running TensorBoard of ``job`` (``jobs.models.Job``), started if needed (blocks until it answers).

    Serves the job's TensorBoard directory as the Metrics tab reads it
    (``jobs.observe.metrics.tensorboard_source``). Raises :class:`TensorBoardUnavailable`."""
    source = tensorboard_source(job)
    if not source.host_dir:
        raise TensorBoardUnavailable(source.reason or "unset")
    with _lock:
        server = _servers.get(job.name)
        if server is not None and server.alive() and server.logdir == source.host_dir:
            server.last_used = time.monotonic()
            return server
        if server is not None:
            server.stop()
            _servers.pop(job.name, None)
        while len(_servers) >= MAX_SERVERS:
            oldest = min(_servers.values(), key=lambda s: s.last_used)
            oldest.stop()
            _servers.pop(oldest.job, None)
        server = _start(job.name, source.host_dir, _job_ids(job))
        _servers[job.name] = server
        _ensure_reaper()
        return server


def touch(job_name: str) -> None:
    """Mark the job's TensorBoard as used now (every proxied request)."""
    server = _servers.get(job_name)
    if server is not None:
        server.last_used = time.monotonic()


def stop_idle(now: float | None = None) -> list[str]:
    """Stop every TensorBoard unused for :func:`idle_seconds` (or whose process died); returns their jobs."""
    now = time.monotonic() if now is None else now
    stopped = []
    with _lock:
        for name, server in list(_servers.items()):
            if not server.alive() or now - server.last_used > idle_seconds():
                server.stop()
                del _servers[name]
                stopped.append(name)
    return stopped


def stop_all() -> None:
    with _lock:
        for server in _servers.values():
            server.stop()
        _servers.clear()


def running() -> dict[str, Server]:
    return dict(_servers)


def _ensure_reaper() -> None:
    global _reaper
    if _reaper is not None and _reaper.is_alive():
        return

    def loop() -> None:
        while True:
            time.sleep(max(1.0, min(30.0, idle_seconds() / 4)))
            stop_idle()
            if not _servers:
                return

    _reaper = threading.Thread(target=loop, name="tensorboard-reaper", daemon=True)
    _reaper.start()


import atexit  # noqa: E402 - registered once the module is used

atexit.register(stop_all)
