"""Helpers shared by the local-runtime, wrapper-script and demo-workload tests (no tests here).

- :func:`manifest` builds a StatefulSet-shaped TaskManifest the way ``jobs.jobspec.manifests`` does
  (wrapper command, upstream 4.5 env), with knobs for commands, mounts, selectors and resources.
- :class:`SupervisorProcess` runs ``manage.py local_supervisor`` on a private state directory.
- :class:`LoopbackWatch` samples ``ss -tn`` in a thread and records every peer that is not loopback.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import threading
import time
import types
from pathlib import Path

from clusters.runtime.base import TaskManifest

ROOT = Path(__file__).resolve().parents[2]
LOOPBACK_PEERS = {"127.0.0.1", "[::1]", "::1", "[::ffff:127.0.0.1]"}


def wait_for(predicate, timeout: float, interval: float = 0.25, what: str = "condition"):
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        time.sleep(interval)


def free_port_block(size: int = 64, start: int = 33000) -> int:
    """A base port with ``size`` free ports above it (outside the supervisor's default range)."""
    base = start + (os.getpid() % 50) * size
    while base < 60000:
        ok = True
        for p in range(base, base + size):
            with socket.socket() as s:
                try:
                    s.bind(("127.0.0.1", p))
                except OSError:
                    ok = False
                    break
        if ok:
            return base
        base += size
    raise RuntimeError("no free port block")


def manifest(
    job: str,
    template: str,
    *,
    head: bool,
    replicas: int = 1,
    rank_start: int = 0,
    total: int = 1,
    env: list[dict] | None = None,
    run: str = "",
    prepare: str = "",
    selector: dict[str, str] | None = None,
    volumes: list[dict] = (),
    mounts: list[dict] = (),
    resources: dict | None = None,
    command: list[str] | None = None,
    extra_objects: tuple[dict, ...] = (),
    namespace: str = "rlark-system",
) -> TaskManifest:
    task = f"{job}-{template}"
    head_task = f"{job}-header"
    e = list(env or [])
    e.append({"name": "RLARK_RAY_PORT", "value": "6379"})
    if prepare:
        e.append({"name": "RLARK_PREPARE_SCRIPT", "value": prepare})
    if head and run:
        e.append({"name": "RLARK_RUN_SCRIPT", "value": run})
    e.append({"name": "RLARK_NODE_RANK_START", "value": str(rank_start)})
    e.append({"name": "POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}})
    if head:
        e.append({"name": "RLARK_TOTAL_NODES", "value": str(total)})
        e.append({"name": "RLARK_NODE_IP", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}})
    else:
        e.append({"name": "RLARK_HEAD_ADDRESS", "value": f"{head_task}-ray-head"})
    main = {
        "name": "main",
        "image": "rlinf/rlinf:demo",
        "command": command or ["bash", f"/rlark/scripts/{'ray_head.sh' if head else 'ray_worker.sh'}"],
        "env": e,
        "volumeMounts": [*mounts, {"name": "rlark-scripts", "mountPath": "/rlark/scripts", "readOnly": True}],
    }
    if resources:
        main["resources"] = resources
    labels = {"rlinf.io/job": job, "rlinf.io/task": task, "app": task}
    spec = {
        "containers": [main],
        "volumes": [*volumes, {"name": "rlark-scripts", "configMap": {"name": f"{task}-rlark-scripts"}}],
        "affinity": {
            "podAntiAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": [
                    {"labelSelector": {"matchLabels": {"rlinf.io/task": task}}, "topologyKey": "kubernetes.io/hostname"}
                ]
            }
        },
    }
    if selector:
        spec["affinity"]["nodeAffinity"] = {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [
                    {
                        "matchExpressions": [
                            {"key": k, "operator": "In", "values": v.split(",")} for k, v in selector.items()
                        ]
                    }
                ]
            }
        }
    workload = {
        "apiVersion": "apps/v1",
        "kind": "StatefulSet",
        "metadata": {"name": task, "namespace": namespace, "labels": labels},
        "spec": {
            "replicas": replicas,
            "podManagementPolicy": "Parallel",
            "selector": {"matchLabels": labels},
            "template": {"metadata": {"labels": labels}, "spec": spec},
        },
    }
    return TaskManifest(
        job=job,
        task=task,
        namespace=namespace,
        ray_role="head" if head else "worker",
        replicas=replicas,
        rank_start=rank_start,
        total_nodes=total,
        head_task=head_task,
        workload=workload,
        extra_objects=tuple(extra_objects),
    )


def nodes_spec(*nodes: tuple[str, dict, dict]) -> list[dict]:
    return [
        {"name": name, "labels": {**labels, "kubernetes.io/hostname": name}, "capacity": capacity}
        for name, labels, capacity in nodes
    ]


class SupervisorProcess:
    """``manage.py local_supervisor --root <root>`` as a subprocess (own process group)."""

    def __init__(self, root: Path, **env: str) -> None:
        self.root = Path(root)
        self.env = {
            **os.environ,
            "RLARK_LOCAL_BACKOFF_BASE": "1",
            "RLARK_LOCAL_STOP_GRACE": "5",
            # The host's loopback, as an unprivileged console runs Workers (the runtime tests were written for it);
            # the tests of job networks, and the whole console in tests/e2e, run the default (a network per job).
            "RLARK_LOCAL_JOB_NETWORKS": "0",
            **env,
        }
        self.proc: subprocess.Popen | None = None

    def start(self, wait: bool = True) -> SupervisorProcess:
        from clusters.runtime.local.supervisor import socket_path

        self.log = open(self.root.parent / f"{self.root.name}-supervisor.log", "ab")  # noqa: SIM115
        self.proc = subprocess.Popen(
            [sys.executable, str(ROOT / "manage.py"), "local_supervisor", "--root", str(self.root)],
            env=self.env,
            cwd=ROOT,
            stdout=self.log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        sock = socket_path(self.root)

        def ready():
            if self.proc.poll() is not None:
                raise AssertionError(f"supervisor exited with {self.proc.returncode}")
            if not sock.exists():
                return False
            with socket.socket(socket.AF_UNIX) as s:
                try:
                    s.connect(str(sock))
                    return True
                except OSError:
                    return False

        if wait:
            wait_for(ready, 30, what="supervisor socket")
        return self

    def runtime(self, nodes: list[dict], cluster: str = "c1"):
        from clusters.runtime.local import LocalRuntime

        return LocalRuntime(types.SimpleNamespace(name=cluster, namespace="rlark-system"), root=self.root, nodes=nodes)

    def stop(self, sig: int = signal.SIGTERM, timeout: float = 60) -> int | None:
        if self.proc is None or self.proc.poll() is not None:
            return None if self.proc is None else self.proc.returncode
        os.killpg(self.proc.pid, sig)
        try:
            return self.proc.wait(timeout=timeout)
        finally:
            self.log.close()


def pid_alive(pid: int) -> bool:
    import psutil

    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


class LoopbackWatch:
    """Samples ``ss -tnp`` every ``interval`` s while a test runs. ``bad`` collects every connection
    whose peer is not loopback and that belongs to a process of the test's Workers (``pids_fn()``)
    or to a Ray process (raylet, gcs_server, ``ray::...``); other test runs may share this host, so their
    unrelated sockets are ignored. ``checked`` counts the Worker/Ray connections seen on loopback."""

    RAY_NAMES = ("raylet", "gcs_server", "ray::", "default_worker", "dashboard", "log_monitor", "monitor.py")

    def __init__(self, pids_fn=None, interval: float = 0.3) -> None:
        self.pids_fn = pids_fn or (lambda: set())
        self.interval = interval
        self.bad: set[str] = set()
        self.samples = 0
        self.checked = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> LoopbackWatch:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join(timeout=10)

    def _ours(self, line: str, pids: set[int]) -> bool:
        import re

        if any(name in line for name in self.RAY_NAMES):
            return True
        return any(int(p) in pids for p in re.findall(r"pid=(\d+)", line))

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                pids = set(self.pids_fn())
            except Exception:  # noqa: BLE001 - a pod may vanish while sampling
                pids = set()
            out = subprocess.run(["ss", "-tnp"], capture_output=True, text=True, timeout=10).stdout
            self.samples += 1
            for line in out.splitlines()[1:]:
                parts = line.split()
                if len(parts) < 5 or not self._ours(line, pids):
                    continue
                peer = parts[4].rsplit(":", 1)[0]
                if peer in LOOPBACK_PEERS:
                    self.checked += 1
                else:
                    self.bad.add(line)
            self._stop.wait(self.interval)


def pod_pids(runtime, job: str) -> set[int]:
    """Every PID (host view) of the job's Workers: each Pod's process group and PID namespace."""
    from clusters.runtime.local import launcher

    pids: set[int] = set()
    for pod in runtime._call("list_pods", job=job) or []:
        if pod.get("pid"):
            pids.update(launcher.namespace_members(pod["pid"]))
    return pids


def markers_in_order(text: str, markers: list[str]) -> list[str]:
    """Assert helper: returns the markers not found in order (empty list = all found in order)."""
    pos = 0
    missing = []
    for m in markers:
        i = text.find(m, pos)
        if i < 0:
            missing.append(m)
        else:
            pos = i + len(m)
    return missing
