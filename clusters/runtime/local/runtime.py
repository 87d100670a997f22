"""``LocalRuntime``: the :class:`~clusters.runtime.base.Runtime` of a ``local`` cluster.

A thin client of the local supervisor (``clusters.runtime.local.supervisor`` serving ``.supervision``), which owns
the Worker processes; this object lives in the web and Celery processes and keeps no state of its own. Logs are
read straight from the Pod's directory (``<root>/pods/<cluster>/<pod>/main[.previous].log``); exec
enters the Worker's user+mount+PID+UTS namespaces with ``nsenter`` and runs ``bash -l`` on a PTY.

Errors: :class:`RuntimeFailure` with reason ``unreachable`` when the supervisor does not answer
(``python manage.py local_supervisor`` is not running), ``not_found`` for unknown Tasks/Pods and
missing previous logs (:class:`PodNotFound` for Pods), ``invalid``/``internal`` otherwise.
"""

from __future__ import annotations

import dataclasses
import errno
import fcntl
import json
import os
import select
import shutil
import signal
import socket
import struct
import subprocess
import termios
import time
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

from clusters.host_paths import HostPathRefused, check_cluster_host_paths
from clusters.runtime.base import (
    ContainerState,
    LogChunk,
    NodeInfo,
    PodEvent,
    PodInfo,
    PodNotFound,
    Runtime,
    RuntimeFailure,
    StorageClassInfo,
    TaskManifest,
)
from clusters.runtime.local import launcher, log_times, ray_logs
from clusters.runtime.local.scheduling import parse_quantity
from clusters.runtime.local.statedir import pod_dir, socket_path

CHUNK = 64 * 1024
EXEC_READY_WAIT = 15.0  # seconds exec waits for a just-started Worker's namespaces


def _dt(value: str | None) -> datetime | None:
    return datetime.fromisoformat(value) if value else None


def _pod_info(d: dict[str, Any]) -> PodInfo:
    c = d.get("container") or {}
    container = ContainerState(
        name="main",
        state=c.get("state", "unknown"),
        reason=c.get("reason", "") or "",
        message=c.get("message", "") or "",
        exit_code=c.get("exit_code"),
        last_exit_code=c.get("last_exit_code"),
        last_reason=c.get("last_reason", "") or "",
        restart_count=int(c.get("restart_count", 0)),
        ready=bool(c.get("ready")),
        started_at=_dt(c.get("started_at")),
        finished_at=_dt(c.get("finished_at")),
    )
    scheduled = bool(d.get("node"))
    conditions = (
        {
            "type": "PodScheduled",
            "status": "True" if scheduled else "False",
            "reason": "" if scheduled else d["reason"],
            "message": "" if scheduled else d.get("message", ""),
        },
        {"type": "Ready", "status": "True" if container.ready else "False"},
    )
    events: tuple[PodEvent, ...] = ()
    if d.get("reason") == "Unschedulable":
        events = (PodEvent(type="Warning", reason="FailedScheduling", message=d.get("message", "")),)
    elif c.get("reason") == "CrashLoopBackOff":
        events = (PodEvent(type="Warning", reason="BackOff", message=c.get("message", "")),)
    return PodInfo(
        events=events,
        name=d["name"],
        task=d["task"],
        ordinal=int(d["ordinal"]),
        uid=d.get("uid", ""),
        phase=d.get("phase", "Pending"),
        node=d.get("node", ""),
        ip=d.get("ip", ""),
        container=container,
        created_at=_dt(d.get("created_at")),
        started_at=_dt(d.get("started_at")),
        conditions=conditions,
        message=d.get("message", "") or "",
        reason=d.get("reason", "") or "",
    )


class LocalRuntime(Runtime):
    """Runtime of one ``local`` cluster. ``cluster`` is a ``clusters.models.Cluster`` (its virtual
    nodes are read from ``cluster.nodes``) or any object with ``.name`` plus a ``nodes`` list given
    explicitly; ``root`` defaults to ``settings.RLARK_LOCAL_ROOT``."""

    def __init__(
        self, cluster: Any, root: Path | str | None = None, nodes: list[dict] | None = None, timeout: float = 30.0
    ) -> None:
        if root is None:
            from django.conf import settings

            root = settings.RLARK_LOCAL_ROOT
        self.cluster = cluster
        self.name = cluster.name
        self.root = Path(root)
        self._nodes = nodes
        self.timeout = timeout

    # ---- transport ---------------------------------------------------------------------------
    def _node_specs(self) -> list[dict[str, Any]]:
        if self._nodes is not None:
            return self._nodes
        rows = self.cluster.nodes.all() if hasattr(self.cluster, "nodes") else []
        return [
            {
                "name": n.name,
                # what the cluster itself has (console-owned metadata is merged in by node sync)
                "labels": dict(getattr(n, "discovered_labels", None) or n.labels or {}),
                "capacity": dict(n.capacity or {}),
                "allocatable": dict(n.allocatable or n.capacity or {}),
                "online": bool(n.online),
                "unschedulable": bool(n.unschedulable),
            }
            for n in rows
        ]

    def _call(self, op: str, with_nodes: bool = False, **args: Any) -> Any:
        args["cluster"] = self.name
        if with_nodes:
            args["nodes"] = self._node_specs()
            args["network"] = {"isolated": self.isolated}
        path = socket_path(self.root)
        try:
            with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
                s.settimeout(self.timeout)
                s.connect(str(path))
                s.sendall(json.dumps({"op": op, "args": args}).encode() + b"\n")
                buf = b""
                while not buf.endswith(b"\n"):
                    chunk = s.recv(CHUNK)
                    if not chunk:
                        break
                    buf += chunk
        except (TimeoutError, FileNotFoundError, ConnectionRefusedError, OSError) as exc:
            raise RuntimeFailure(
                f"the local runtime supervisor is not answering ({exc.__class__.__name__}); "
                "start it with `python manage.py local_supervisor` (make run does)",
                "unreachable",
            ) from exc
        try:
            answer = json.loads(buf)
        except ValueError as exc:
            raise RuntimeFailure("the local runtime supervisor sent an invalid answer", "internal") from exc
        if not answer.get("ok"):
            raise RuntimeFailure(answer.get("error") or "local runtime error", answer.get("reason") or "internal")
        return answer.get("result")

    # ---- Runtime API -------------------------------------------------------------------------
    @property
    def isolated(self) -> bool:
        """The cluster's Workers get a network namespace each (``Cluster.isolated_network``)."""
        return bool(getattr(self.cluster, "isolated_network", False))

    def ping(self) -> None:
        self._call("set_nodes", nodes=self._node_specs())
        self._call("set_network", isolated=self.isolated)

    def delete_network(self) -> None:
        """Remove the cluster's network namespaces (the cluster was deleted)."""
        self._call("delete_network")

    def set_domain_members(self, members: dict[str, Any]) -> dict[str, Any]:
        """Push the cluster's domain members (``{pod: membership}``, see ``local.domain_members``); returns each
        member's agent state (``{pod: {"state": connecting|connected|stopped, ...}}``)."""
        return self._call("set_domain_members", members=members) or {}

    def domain_states(self) -> dict[str, Any]:
        """``{pod: agent state}`` of the cluster's domain members (read only)."""
        return self._call("domain_states") or {}

    def list_nodes(self) -> list[NodeInfo]:
        used = self._call("list_nodes", with_nodes=True) or {}
        out = []
        for n in self._node_specs():
            capacity = {k: float(_num(v)) for k, v in (n.get("capacity") or {}).items()}
            allocatable = {k: float(_num(v)) for k, v in (n.get("allocatable") or {}).items()}
            out.append(
                NodeInfo(
                    name=n["name"],
                    labels=dict(n.get("labels") or {}),
                    capacity=capacity,
                    allocatable=allocatable,
                    used=dict(used.get(n["name"]) or {}),
                    ready=bool(n.get("online", True)),
                    unschedulable=bool(n.get("unschedulable")),
                )
            )
        return out

    def apply_task(self, manifest: TaskManifest) -> None:
        """Raises RuntimeFailure(reason="invalid") for a hostPath the cluster does not allow (nothing is sent)."""
        try:
            check_cluster_host_paths(self.cluster, manifest.workload)
        except HostPathRefused as exc:
            raise RuntimeFailure(f"hostPath refused: {exc}", "invalid") from None
        self._call("apply_task", with_nodes=True, manifest=dataclasses.asdict(manifest))

    def scale_task(self, namespace: str, task: str, replicas: int) -> None:
        self._call("scale_task", with_nodes=True, task=task, replicas=int(replicas))

    def delete_task(self, namespace: str, task: str, delete_storage: bool = False) -> None:
        self._call("delete_task", task=task, delete_storage=bool(delete_storage))

    def restart_pods(self, namespace: str, task: str) -> None:
        self._call("restart_pods", task=task)

    def list_pods(self, namespace: str, job: str) -> list[PodInfo]:
        return [_pod_info(d) for d in self._call("list_pods", with_nodes=True, job=job) or []]

    def job_ids(self, job: str) -> tuple[int, int] | None:
        """``(first host uid, count)`` that ``job``'s Workers run as on this cluster, None for an unprivileged
        supervisor. Raises RuntimeFailure when the supervisor cannot answer."""
        ids = self._call("job_ids", job=job)
        return (int(ids[0]), int(ids[1])) if ids else None

    def pod_info(self, pod: str) -> dict[str, Any]:
        """Supervisor's record of one Pod (``pid``, ``ns_pid``, ``env``, ``workdir``, ``dir``, ...)."""
        try:
            return self._call("pod_info", pod=pod)
        except RuntimeFailure as exc:
            if exc.reason == "not_found":
                raise PodNotFound(f"pod {pod} not found") from exc
            raise

    def _log_path(self, pod: str, previous: bool) -> Path:
        self.pod_info(pod)  # raises PodNotFound
        path = pod_dir(self.root, self.name, pod) / ("main.previous.log" if previous else "main.log")
        if not path.exists():
            if previous:
                raise RuntimeFailure(f'previous terminated container "main" in pod "{pod}" not found', "not_found")
            path.parent.mkdir(parents=True, exist_ok=True)
            path.touch()
        return path

    def read_log(self, namespace: str, pod: str, tail_lines: int | None = 1000, previous: bool = False) -> str:
        path = self._log_path(pod, previous)
        with open(path, "rb") as f:
            if tail_lines is None:
                data = f.read()
            else:
                data = _tail(f, max(int(tail_lines), 0))
        return data.decode("utf-8", "replace")

    def stream_log(self, namespace: str, pod: str, previous: bool = False, timestamps: bool = False) -> Iterator[bytes]:
        """The Worker's log in chunks; ``timestamps``: every line prefixed with the RFC 3339 time it was written
        and a space, as the kubelet does (``log_times``). Raises PodNotFound for an unknown Pod."""
        path = self._log_path(pod, previous)
        if timestamps:
            return log_times.stamped_chunks(path, CHUNK, previous)

        def chunks() -> Iterator[bytes]:
            with open(path, "rb") as f:
                while chunk := f.read(CHUNK):
                    yield chunk

        return chunks()

    def kept_ray_logs_bytes(self, namespace: str, job: str, pod: str) -> int:
        return ray_logs.kept_bytes(self.root, self.name, job, pod)

    def stream_ray_logs(self, namespace: str, job: str, pod: str, max_bytes: int) -> Iterator[bytes]:
        if not ray_logs.kept_files(self.root, self.name, job, pod):
            raise RuntimeFailure(f"no Ray logs are kept for pod {pod}", "not_found")
        return ray_logs.bundle(self.root, self.name, job, pod, max_bytes)

    def exec(self, namespace: str, pod: str, command: list[str] | None = None) -> LocalExecStream:
        """A process in the Worker's namespaces. A Worker that started a moment ago (its namespaces not set up
        yet) is waited for up to ``EXEC_READY_WAIT`` seconds. Raises PodNotFound, or RuntimeFailure
        (``conflict``) when no container runs."""
        info = self.pod_info(pod)
        deadline = time.monotonic() + EXEC_READY_WAIT
        while not info.get("ns_pid") and info.get("phase") in ("Pending", "Running") and time.monotonic() < deadline:
            time.sleep(0.2)
            info = self.pod_info(pod)
        ns_pid = info.get("ns_pid")
        if not ns_pid:
            raise RuntimeFailure(f"pod {pod} has no running container", "conflict")
        return LocalExecStream(ns_pid, info.get("env") or {}, info.get("workdir") or "/", command)

    def pod_metrics(self, namespace: str, job: str) -> dict[str, dict[str, float]] | None:
        return self._call("pod_metrics", job=job)

    # ---- what the cluster has ------------------------------------------------------------------
    def list_namespaces(self) -> list[str]:
        """The namespaces of the Tasks the supervisor runs for this cluster (stopped ones included)."""
        return list(self._call("list_namespaces") or [])

    def list_storage_classes(self) -> list[StorageClassInfo]:
        """The class directories under ``<root>/storage/<cluster>/`` (made when a claim is first mounted), each
        with its number of claim directories. Asks the supervisor first (a cheap read), so a stopped runtime is
        ``unreachable``, as for every other call."""
        self._call("list_namespaces")
        base = self.root / "storage" / self.name
        if not base.is_dir():
            return []
        out = []
        for d in sorted(p for p in base.iterdir() if p.is_dir())[:500]:
            claims = sum(1 for c in d.iterdir() if c.is_dir())
            out.append(StorageClassInfo(name=d.name, provisioner="rlark.io/local-directory", claims=claims))
        return out

    # ---- per-cluster calls of the status sync --------------------------------------------------
    def prepare_for_thread(self) -> None:
        if self._nodes is None:
            self._nodes = self._node_specs()  # the virtual nodes come from the database

    def list_pods_all(self, namespace: str) -> list[PodInfo]:
        return [_pod_info(d) for d in self._call("list_pods", with_nodes=True) or []]

    def log_sizes(self, namespace: str, pods: list[str]) -> dict[str, int] | None:
        """``stat`` of each Pod's ``main.log`` (no supervisor call, nothing read)."""
        out = {}
        for pod in pods:
            try:
                out[pod] = (pod_dir(self.root, self.name, pod) / "main.log").stat().st_size
            except OSError:
                continue
        return out

    def read_log_from(self, namespace: str, pod: str, cursor: str = "", limit_bytes: int = 4 << 20) -> LogChunk:
        """Byte-offset cursor ``B<offset>`` into ``main.log``; a file shorter than the offset was restarted."""
        path = pod_dir(self.root, self.name, pod) / "main.log"
        offset = int(cursor[1:]) if cursor.startswith("B") and cursor[1:].isdigit() else 0
        try:
            with open(path, "rb") as f:
                size = os.fstat(f.fileno()).st_size
                reset = offset > size
                offset = 0 if reset else offset
                f.seek(offset)
                data = f.read(max(int(limit_bytes), 1))
        except FileNotFoundError:
            self.pod_info(pod)  # PodNotFound when the Pod is gone
            return LogChunk("", cursor)
        end = data.rfind(b"\n") + 1  # whole lines only (but never stall on one line longer than the limit)
        if end == 0 and len(data) >= max(int(limit_bytes), 1):
            end = len(data)
        return LogChunk(data[:end].decode("utf-8", "replace"), f"B{offset + end}", reset)


def _num(value: Any) -> float:
    try:
        return parse_quantity(value)
    except (TypeError, ValueError):
        return 0.0


def _tail(f, lines: int) -> bytes:
    """The last ``lines`` lines of a binary file, reading backwards in blocks."""
    if lines == 0:
        return b""
    f.seek(0, os.SEEK_END)
    end = f.tell()
    pos = end
    data = b""
    while pos > 0 and data.count(b"\n") <= lines:
        step = min(CHUNK, pos)
        pos -= step
        f.seek(pos)
        data = f.read(step) + data
    parts = data.split(b"\n")
    if data.endswith(b"\n"):
        parts = parts[:-1]
        return b"\n".join(parts[-lines:]) + b"\n"
    return b"\n".join(parts[-lines:])


class LocalExecStream:
    """An interactive shell in a local Worker: ``nsenter`` into the Worker's user, mount, PID and
    UTS namespaces, the Worker's env and working directory, ``bash -l`` (else ``sh``) on a PTY.
    nsenter enters the user namespace last and becomes its root, i.e. the Worker's unprivileged host uid:
    the shell sees and may do exactly what the Worker may. Implements
    :class:`clusters.runtime.base.ExecStream`."""

    def __init__(self, ns_pid: int, env: dict[str, str], workdir: str, command: list[str] | None = None) -> None:
        self._exit_code: int | None = None
        master, slave = os.openpty()
        self._fd = master
        nsenter = shutil.which("nsenter") or "/usr/bin/nsenter"
        cmd = command or ["bash", "-l"]
        # nsenter runs as the host's root with the fixed environment only; envexec.py applies the Worker's
        # environment and changes to its working directory inside the Worker, after nsenter has become the
        # job's unprivileged uid (nsenter's --wd would resolve the path before entering the mount namespace).
        env_fd = launcher.env_memfd({**env, "TERM": env.get("TERM", "xterm-256color")})
        argv = [
            nsenter,
            "-t",
            str(ns_pid),
            "--net",
            "--user",
            "--mount",
            "--uts",
            "--pid",
            "--",
            *launcher.envexec_argv(env_fd, workdir, "fallback", cmd),
        ]
        try:
            self._proc = subprocess.Popen(
                argv,
                stdin=slave,
                stdout=slave,
                stderr=slave,
                env=launcher.CLEAN_ENV,
                start_new_session=True,
                close_fds=True,
                pass_fds=(env_fd,),
                preexec_fn=lambda: fcntl.ioctl(0, termios.TIOCSCTTY, 0),  # noqa: PLW1509
            )
        finally:
            os.close(env_fd)
        os.close(slave)

    def write(self, data: bytes) -> None:
        if data:
            os.write(self._fd, data)

    def read(self, timeout: float = 0.1) -> bytes | None:
        """Bytes from the terminal, ``None`` if nothing arrived within ``timeout``, ``b""`` at EOF."""
        if self._fd < 0:
            return b""
        ready, _, _ = select.select([self._fd], [], [], timeout)
        if not ready:
            self._poll()
            return None
        try:
            data = os.read(self._fd, CHUNK)
        except OSError as exc:
            if exc.errno != errno.EIO:
                raise
            data = b""
        if not data:
            self._proc.wait(timeout=5)
            self._poll()
        return data

    @property
    def exit_code(self) -> int | None:
        """The process's exit code once it has exited (polled on access), else None."""
        self._poll()
        return self._exit_code

    def _poll(self) -> None:
        if self._exit_code is None:
            code = self._proc.poll()
            if code is not None:
                self._exit_code = code

    def resize(self, rows: int, cols: int) -> None:
        if self._fd >= 0:
            fcntl.ioctl(self._fd, termios.TIOCSWINSZ, struct.pack("HHHH", rows, cols, 0, 0))

    def close(self) -> None:
        if self._proc.poll() is None:
            try:
                os.killpg(self._proc.pid, signal.SIGHUP)
                self._proc.wait(timeout=3)
            except (ProcessLookupError, subprocess.TimeoutExpired):
                try:
                    os.killpg(self._proc.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
                self._proc.wait(timeout=3)
        self._poll()
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1
