"""DirRuntime: the demo console's runtime (``launcher.terminal_demo``), a small, real
:class:`~clusters.runtime.base.Runtime` that serves the Logs tab and WebTerminal without a cluster (the demo, its
browser tests, the bench, screenshots).

It is a genuine data plane, not a mock: each "Pod" has a directory with one log file per
container instance (``<root>/<namespace>/<pod>/log.<restart>``) and a working directory;
``exec`` starts the command (bash by default) on a real pseudo-terminal in that working
directory with the Pod's environment (``RLINF_NODE_RANK`` ...). Scheduling methods
(apply/scale/delete) are not supported and raise ``RuntimeFailure``.
"""

from __future__ import annotations

import contextlib
import dataclasses
import errno
import fcntl
import os
import select
import shutil
import signal
import struct
import subprocess
import termios
import threading
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

from clusters.models import Cluster
from clusters.runtime.base import ContainerState, NodeInfo, PodInfo, PodNotFound, Runtime, RuntimeFailure, TaskManifest
from clusters.runtime.containers import ContainerInfo
from jobs.models import Job, Pod, Task


class PtyExec:
    """An :class:`~clusters.runtime.base.ExecStream` over a real PTY."""

    def __init__(self, argv: list[str], cwd: str, env: dict[str, str], rows: int = 24, cols: int = 80) -> None:
        master, slave = os.openpty()
        fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", rows, cols, 0, 0))

        def _ctty() -> None:  # the shell gets the PTY as its controlling terminal (job control, SIGWINCH)
            fcntl.ioctl(0, termios.TIOCSCTTY, 0)

        self.proc = subprocess.Popen(
            argv,
            stdin=slave,
            stdout=slave,
            stderr=slave,
            cwd=cwd,
            env=env,
            start_new_session=True,
            preexec_fn=_ctty,  # noqa: PLW1509 - single call right after fork
            close_fds=True,
        )
        os.close(slave)
        self.fd = master
        self.exit_code: int | None = None
        self._closed = False
        self._lock = threading.Lock()

    @property
    def pid(self) -> int:
        return self.proc.pid

    def write(self, data: bytes) -> None:
        view = memoryview(data)
        while view:
            try:
                n = os.write(self.fd, view)
            except BlockingIOError:
                select.select([], [self.fd], [], 1.0)
                continue
            except OSError as exc:
                raise RuntimeFailure(f"terminal closed: {exc}", "internal") from exc
            view = view[n:]

    def read(self, timeout: float = 0.1) -> bytes | None:
        if self._closed:
            return b""
        try:
            ready, _, _ = select.select([self.fd], [], [], timeout)
        except (OSError, ValueError):
            return b""
        if not ready:
            self._poll()
            # the shell exited (a background child may still hold the PTY open): end of session
            return b"" if self.exit_code is not None else None
        try:
            data = os.read(self.fd, 65536)
        except OSError as exc:
            if exc.errno in (errno.EIO, errno.EBADF):
                data = b""
            else:
                raise
        if not data:
            self._wait_exit()
        return data

    def _poll(self) -> None:
        code = self.proc.poll()
        if code is not None:
            self.exit_code = code if code >= 0 else 128 - code

    def _wait_exit(self) -> None:
        try:
            code = self.proc.wait(timeout=2)
            self.exit_code = code if code >= 0 else 128 - code
        except subprocess.TimeoutExpired:
            pass

    def resize(self, rows: int, cols: int) -> None:
        if not self._closed:
            fcntl.ioctl(self.fd, termios.TIOCSWINSZ, struct.pack("HHHH", rows, cols, 0, 0))

    def session_pids(self) -> list[int]:
        """Every process still in the shell's session (the shell and whatever it started)."""
        pids = []
        for entry in os.listdir("/proc"):
            if not entry.isdigit():
                continue
            try:
                with open(f"/proc/{entry}/stat", "rb") as fh:
                    fields = fh.read().rsplit(b")", 1)[1].split()
            except OSError:
                continue
            if int(fields[3]) == self.proc.pid and fields[0] != b"Z":  # fields[3] = session id
                pids.append(int(entry))
        return pids

    def close(self) -> None:
        with self._lock:
            if self._closed:
                return
            self._closed = True
        for pid in self.session_pids():
            if pid != self.proc.pid:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
        if self.proc.poll() is None:
            for sig, wait in ((signal.SIGHUP, 1.0), (signal.SIGKILL, 5.0)):
                try:
                    os.killpg(self.proc.pid, sig)
                except ProcessLookupError:
                    break
                try:
                    self.proc.wait(timeout=wait)
                    break
                except subprocess.TimeoutExpired:
                    continue
        self._poll()
        try:
            os.close(self.fd)
        except OSError:
            pass


@dataclasses.dataclass
class DirPod:
    namespace: str
    name: str
    job: str
    task: str
    ordinal: int
    env: dict[str, str]
    uid: str
    phase: str = "Running"
    restart_count: int = 0
    created_at: datetime = dataclasses.field(default_factory=lambda: datetime.now(UTC))
    containers: dict[str, str] = dataclasses.field(default_factory=lambda: {"main": "main"})  # name -> kind


class DirRuntime(Runtime):
    """Pods as directories under ``root``; logs are files; exec is a PTY (see module doc)."""

    def __init__(self, root: Path | str) -> None:
        self.root = Path(root)
        self.root.mkdir(parents=True, exist_ok=True)
        self.pods: dict[tuple[str, str], DirPod] = {}
        self.execs: list[PtyExec] = []
        self._lock = threading.Lock()

    # --- test/demo controls -------------------------------------------------------------
    def pod_dir(self, namespace: str, pod: str) -> Path:
        return self.root / namespace / pod

    def workdir(self, namespace: str, pod: str) -> Path:
        return self.pod_dir(namespace, pod) / "work"

    def add_pod(
        self,
        namespace: str,
        name: str,
        job: str,
        task: str,
        ordinal: int,
        env: dict[str, str] | None = None,
        phase: str = "Running",
    ) -> DirPod:
        pod = DirPod(namespace, name, job, task, ordinal, dict(env or {}), uuid.uuid4().hex, phase)
        self.workdir(namespace, name).mkdir(parents=True, exist_ok=True)
        self.pods[(namespace, name)] = pod
        self._log_path(pod, 0).touch()
        return pod

    def _pod(self, namespace: str, name: str) -> DirPod:
        pod = self.pods.get((namespace, name))
        if pod is None:
            raise PodNotFound(f"pod {name} not found")
        return pod

    def _log_path(self, pod: DirPod, restart: int) -> Path:
        return self.pod_dir(pod.namespace, pod.name) / f"log.{restart}"

    def append_log(self, namespace: str, pod: str, data: str | bytes) -> None:
        """Append to the current container instance's log (what the Worker writes)."""
        p = self._pod(namespace, pod)
        with self._lock, open(self._log_path(p, p.restart_count), "ab") as fh:
            fh.write(data.encode() if isinstance(data, str) else data)

    def add_container(self, namespace: str, pod: str, name: str, kind: str = "sidecar") -> None:
        """Give ``pod`` another container: its own log file ``<name>.log`` and working directory."""
        p = self._pod(namespace, pod)
        p.containers[name] = kind
        (self.pod_dir(namespace, pod) / f"{name}.log").touch()
        (self.workdir(namespace, pod) / name).mkdir(parents=True, exist_ok=True)

    def append_container_log(self, namespace: str, pod: str, container: str, data: str) -> None:
        with self._lock, open(self.pod_dir(namespace, pod) / f"{container}.log", "ab") as fh:
            fh.write(data.encode())

    def restart_container(self, namespace: str, pod: str) -> None:
        """The ``main`` container restarts: a new, empty log; the old one becomes "previous"."""
        p = self._pod(namespace, pod)
        p.restart_count += 1
        self._log_path(p, p.restart_count).touch()

    def delete_pod(self, namespace: str, pod: str) -> None:
        self.pods.pop((namespace, pod), None)
        shutil.rmtree(self.pod_dir(namespace, pod), ignore_errors=True)

    # --- Runtime ---------------------------------------------------------------------------
    def ping(self) -> None:
        if not self.root.is_dir():
            raise RuntimeFailure("runtime directory is missing", "unreachable")

    def list_nodes(self) -> list[NodeInfo]:
        return [NodeInfo(name="dir-node", labels={"kubernetes.io/hostname": "dir-node"})]

    def apply_task(self, manifest: TaskManifest) -> None:
        raise RuntimeFailure("DirRuntime does not schedule tasks", "invalid")

    def scale_task(self, namespace: str, task: str, replicas: int) -> None:
        raise RuntimeFailure("DirRuntime does not schedule tasks", "invalid")

    def delete_task(self, namespace: str, task: str, delete_storage: bool = False) -> None:
        for key, pod in list(self.pods.items()):
            if key[0] == namespace and pod.task == task:
                self.delete_pod(*key)

    def restart_pods(self, namespace: str, task: str) -> None:
        for pod in self.pods.values():
            if pod.namespace == namespace and pod.task == task:
                self.restart_container(namespace, pod.name)

    def list_pods(self, namespace: str, job: str) -> list[PodInfo]:
        out = []
        for pod in list(self.pods.values()):
            if pod.namespace != namespace or pod.job != job:
                continue
            state = "running" if pod.phase == "Running" else "waiting"
            out.append(
                PodInfo(
                    name=pod.name,
                    task=pod.task,
                    ordinal=pod.ordinal,
                    uid=pod.uid,
                    phase=pod.phase,
                    node="dir-node",
                    ip="127.0.0.1",
                    container=ContainerState(
                        state=state, restart_count=pod.restart_count, ready=pod.phase == "Running"
                    ),
                    created_at=pod.created_at,
                    containers=tuple(ContainerInfo(n, k, state) for n, k in pod.containers.items()),
                )
            )
        return out

    def read_log(self, namespace: str, pod: str, tail_lines: int | None = 1000, previous: bool = False) -> str:
        data = b"".join(self.stream_log(namespace, pod, previous))
        text = data.decode("utf-8", "replace")
        if tail_lines is None:
            return text
        lines = text.splitlines(keepends=True)
        return "".join(lines[-tail_lines:]) if tail_lines else ""

    def stream_log(self, namespace: str, pod: str, previous: bool = False, container: str = "main") -> Iterator[bytes]:
        p = self._pod(namespace, pod)
        if container != "main":
            if container not in p.containers or previous:
                raise RuntimeFailure(f'container "{container}" of pod {pod} has no such log', "not_found")
            return self._iter_file(open(self.pod_dir(namespace, pod) / f"{container}.log", "rb"))  # noqa: SIM115
        if previous and p.restart_count < 1:
            raise RuntimeFailure(f"{pod} has no previous container instance", "not_found")
        path = self._log_path(p, p.restart_count - 1 if previous else p.restart_count)
        try:
            fh = open(path, "rb")  # noqa: SIM115 - closed by the generator
        except FileNotFoundError:
            raise PodNotFound(f"pod {pod} not found") from None
        return self._iter_file(fh)

    @staticmethod
    def _iter_file(fh) -> Iterator[bytes]:
        with fh:
            while chunk := fh.read(65536):
                yield chunk

    def exec(self, namespace: str, pod: str, command: list[str] | None = None, container: str = "main") -> PtyExec:
        p = self._pod(namespace, pod)
        if container not in p.containers:
            raise RuntimeFailure(f'container "{container}" not found in pod {pod}', "not_found")
        if p.phase != "Running":
            raise RuntimeFailure(f"pod {pod} is {p.phase}; cannot open a terminal", "invalid")
        if not command:
            shell = shutil.which("bash") or shutil.which("sh")
            if not shell:
                raise RuntimeFailure("no shell found (tried bash, sh)", "not_found")
            command = [shell, "--noprofile", "--norc", "-i"] if shell.endswith("bash") else [shell, "-i"]
        env = {
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "HOME": str(self.workdir(namespace, pod)),
            "LANG": "C.UTF-8",
            "TERM": "xterm-256color",
            "HOSTNAME": pod,
            "PS1": f"{pod}:\\w$ " if container == "main" else f"{pod}/{container}:\\w$ ",
            "RLARK_CONTAINER": container,
            **p.env,
        }
        cwd = self.workdir(namespace, pod) / ("" if container == "main" else container)
        stream = PtyExec(command, str(cwd), env)
        self.execs.append(stream)
        return stream

    def live_processes(self) -> list[int]:
        """PIDs of exec'd processes (and their session members) still running (leak checks)."""
        return [pid for s in self.execs for pid in s.session_pids()]


def seed_job(
    runtime: DirRuntime,
    owner,
    name: str = "demo",
    roles: tuple[tuple[str, str, int], ...] = (("actor", "Actor", 2), ("rollout", "Rollout", 1)),
    namespace: str = "rlark-jobs",
):
    """Create a Job with one Task per role (first is the Ray head) in the database, and its Pods
    in ``runtime`` (running, env ``RLINF_NODE_RANK``) and in the database. Returns the Job."""
    cluster, _ = Cluster.objects.get_or_create(name="dir", defaults={"runtime": "local", "status": "online"})
    job = Job.objects.create(name=name, owner=owner, spec={}, phase="Running")
    rank = 0
    for order, (template, label, replicas) in enumerate(roles):
        task = Task.objects.create(
            job=job,
            template_name=template,
            name=f"{name}-{template}",
            cluster=cluster,
            namespace=namespace,
            role=label,
            display_role=label,
            head=order == 0,
            order=order,
            replicas=replicas,
            rank_start=rank,
            phase="Running",
        )
        for ordinal in range(replicas):
            pod_name = f"{task.name}-{ordinal}"
            dir_pod = runtime.add_pod(
                namespace,
                pod_name,
                name,
                task.name,
                ordinal,
                env={"RLINF_NODE_RANK": str(rank + ordinal), "RLARK_TASK_ROLE": label},
            )
            Pod.objects.create(task=task, name=pod_name, ordinal=ordinal, uid=dir_pod.uid, phase="Running")
        rank += replicas
    return job
