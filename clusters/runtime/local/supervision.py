"""Process supervision of the local runtime: :class:`Supervisor` owns every local Worker process.

It runs inside the supervisor process (``clusters.runtime.local.supervisor``, which serves it over a unix
socket; ``python manage.py local_supervisor``, started by ``manage.py runconsole`` / ``make run``). It survives
web-server and Celery restarts; the web/Celery processes reach it through
:class:`clusters.runtime.local.LocalRuntime`. Nothing here knows the socket or the wire format.

State directory ``<root>`` (``settings.RLARK_LOCAL_ROOT``)::

    supervisor.sock, supervisor.lock, supervisor.pid
    state.json                        desired Tasks, Pods (PIDs, restart counts, ports), job GCS ports
    pods/<cluster>/<pod>/             main.log, main.previous.log, home/ work/ tmp/ (the Worker's
                                      /rlark/home, /rlark/work, /tmp), volumes/
    storage/<cluster>/<class>/<claim> PVC / object-storage mounts (kept when a job stops)

Semantics follow a StatefulSet with ``restartPolicy: Always`` (upstream-rlark 4.4, 4.8): Pods
``<task>-<ordinal>``; a container that exits is restarted in place with back-off (0 s, then
10 s, 20 s, ... capped at 300 s; ``restartCount`` +1; the old log kept as ``previous``); scaling
down kills the highest ordinals; a changed pod template re-creates the Pods. Stop = SIGTERM to the
Worker's own process group, ``RLARK_LOCAL_STOP_GRACE`` s (default 5), then SIGKILL of the group and
of its PID namespace (:func:`launcher.kill_group`); never by name.

Restart safety: PIDs and process start times are recorded in ``state.json``; a restarted supervisor
adopts Workers that are still alive (same PID and start time) and restarts the ones that vanished (a host
reboot) in place with reason ``RuntimeRestarted`` (the sync then bumps the job's attempt, see
``jobs.observe.runtime_restart``). runconsole leaves the supervisor running when it stops.

Unprivileged Workers (issue 16): as root, each job gets a slot of subordinate ids (:mod:`.idmap`,
``state["id_slots"]``); its Pod directories, volumes and claims belong to that uid, and the Worker runs
as it (:mod:`.launcher`).
On SIGTERM/SIGINT it stops every Worker (nothing is left running) unless ``RLARK_LOCAL_KEEP_PODS=1``;
the desired state stays, so the next supervisor re-creates the Pods.
"""

from __future__ import annotations

import contextlib
import copy
import fcntl
import hashlib
import json
import logging
import math
import os
import shutil
import socket
import subprocess
import threading
import time
import uuid
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import rlark_config
from clusters import host_paths
from clusters.runtime.local import domain_members, idmap, launcher, netns, ray_auth, scheduling

log = logging.getLogger("rlark.local_supervisor")

PORT_RANGE = (rlark_config.current().local_port_min, rlark_config.current().local_port_max)
PORT_BLOCK = 64
BACKOFF_BASE = rlark_config.current().local_backoff_base
BACKOFF_MAX = 300.0
BACKOFF_RESET = 600.0
TICK = 0.5
SCRIPTS_VOLUME = "rlark-scripts"
# A Worker found gone when the supervisor starts (a host reboot, or its process groups were killed): the
# container is restarted in place with this reason (``last_reason`` of the new instance, issue 16 point 4).
RUNTIME_RESTARTED = "RuntimeRestarted"
RUNTIME_RESTARTED_MESSAGE = "the local runtime restarted"
PORT_LOCK_DIR = rlark_config.current().local_port_locks


def now_iso() -> str:
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
    return Path(root) / "pods" / cluster / pod


def _key(cluster: str, name: str) -> str:
    return f"{cluster}/{name}"


def _template_hash(workload: dict[str, Any]) -> str:
    template = (workload.get("spec") or {}).get("template") or {}
    return hashlib.sha1(json.dumps(template, sort_keys=True).encode()).hexdigest()[:16]


def _port_free(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


class Supervisor:
    """Owns the local Workers. All public ``op_*`` methods run under ``self.lock``."""

    def __init__(self, root: Path, stop_grace: float | None = None) -> None:
        self.root = Path(root)
        self.root.mkdir(parents=True, exist_ok=True)
        self.stop_grace = float(stop_grace if stop_grace is not None else rlark_config.current().local_stop_grace)
        self.lock = threading.RLock()
        self.wake = threading.Event()
        self.stopping = threading.Event()
        self.procs: dict[str, subprocess.Popen] = {}  # pod key -> Popen (our children only)
        self.killing: set[str] = set()  # pod keys being terminated
        self.cpu_samples: dict[str, tuple[float, float]] = {}
        self.port_locks: dict[int, int] = {}  # port block base -> fd holding its lock file
        self.net_locks: dict[int, int] = {}  # network index -> fd holding its lock file (netns.lock_index)
        self.state: dict[str, Any] = {
            "clusters": {},
            "tasks": {},
            "pods": {},
            "jobs": {},
            "ports": [],
            "id_slots": {},
            "networks": {},  # cluster -> {"index": c, "pods": {pod: p}} (isolated clusters, netns.py)
            "domains": {},  # "<cluster>/<pod>" -> the Pod's domain membership (domain_members.py)
        }
        self._dirty = False
        # Root supervisor: Workers run as the job's subordinate ids (idmap); else as this user.
        self.ids: tuple[int, int] | None = None
        self.ids_error = ""
        if os.geteuid() == 0:
            try:
                self.ids = idmap.ensure_range()
            except idmap.IdMapUnavailable as exc:
                self.ids_error = str(exc)
                log.error("%s; no Worker will start", exc)
        # Every job in a network of its own (netns.py), unless RLARK_LOCAL_JOB_NETWORKS=0 or this supervisor cannot
        # make one (not root): then the local cluster is single-user (clusters.services.local_tenancy).
        self.job_networks = rlark_config.current().local_job_networks and netns.available()[0]
        extra = rlark_config.current().local_hide
        self.hidden = launcher.hidden_roots([self.root, *extra])
        self._load()

    # ---- persistence -------------------------------------------------------------------------
    @property
    def state_file(self) -> Path:
        return self.root / "state.json"

    def _load(self) -> None:
        try:
            self.state.update(json.loads(self.state_file.read_text()))
        except FileNotFoundError:
            return
        except (OSError, ValueError) as exc:
            log.warning("ignoring unreadable state file: %s", exc)
            return
        import psutil

        for base in list(self.state["ports"]):
            if not self._lock_block(base):  # another supervisor took it meanwhile: give it up
                self.state["ports"].remove(base)
        if netns.available()[0]:
            for key, net in (self.state.get("networks") or {}).items():
                fd = netns.lock_index(net["index"])
                if fd is None:
                    log.warning("network %s: index %s is held by another supervisor", key, net["index"])
                else:
                    self.net_locks[net["index"]] = fd
        for key, pod in list(self.state["pods"].items()):
            pid = pod.get("pid")
            if not pid:
                continue
            try:
                proc = psutil.Process(pid)
                alive = abs(proc.create_time() - pod.get("pid_create_time", 0)) < 0.05 and proc.status() != "zombie"
            except psutil.Error:
                alive = False
            if alive:
                log.info("adopting running worker %s (pid %s)", key, pid)
                pod["adopted"] = True
            else:
                log.info("worker %s (pid %s) vanished while the supervisor was down", key, pid)
                # Reap what may remain of its process group, then restart it in place. A PID that
                # now belongs to another process means the group is gone: signal nothing.
                if not psutil.pid_exists(pid):
                    launcher.kill_group(pid, grace=0.5)
                self._container_exited(key, None, RUNTIME_RESTARTED, RUNTIME_RESTARTED_MESSAGE)
        self._dirty = True

    def _save(self) -> None:
        if not self._dirty:
            return
        tmp = self.state_file.with_suffix(".tmp")
        tmp.write_text(json.dumps(self.state, indent=1, sort_keys=True))
        os.replace(tmp, self.state_file)
        self._dirty = False

    # ---- ports -------------------------------------------------------------------------------
    def _lock_block(self, base: int) -> bool:
        """Claim a port block across every supervisor on this host (other state roots, tests):
        an exclusive ``flock`` on ``/tmp/rlark-local-ports/<base>.lock``, held while allocated and
        released automatically if this process dies."""
        if base in self.port_locks:
            return True
        PORT_LOCK_DIR.mkdir(mode=0o777, parents=True, exist_ok=True)
        fd = os.open(PORT_LOCK_DIR / f"{base}.lock", os.O_RDWR | os.O_CREAT, 0o666)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            os.close(fd)
            return False
        self.port_locks[base] = fd
        return True

    def _alloc_block(self) -> int:
        taken = set(self.state["ports"])
        for base in range(PORT_RANGE[0], PORT_RANGE[1] - PORT_BLOCK, PORT_BLOCK):
            if base in taken or not self._lock_block(base):
                continue
            if all(_port_free(p) for p in (base, base + 1, base + 2, base + 3, base + 6, base + 7)):
                self.state["ports"].append(base)
                return base
            self._unlock_block(base)
        raise RuntimeError("no free port block for a local Ray node")

    def _unlock_block(self, base: int) -> None:
        fd = self.port_locks.pop(base, None)
        if fd is not None:
            os.close(fd)

    def _free_block(self, base: int | None) -> None:
        if base in self.state["ports"]:
            self.state["ports"].remove(base)
        if base is not None:
            self._unlock_block(base)

    @staticmethod
    def ray_start_args(base: int, head: bool, gpus: float, cpus: float = 0) -> list[str]:
        """Per-node ``ray start`` options so several Ray nodes share one host (see rlark_ray_local)."""
        args = [
            f"--node-manager-port={base}",
            f"--object-manager-port={base + 1}",
            f"--dashboard-agent-grpc-port={base + 2}",
            f"--dashboard-agent-listen-port={base + 3}",
            f"--metrics-export-port={base + 4}",
            f"--runtime-env-agent-port={base + 5}",
            f"--min-worker-port={base + 16}",
            f"--max-worker-port={base + PORT_BLOCK - 1}",
            f"--object-store-memory={rlark_config.current().local_object_store_bytes}",
        ]
        if head:
            args.append(f"--ray-client-server-port={base + 6}")
            if rlark_config.current().local_ray_dashboard:
                args += ["--include-dashboard=true", f"--dashboard-port={base + 7}"]
            else:
                args.append("--include-dashboard=false")
        if gpus:
            args.append(f"--num-gpus={int(gpus)}")
        # Ray pre-starts one idle worker per CPU; local nodes share the host, so they claim what the Pod
        # requested (default 1) instead of every host core.
        args.append(f"--num-cpus={max(1, math.ceil(cpus))}")
        return args

    # ---- ops ---------------------------------------------------------------------------------
    def op_ping(self) -> dict[str, Any]:
        """``pid``, ``root``, ``pods`` (count) and ``job_networks`` (each job gets a network of its own)."""
        return {
            "pid": os.getpid(),
            "root": str(self.root),
            "pods": len(self.state["pods"]),
            "job_networks": self.job_networks,
        }

    def op_set_nodes(self, cluster: str, nodes: list[dict[str, Any]]) -> None:
        if self.state["clusters"].get(cluster, {}).get("nodes") != nodes:
            self.state["clusters"].setdefault(cluster, {})["nodes"] = nodes
            self._dirty = True
            self.wake.set()

    def op_set_network(self, cluster: str, isolated: bool) -> None:
        """Issue 13 point 1: ``isolated`` gives the cluster's Workers a network namespace each (netns.py). Refused
        (ValueError, the API's ``invalid``) when this supervisor cannot build one. Turning it off removes the
        cluster's namespaces once it has no Workers left."""
        nets = self.state.setdefault("networks", {})
        if isolated and cluster not in nets:
            ok, why = netns.available()
            if not ok:
                raise ValueError(why)
            try:
                index = self._claim_net_index()
            except RuntimeError as exc:
                raise ValueError(str(exc)) from None
            nets[cluster] = {"index": index, "pods": {}}
            self._dirty = True
        elif not isolated and cluster in nets and not any(p["cluster"] == cluster for p in self.state["pods"].values()):
            self.op_delete_network(cluster)

    def op_delete_network(self, cluster: str) -> None:
        """Remove the cluster's isolated network (cluster deleted, test teardown)."""
        net = self.state.setdefault("networks", {}).pop(cluster, None)
        if net is not None:
            self._release_net_index(net.get("index"))
            self._dirty = True
        if netns.available()[0]:
            netns.delete_cluster(cluster)
            self._drop_guard_if_unused()

    def _drop_guard_if_unused(self) -> None:
        """Remove the host guard once no network of this supervisor is left (it protects nothing then)."""
        if not self.state.get("networks") and netns.available()[0]:
            netns.remove_guard()

    def op_set_domain_members(self, cluster: str, members: dict[str, Any]) -> dict[str, Any]:
        """The console's view of the cluster's domain members (``{pod: membership}``, domain_members.py); returns
        each member's connection state as its agent last wrote it. The host guard follows the relay ports named."""
        states = domain_members.set_members(self, cluster, members, pod_dir)
        if self.state.get("networks") and netns.available()[0]:
            netns.ensure_guard(self.published_ports())
        return states

    def op_domain_states(self, cluster: str) -> dict[str, Any]:
        """``{pod: agent state}`` of the cluster's domain members (``status.json`` of each agent)."""
        prefix = cluster + "/"
        return {
            key[len(prefix) :]: domain_members.status(pod_dir(self.root, cluster, key[len(prefix) :]))
            for key in self.state.get("domains", {})
            if key.startswith(prefix)
        }

    def op_apply_task(self, cluster: str, manifest: dict[str, Any]) -> None:
        manifest, token = ray_auth.take_token(manifest)  # the job's Ray token goes to a root-only file, not state.json
        ray_auth.store(self.root, manifest["job"], token)
        key = _key(cluster, manifest["task"])
        old = self.state["tasks"].get(key)
        task = {
            "cluster": cluster,
            **{k: manifest[k] for k in ("job", "task", "namespace", "ray_role", "rank_start", "total_nodes")},
            "head_task": manifest.get("head_task") or "",
            "replicas": int((manifest["workload"].get("spec") or {}).get("replicas", manifest["replicas"])),
            "workload": manifest["workload"],
            "extra_objects": list(manifest.get("extra_objects") or []),
            "template_hash": _template_hash(manifest["workload"]),
        }
        if old != task:
            self.state["tasks"][key] = task
            jkey = _key(cluster, task["job"])
            if jkey not in self.state["jobs"]:
                self.state["jobs"][jkey] = {"gcs_port": self._alloc_block()}
            self._dirty = True
            self.wake.set()

    def op_scale_task(self, cluster: str, task: str, replicas: int) -> None:
        t = self.state["tasks"].get(_key(cluster, task))
        if t is None:
            raise LookupError(f"task {task} not found")
        if t["replicas"] != int(replicas):
            t["replicas"] = int(replicas)
            t["workload"].setdefault("spec", {})["replicas"] = int(replicas)
            self._dirty = True
            self.wake.set()

    def op_delete_task(self, cluster: str, task: str, delete_storage: bool = False) -> None:
        t = self.state["tasks"].pop(_key(cluster, task), None)
        if t is None:
            return
        for pkey, pod in list(self.state["pods"].items()):
            if pod["cluster"] == cluster and pod["task"] == task:
                self._delete_pod(pkey)
        if delete_storage:
            for obj in t.get("extra_objects") or []:
                if obj.get("kind") == "PersistentVolumeClaim":
                    shutil.rmtree(self._claim_dir(cluster, obj), ignore_errors=True)
        jkey = _key(cluster, t["job"])
        if not any(x["cluster"] == cluster and x["job"] == t["job"] for x in self.state["tasks"].values()):
            job = self.state["jobs"].pop(jkey, None)
            if job:
                self._free_block(job.get("gcs_port"))
        if not any(x["job"] == t["job"] for x in self.state["tasks"].values()):
            ray_auth.forget(self.root, t["job"])
        if not any(x["cluster"] == cluster and x["job"] == t["job"] for x in self.state["tasks"].values()):
            shutil.rmtree(self.ray_logs_dir(cluster, t["job"]), ignore_errors=True)  # the job is deleted
        self._dirty = True
        self.wake.set()

    def op_restart_pods(self, cluster: str, task: str) -> None:
        for pkey, pod in list(self.state["pods"].items()):
            if pod["cluster"] == cluster and pod["task"] == task:
                self._delete_pod(pkey)
        self.wake.set()

    def op_list_pods(self, cluster: str, job: str | None = None) -> list[dict[str, Any]]:
        out = []
        for pkey, pod in self.state["pods"].items():
            if pod["cluster"] != cluster or (job is not None and pod["job"] != job):
                continue
            out.append(self._public_pod(pkey, pod))
        return sorted(out, key=lambda p: (p["task"], p["ordinal"]))

    def op_list_namespaces(self, cluster: str) -> list[str]:
        """The namespaces of the Tasks this supervisor holds for ``cluster`` (the local runtime has no other)."""
        return sorted({t["namespace"] for t in self.state["tasks"].values() if t["cluster"] == cluster})

    def op_list_nodes(self, cluster: str) -> dict[str, dict[str, float]]:
        return self._used(cluster)

    def op_job_ids(self, cluster: str, job: str) -> list[int] | None:
        """``[first host uid, count]`` of ``job``'s subordinate slot (what its Workers run as), None when this
        supervisor is not root. Raises RuntimeError when a root supervisor has no usable range."""
        ids = self._job_ids(cluster, job)
        return list(ids) if ids is not None else None

    def op_pod_info(self, cluster: str, pod: str) -> dict[str, Any]:
        p = self.state["pods"].get(_key(cluster, pod))
        if p is None:
            raise LookupError(f"pod {pod} not found")
        return {
            **self._public_pod(_key(cluster, pod), p),
            "dir": str(pod_dir(self.root, cluster, pod)),
            "ns_pid": self._ns_pid(p),
            # exec shells also get the rank the wrapper computed (upstream-rlark 4.2)
            "env": {**(p.get("env") or {}), "RLINF_NODE_RANK": str(self._rank(p))},
            "workdir": p.get("workdir") or "/",
        }

    def op_pod_metrics(self, cluster: str, job: str) -> dict[str, dict[str, float]]:
        import psutil

        out: dict[str, dict[str, float]] = {}
        samples: dict[str, tuple[float, float]] = {}
        members: dict[str, list[psutil.Process]] = {}
        for pkey, pod in self.state["pods"].items():
            if pod["cluster"] != cluster or pod["job"] != job or not pod.get("pid"):
                continue
            procs = []
            for pid in launcher.namespace_members(pod["pid"]):
                with contextlib.suppress(psutil.Error):
                    procs.append(psutil.Process(pid))
            members[pkey] = procs
        first = {k for k in members if k not in self.cpu_samples}
        if first:
            for k in first:
                self.cpu_samples[k] = (time.monotonic(), _cpu_seconds(members[k]))
            time.sleep(0.3)
        for pkey, procs in members.items():
            t0, c0 = self.cpu_samples.get(pkey, (time.monotonic(), 0.0))
            t1, c1 = time.monotonic(), _cpu_seconds(procs)
            samples[pkey] = (t1, c1)
            rss = 0
            for p in procs:
                with contextlib.suppress(psutil.Error):
                    rss += p.memory_info().rss
            out[self.state["pods"][pkey]["name"]] = {
                "cpu": max(0.0, (c1 - c0) / max(t1 - t0, 1e-3)),
                "memory": float(rss),
            }
        self.cpu_samples.update(samples)
        return out

    # ---- reconcile ---------------------------------------------------------------------------
    def reconcile(self) -> None:
        with self.lock:
            self._reap()
            self._sync_pods()
            self._schedule_and_start()
            self._save()

    def _reap(self) -> None:
        import psutil

        for pkey, pod in list(self.state["pods"].items()):
            if pkey in self.killing or not pod.get("pid"):
                continue
            proc = self.procs.get(pkey)
            code: int | None
            if proc is not None:
                code = proc.poll()
                if code is None:
                    continue
                if code < 0:
                    code = 128 - code
            else:  # adopted from a previous supervisor: no exit status available
                try:
                    if psutil.Process(pod["pid"]).status() != psutil.STATUS_ZOMBIE:
                        continue
                except psutil.Error:
                    pass
                code = None
            # reap leftovers of the PID namespace (the forked child may outlive unshare on SIGKILL)
            launcher.kill_group(pod["pid"], grace=0.5)
            self.procs.pop(pkey, None)
            self._container_exited(pkey, code, "Completed" if code == 0 else ("Error" if code else "Unknown"))

    def _container_exited(self, pkey: str, code: int | None, reason: str, message: str = "") -> None:
        pod = self.state["pods"][pkey]
        c = pod["container"]
        ran = time.time() - (pod.get("container_started_ts") or time.time())
        c.update(state="terminated", reason=reason, exit_code=code, finished_at=now_iso(), ready=False, message=message)
        self._free_block(pod.get("port_base"))
        pod.update(pid=None, pid_create_time=None, port_base=None, adopted=False)
        if ran >= BACKOFF_RESET:
            pod["backoff_n"] = 0
        n = pod.get("backoff_n", 0)
        delay = 0.0 if n == 0 else min(BACKOFF_BASE * 2 ** (n - 1), BACKOFF_MAX)
        pod["backoff_n"] = n + 1
        pod["restart_at"] = time.time() + delay
        self._dirty = True

    def _sync_pods(self) -> None:
        for t in self.state["tasks"].values():
            cluster = t["cluster"]
            for ordinal in range(t["replicas"]):
                name = f"{t['task']}-{ordinal}"
                pkey = _key(cluster, name)
                pod = self.state["pods"].get(pkey)
                if pod is not None and pod.get("template_hash") != t["template_hash"] and pkey not in self.killing:
                    self._delete_pod(pkey)
                    pod = None
                if pod is None and pkey not in self.killing:
                    self._new_pod(t, ordinal)
            for pkey, pod in list(self.state["pods"].items()):
                if pod["cluster"] == cluster and pod["task"] == t["task"] and pod["ordinal"] >= t["replicas"]:
                    self._delete_pod(pkey)
        # pods whose task vanished
        for pkey, pod in list(self.state["pods"].items()):
            if _key(pod["cluster"], pod["task"]) not in self.state["tasks"]:
                self._delete_pod(pkey)

    def _new_pod(self, t: dict[str, Any], ordinal: int) -> None:
        name = f"{t['task']}-{ordinal}"
        template = (t["workload"].get("spec") or {}).get("template") or {}
        labels = {
            **((template.get("metadata") or {}).get("labels") or {}),
            "statefulset.kubernetes.io/pod-name": name,
        }
        self.state["pods"][_key(t["cluster"], name)] = {
            "name": name,
            "cluster": t["cluster"],
            "namespace": t["namespace"],
            "task": t["task"],
            "job": t["job"],
            "ordinal": ordinal,
            "uid": str(uuid.uuid4()),
            "labels": labels,
            "template_hash": t["template_hash"],
            "phase": "Pending",
            "node": "",
            "reason": "",
            "message": "",
            "created_at": now_iso(),
            "started_at": None,
            "container": {"state": "waiting", "reason": "ContainerCreating", "restart_count": 0, "ready": False},
            "requests": scheduling.pod_requests(template.get("spec") or {}),
            "pid": None,
            "backoff_n": 0,
            "restart_at": 0,
        }
        shutil.rmtree(pod_dir(self.root, t["cluster"], name), ignore_errors=True)
        self._dirty = True

    def _delete_pod(self, pkey: str) -> None:
        pod = self.state["pods"].get(pkey)
        if pod is None or pkey in self.killing:
            return
        if not pod.get("pid"):
            self._forget_pod(pkey)
            return
        self.killing.add(pkey)
        pod["reason"] = "Terminating"
        proc = self.procs.get(pkey)
        threading.Thread(target=self._kill_then_forget, args=(pkey, pod["pid"], proc), daemon=True).start()

    def _kill_then_forget(self, pkey: str, pid: int, proc: subprocess.Popen | None) -> None:
        try:
            launcher.kill_group(pid, grace=self.stop_grace, wait_pid=proc)
        finally:
            with self.lock:
                self.killing.discard(pkey)
                self.procs.pop(pkey, None)
                self._forget_pod(pkey)
                self._save()
            self.wake.set()

    def _forget_pod(self, pkey: str) -> None:
        pod = self.state["pods"].pop(pkey, None)
        if pod is None:
            return
        self._free_block(pod.get("port_base"))
        self.cpu_samples.pop(pkey, None)
        domain_members.stop_agent(pod)
        key = pod.get("net") or pod["cluster"]
        net = self.state.setdefault("networks", {}).get(key)
        if net is not None:
            net.get("pods", {}).pop(pod["name"], None)
            netns.delete_pod_netns(netns.pod_netns(key, pod["name"]))
            if key != pod["cluster"] and not net.get("pods"):  # the job's last Worker: its network goes too
                self.state["networks"].pop(key, None)
                netns.delete_cluster(key)
                self._release_net_index(net.get("index"))
                self._drop_guard_if_unused()
        self._keep_ray_logs(pod, pod_dir(self.root, pod["cluster"], pod["name"]))
        shutil.rmtree(pod_dir(self.root, pod["cluster"], pod["name"]), ignore_errors=True)
        self._dirty = True

    @property
    def host_path_area(self) -> str:
        """``<root>/host-paths``: the one place inside the console's state a hostPath may name."""
        return host_paths.host_path_area(str(self.root))

    def ray_logs_dir(self, cluster: str, job: str) -> Path:
        """Where the Ray logs of ``job``'s failed Worker runs are kept until the job is deleted:
        ``<root>/ray-logs/<cluster>/<job>/<pod>/run-<n>/<session>/`` (root-only, like the rest of the root)."""
        return self.root / "ray-logs" / cluster / job

    def _keep_ray_logs(self, pod: dict[str, Any], pdir: Path) -> None:
        """Move the Ray session logs of a Worker run that ended with a non-zero exit code out of its private /tmp
        before it is wiped, so a failed start can still be diagnosed. Never raises."""
        c = pod.get("container") or {}
        failed = c.get("exit_code") not in (None, 0) or (
            c.get("state") == "waiting" and c.get("last_exit_code") not in (None, 0)
        )
        job_kept = any(x["cluster"] == pod["cluster"] and x["job"] == pod["job"] for x in self.state["tasks"].values())
        if not failed or not job_kept:  # a Worker stopped on purpose, or a deleted job: nothing to keep
            return
        sessions = sorted((pdir / "tmp" / "ray").glob("session_2*"))
        if not sessions:
            return
        dest = self.ray_logs_dir(pod["cluster"], pod["job"]) / pod["name"] / f"run-{pod.get('runs', 0)}"
        try:
            dest.mkdir(parents=True, exist_ok=True)
            for session in sessions:
                if (session / "logs").is_dir() and not (session / "logs").is_symlink():
                    shutil.move(str(session / "logs"), str(dest / session.name))
        except OSError:
            log.exception("could not keep the Ray logs of %s", pod["name"])

    def _used(self, cluster: str) -> dict[str, dict[str, float]]:
        used: dict[str, dict[str, float]] = {}
        for pod in self.state["pods"].values():
            if pod["cluster"] != cluster or not pod.get("node") or pod["phase"] in ("Succeeded", "Failed"):
                continue
            node_used = used.setdefault(pod["node"], {})
            for k, v in (pod.get("requests") or {}).items():
                node_used[k] = node_used.get(k, 0.0) + v
        return used

    def _schedule_and_start(self) -> None:
        now = time.time()
        for pkey, pod in sorted(self.state["pods"].items(), key=lambda kv: kv[1]["created_at"]):
            if pkey in self.killing or pod.get("pid"):
                continue
            t = self.state["tasks"].get(_key(pod["cluster"], pod["task"]))
            if t is None:
                continue
            spec = ((t["workload"].get("spec") or {}).get("template") or {}).get("spec") or {}
            if not pod["node"]:
                nodes = self.state["clusters"].get(pod["cluster"], {}).get("nodes") or []
                placed: dict[str, list[dict[str, str]]] = {}
                for other in self.state["pods"].values():
                    if other["cluster"] == pod["cluster"] and other.get("node"):
                        placed.setdefault(other["node"], []).append(other["labels"])
                placement = scheduling.place(spec, nodes, self._used(pod["cluster"]), placed)
                if not placement.node:
                    if pod["message"] != placement.message:
                        pod.update(reason="Unschedulable", message=placement.message)
                        self._dirty = True
                    continue
                pod.update(node=placement.node, reason="", message="")
                self._dirty = True
            if pod.get("restart_at", 0) > now:
                c = pod["container"]
                if c.get("state") == "terminated":
                    c.update(last_exit_code=c.get("exit_code"), last_reason=c.get("reason", ""), exit_code=None)
                    c.update(state="waiting", reason="CrashLoopBackOff")
                    pod["container"]["message"] = f"back-off restarting failed container main in pod {pod['name']}"
                    self._dirty = True
                continue
            if domain_members.is_member(t) and self._net_address(pod["cluster"], pod["job"], pod["name"]):
                try:
                    self._prepare_network(pod)
                    why = domain_members.hold(self, pkey, pod, pod_dir(self.root, pod["cluster"], pod["name"]))
                except Exception as exc:  # noqa: BLE001 - reported on the pod, retried next tick
                    why = str(exc)[:500]
                if why:
                    if pod["container"].get("message") != why:
                        pod["container"].update(state="waiting", reason="PodInitializing", message=why)
                        self._dirty = True
                    continue
            try:
                self._start(pkey, pod, t, spec)
            except Exception as exc:  # noqa: BLE001 - reported on the pod, retried with back-off
                log.exception("could not start %s", pkey)
                pod["container"].update(state="waiting", reason="CreateContainerError", message=str(exc)[:500])
                pod["restart_at"] = now + BACKOFF_BASE
                self._dirty = True

    # ---- starting a Worker -------------------------------------------------------------------
    def _check_source(self, source: Path, host_path: bool, name: str) -> Path:
        """The real path to bind for a volume. Raises ValueError (the Pod's CreateContainerError) when a
        volume the runtime manages leads out of its storage through a symlink, or a hostPath is inside,
        or contains, the console's own files (:attr:`hidden`)."""
        real = source.resolve()
        if host_path:  # the same rule as before creation (clusters.host_paths): the host-path area is allowed
            try:
                host_paths.check_protected(str(real), map(str, self.hidden), [self.host_path_area])
            except host_paths.HostPathRefused as exc:
                raise ValueError(f"volume {name}: hostPath {source} is refused ({exc.code})") from None
        elif self.root.resolve() not in real.parents:
            raise ValueError(f"volume {name}: {source} leads out of the local runtime's storage")
        return real

    def _host_path(self, host_path: dict[str, Any], name: str, ids: tuple[int, int] | None) -> Path:
        """The checked real path of a hostPath volume. Checked first (``clusters.host_paths.check_protected``:
        no system directory, nothing of the console's but the host-path area ``<root>/host-paths``), then, for
        ``DirectoryOrCreate``, a missing directory is made for the job's uid (``ids``), mode 0750, without
        following a symlink on the way (``launcher.make_dir_as``). Raises ValueError (the Pod's
        CreateContainerError): a refused path creates nothing."""
        path = str(host_path.get("path") or "")
        try:
            real = Path(
                host_paths.check_protected(path, map(str, self.hidden), [host_paths.host_path_area(str(self.root))])
            )
        except host_paths.HostPathRefused as exc:
            raise ValueError(f"volume {name}: hostPath {path} is refused ({exc.code})") from None
        if host_path.get("type") in (None, "", "DirectoryOrCreate") and not real.exists():
            launcher.make_dir_as(real, ids, 0o750)
        return real

    def _claim_dir(self, cluster: str, pvc: dict[str, Any]) -> Path:
        spec = pvc.get("spec") or {}
        meta = pvc.get("metadata") or {}
        klass = spec.get("storageClassName") or (meta.get("annotations") or {}).get("rlark.io/storage-class")
        return self.root / "storage" / cluster / (klass or "default") / meta.get("name", "claim")

    def _mounts(
        self,
        t: dict[str, Any],
        pod: dict[str, Any],
        spec: dict[str, Any],
        main: dict[str, Any],
        pdir: Path,
        ids: tuple[int, int] | None = None,
    ):
        """The Pod's volumes as launcher Mounts (+ its /dev/shm size). Directories made here belong to
        the job's Worker uid (``ids``): emptyDirs, ConfigMap/Secret files, claims and storage (their top
        level); a hostPath directory the runtime creates is 1777 (several jobs may share it, as
        ``/tmp/rlark-demo-output`` of the demo), an existing one is used as it is."""
        volumes = {v.get("name"): v for v in spec.get("volumes") or []}
        objects = {(o.get("kind"), (o.get("metadata") or {}).get("name")): o for o in t.get("extra_objects") or []}
        mounts: list[launcher.Mount] = []
        shm = None
        for vm in main.get("volumeMounts") or []:
            target = vm.get("mountPath") or ""
            vol = volumes.get(vm.get("name")) or {}
            if vm.get("name") == SCRIPTS_VOLUME or target == launcher.SCRIPTS_MOUNT or not target.startswith("/"):
                continue
            if target.rstrip("/") == "":
                raise ValueError("a volume cannot be mounted at /")
            read_only = bool(vm.get("readOnly"))
            kind = "bind"
            options = ""
            if "hostPath" in vol:
                source = self._host_path(vol["hostPath"], vm.get("name", ""), ids)
            elif "persistentVolumeClaim" in vol:
                claim = vol["persistentVolumeClaim"].get("claimName")
                pvc = objects.get(("PersistentVolumeClaim", claim)) or {"metadata": {"name": claim}}
                source = self._claim_dir(pod["cluster"], pvc)
                source.mkdir(parents=True, exist_ok=True)
                self._own(source, ids)
            elif "emptyDir" in vol:
                ed = vol["emptyDir"] or {}
                if ed.get("medium") == "Memory":
                    kind = "tmpfs"
                    size = ed.get("sizeLimit")
                    options = f"size={int(scheduling.parse_quantity(size))}" if size else "size=50%"
                    if target.rstrip("/") == "/dev/shm":
                        shm = str(size or "")
                    source = Path("tmpfs")
                else:
                    source = pdir / "volumes" / vm["name"]
                    source.mkdir(parents=True, exist_ok=True)
                    self._own(source, ids)
            elif "configMap" in vol or "secret" in vol:
                is_cm = "configMap" in vol
                ref = vol["configMap"].get("name") if is_cm else vol["secret"].get("secretName")
                obj = objects.get(("ConfigMap" if is_cm else "Secret", ref)) or {}
                source = pdir / "volumes" / vm["name"]
                source.mkdir(parents=True, exist_ok=True)
                self._own(source, ids, 0o755)
                import base64

                files = dict(obj.get("data") or {}) if is_cm else {}
                if not is_cm:
                    files = {
                        k: base64.b64decode(v).decode("utf-8", "replace") for k, v in (obj.get("data") or {}).items()
                    }
                    files.update(obj.get("stringData") or {})
                for fname, text in files.items():
                    fpath = source / fname
                    if fpath.is_symlink():  # left by the Worker: never write through it
                        fpath.unlink()
                    fpath.write_text(str(text))
                    self._own(fpath, ids, 0o644 if is_cm else 0o600)
            else:  # csi / object storage and anything else: a per-cluster storage directory
                driver = (vol.get("csi") or {}).get("driver") or "volumes"
                source = self.root / "storage" / pod["cluster"] / driver / (vm.get("name") or "volume")
                source.mkdir(parents=True, exist_ok=True)
                self._own(source, ids)
            if vm.get("subPath") and kind == "bind":
                try:  # below the volume, also through symlinks its Workers may have left there
                    source = Path(host_paths.sub_path_within(str(source), str(vm["subPath"])))
                except host_paths.HostPathRefused:
                    raise ValueError(f"volume {vm.get('name', '')}: subPath {vm['subPath']!r} is refused") from None
                self._check_source(source, "hostPath" in vol, vm.get("name", ""))
                if not source.exists():  # the job's, 0750, made without following a symlink on the way
                    launcher.make_dir_as(source, ids, 0o750)
            if kind == "bind":
                source = self._check_source(source, "hostPath" in vol, vm.get("name", ""))
            mounts.append(launcher.Mount(kind, str(source), target, read_only, options))
        # parents before children (as the kubelet does), so /a/b is not hidden by a later mount at /a
        mounts.sort(key=lambda m: len(Path(m.target).parts))
        return mounts, shm

    def _env(self, t: dict[str, Any], pod: dict[str, Any], main: dict[str, Any]) -> dict[str, str]:
        env = launcher.base_env(pod["name"])
        objects = {(o.get("kind"), (o.get("metadata") or {}).get("name")): o for o in t.get("extra_objects") or []}
        fields = {
            "metadata.name": pod["name"],
            "metadata.namespace": pod["namespace"],
            "metadata.uid": pod["uid"],
            "spec.nodeName": pod["node"],
            "status.podIP": "127.0.0.1",
            "status.hostIP": "127.0.0.1",
        }
        user_path = None
        for item in main.get("env") or []:
            name = item.get("name")
            if not name:
                continue
            if "value" in item:
                value = str(item.get("value") or "")
            elif (item.get("valueFrom") or {}).get("fieldRef"):
                value = fields.get(item["valueFrom"]["fieldRef"].get("fieldPath", ""), "")
            elif (item.get("valueFrom") or {}).get("configMapKeyRef"):
                ref = item["valueFrom"]["configMapKeyRef"]
                value = str(
                    ((objects.get(("ConfigMap", ref.get("name"))) or {}).get("data") or {}).get(ref.get("key"), "")
                )
            else:
                continue
            if name == "PATH":
                user_path = value
            if name == "PYTHONPATH":
                value = f"{launcher.LOCAL_HELPERS}:{value}" if value else launcher.LOCAL_HELPERS
            env[name] = value
        if user_path is not None:
            env["PATH"] = user_path
        env["POD_NAME"] = pod["name"]
        env.update(ray_auth.worker_env())  # the token's path, never the token
        address = self._net_address(pod["cluster"], pod["job"], pod["name"])
        if address:  # a network namespace of its own: upstream's fixed Ray port
            member = self.state.get("domains", {}).get(_key(pod["cluster"], pod["name"]))
            env["RLARK_LOCAL_NODE_IP"] = member["ip"] if member else address
            if t["ray_role"] == "head":
                env["RLARK_NODE_IP"] = address  # a domain head resolves $(hostname).rlark-domain (ray_head.sh)
            # a worker keeps the head Service's name; /etc/hosts resolves it when the head is in this cluster
        else:
            gcs = self.state["jobs"][_key(pod["cluster"], t["job"])]["gcs_port"]
            env["RLARK_RAY_PORT"] = str(gcs)
            if t["ray_role"] == "head":
                env["RLARK_NODE_IP"] = "127.0.0.1"
            else:
                env["RLARK_HEAD_ADDRESS"] = "127.0.0.1"
        env["RLARK_POD_PATH"] = env["PATH"]
        return env

    def _claim_net_index(self) -> int:
        """A network index (1..253) no network of this supervisor uses and no other supervisor on the host holds
        (``netns.lock_index``). Raises RuntimeError when none is left."""
        used = {n["index"] for n in self.state.setdefault("networks", {}).values()}
        for index in range(1, 254):
            if index in used or index in self.net_locks:
                continue
            fd = netns.lock_index(index)
            if fd is not None:
                self.net_locks[index] = fd
                return index
        raise RuntimeError("no free network left on this host (at most 253 networks at once)")

    def _release_net_index(self, index: int | None) -> None:
        fd = self.net_locks.pop(index, None) if index is not None else None
        if fd is not None:
            os.close(fd)

    def published_ports(self) -> list[int]:
        """The console's ports a Worker may open at ``netns.CONSOLE_ADDRESS``: the network-domain relay, as this
        supervisor's environment names it and as every domain membership the console sent names it."""
        ports = {rlark_config.current().domain_relay_port}
        for member in self.state.get("domains", {}).values():
            port = (member.get("relay") or {}).get("port")
            if port:
                ports.add(int(port))
        return sorted(ports)

    def _net_key(self, cluster: str, job: str) -> str | None:
        """The key of the network a Worker of ``job`` joins: its cluster's when the whole cluster is isolated, else
        the job's own (``netns.job_network_key``) when this supervisor makes job networks, else None (the host's
        network: an unprivileged supervisor, whose cluster is single-user)."""
        if cluster in self.state.setdefault("networks", {}):
            return cluster
        return netns.job_network_key(cluster, job) if self.job_networks else None

    def _net_address(self, cluster: str, job: str, pod: str, allocate: bool = True) -> str:
        """The Worker's address on its network's bridge (netns.py), "" when it has none (:meth:`_net_key`). Stable
        per Pod name (a restarted Worker keeps it); allocated on first use unless ``allocate`` is False, the job
        network with it. Raises RuntimeError when no network index or address is left."""
        key = self._net_key(cluster, job)
        if key is None:
            return ""
        nets = self.state["networks"]
        net = nets.get(key)
        if net is None:
            if not allocate:
                return ""
            net = nets[key] = {"index": self._claim_net_index(), "pods": {}, "job": job}
            self._dirty = True
        pods = net.setdefault("pods", {})
        if pod not in pods:
            if not allocate:
                return ""
            used = set(pods.values())
            free = [i for i in range(2, 255) if i not in used]
            if not free:
                raise RuntimeError(f"no free address left on network {key}")
            pods[pod] = free[0]
            self._dirty = True
        return netns.pod_address(net["index"], pods[pod])

    def _prepare_network(self, pod: dict[str, Any]) -> None:
        """The Worker's netns and its agent's files, before its ``main`` container (domain members). Records the
        network's key on the Pod (``pod["net"]``) and keeps the host guard in place."""
        key = self._net_key(pod["cluster"], pod["job"])
        net = self.state["networks"][key]
        netns.ensure_guard(self.published_ports())
        netns.ensure_cluster(key, net["index"])
        netns.ensure_pod(key, net["index"], pod["name"], net["pods"][pod["name"]])
        if pod.get("net") != key:
            pod["net"] = key
            self._dirty = True
        member = self.state.get("domains", {}).get(_key(pod["cluster"], pod["name"]))
        pdir = pod_dir(self.root, pod["cluster"], pod["name"])
        if member and not (domain_members.agent_dir(pdir) / "config.json").exists():
            pdir.mkdir(parents=True, exist_ok=True)
            pdir.chmod(0o700)
            domain_members.write_config(pdir, member)

    def _job_ids(self, cluster: str, job: str) -> tuple[int, int] | None:
        """``(host uid = gid of the job's root, count)``: one :mod:`.idmap` slot per job name, kept after the
        job is gone (a re-created job finds its storage again); ``None`` when not running as root. Raises
        RuntimeError when a root supervisor has no usable range (never start a Worker as host root)."""
        if os.geteuid() != 0:
            return None
        if self.ids is None:
            raise RuntimeError(self.ids_error or "no subordinate id range for Workers")
        start, count = self.ids
        slots: dict[str, int] = self.state.setdefault("id_slots", {})
        jkey = _key(cluster, job)
        if jkey not in slots:
            used = set(slots.values())
            free = [n for n in range(count // idmap.SLOT) if n not in used]
            if not free:  # every slot was handed out once: reuse the one of a job that no longer exists
                gone = [k for k in slots if k not in self.state["jobs"]]
                if not gone:
                    raise RuntimeError("every subordinate id slot is in use by a running job")
                free = [slots.pop(gone[0])]
            slots[jkey] = free[0]
            self._dirty = True
        return idmap.slot_ids(start, slots[jkey])

    @staticmethod
    def _own(path: Path, ids: tuple[int, int] | None, mode: int = 0o700) -> None:
        """Give ``path`` to the Worker's root (host uid ``ids[0]``) with ``mode``."""
        if ids is not None:
            os.chown(path, ids[0], ids[0], follow_symlinks=False)
        path.chmod(mode)

    def _start(self, pkey: str, pod: dict[str, Any], t: dict[str, Any], spec: dict[str, Any]) -> None:
        containers = spec.get("containers") or []
        main = next((c for c in containers if c.get("name") == "main"), containers[0] if containers else {})
        ids = self._job_ids(pod["cluster"], t["job"])
        pdir = pod_dir(self.root, pod["cluster"], pod["name"])
        home = pdir / "home"
        work = pdir / "work"
        for d in (home, work):
            d.mkdir(parents=True, exist_ok=True)
        pdir.chmod(0o700)
        profile = home / ".bash_profile"
        profile.unlink(missing_ok=True)  # never write through a symlink the Worker left
        profile.write_text(
            "# RLark local runtime: keep the Worker's PATH in login shells (/etc/profile resets it)\n"
            'if [ -n "$RLARK_POD_PATH" ]; then export PATH="$RLARK_POD_PATH"; fi\n'
            '[ -f "$HOME/.bashrc" ] && . "$HOME/.bashrc"\n'
        )
        for path in (home, work, profile):
            self._own(path, ids, 0o700 if path.is_dir() else 0o644)
        mounts, shm = self._mounts(t, pod, spec, main, pdir, ids)
        if ids is not None:  # the host's other world-writable places are not shared between jobs either
            taken = {m.target.rstrip("/") for m in mounts}
            for target in ("/dev/shm", "/var/tmp"):
                if target not in taken:
                    mounts.append(launcher.Mount("tmpfs", "tmpfs", target, options="size=50%,mode=1777"))
        mounts.append(ray_auth.worker_mount(self.root, t["job"], ids))
        env = self._env(t, pod, main)
        address = self._net_address(pod["cluster"], pod["job"], pod["name"])
        ns_path = None
        if address:
            self._prepare_network(pod)
            ns_path = netns.netns_path(netns.pod_netns(pod["net"], pod["name"]))
            member = self.state.get("domains", {}).get(pkey) or {}
            head_task = t.get("head_task") or ""
            head = self._net_address(pod["cluster"], pod["job"], f"{head_task}-0", allocate=False)
            # the headless Service's name, as cluster DNS would answer it (only for a head in this cluster)
            services = {f"{head_task}-ray-head": head} if head and head_task else {}
            pod["hosts_services"] = services
            domain_members.write_hosts(pdir / "hosts", pod["name"], address, member.get("hosts") or {}, services)
            mounts.append(launcher.Mount("bind", str(pdir / "hosts"), "/etc/hosts", read_only=True))
        base = self._alloc_block()
        gpus = sum(v for k, v in (pod.get("requests") or {}).items() if k.endswith("/gpu"))
        cpus = (pod.get("requests") or {}).get("cpu", 0)
        env["RLARK_LOCAL_RAY_START_ARGS"] = json.dumps(self.ray_start_args(base, t["ray_role"] == "head", gpus, cpus))
        command = [*(main.get("command") or ["bash", "-c", "sleep infinity"]), *(main.get("args") or [])]
        workdir = main.get("workingDir") or launcher.POD_WORK
        log_path = pdir / "main.log"
        restarting = pod.get("runs", 0) > 0
        if restarting and log_path.exists():
            os.replace(log_path, pdir / "main.previous.log")
        if restarting:  # a restarted container starts with a fresh /tmp (old Ray sessions gone), as on Kubernetes
            self._keep_ray_logs(pod, pdir)
            shutil.rmtree(pdir / "tmp", ignore_errors=True)
        proc = launcher.spawn(pdir, command, env, mounts, workdir, log_path, ids=ids, hidden=self.hidden, netns=ns_path)
        import psutil

        c = pod["container"]
        if restarting:
            if c.get("state") == "terminated":
                c["last_exit_code"] = c.get("exit_code")
                c["last_reason"] = c.get("reason", "")
                c["last_message"] = c.get("message", "")
            c["restart_count"] = c.get("restart_count", 0) + 1
        pod["runs"] = pod.get("runs", 0) + 1
        started = now_iso()
        c.update(
            state="running", reason="", message="", exit_code=None, ready=True, started_at=started, finished_at=None
        )
        pod.update(
            pid=proc.pid,
            pid_create_time=psutil.Process(proc.pid).create_time(),
            port_base=base,
            phase="Running",
            reason="",
            message="",
            started_at=pod.get("started_at") or started,
            container_started_ts=time.time(),
            env={k: v for k, v in env.items() if k != "RLARK_LOCAL_RAY_START_ARGS"},
            workdir=workdir,
            shm_size=shm,
            image=main.get("image", ""),
            ip=address or "127.0.0.1",
        )
        self.procs[pkey] = proc
        self._dirty = True

    def _rank(self, pod: dict[str, Any]) -> int:
        t = self.state["tasks"].get(_key(pod["cluster"], pod["task"])) or {}
        return int(t.get("rank_start") or 0) + int(pod["ordinal"])

    def _ns_pid(self, pod: dict[str, Any]) -> int | None:
        """PID (host view) of PID 1 of the Worker's namespaces (the forked child of unshare)."""
        import psutil

        if not pod.get("pid"):
            return None
        try:
            children = psutil.Process(pod["pid"]).children()
        except psutil.Error:
            return None
        if not children:
            return None
        if self.ids is not None:
            # podinit.sh enters the id-mapped user namespace by exec'ing `unshare --user` as this same PID: until it
            # has, `nsenter --user` into it fails ("reassociate to namespace 'ns/user' failed"), so it is not ready.
            try:
                if os.readlink(f"/proc/{children[0].pid}/ns/user") == os.readlink("/proc/self/ns/user"):
                    return None
            except OSError:
                return None
        return children[0].pid

    def _public_pod(self, pkey: str, pod: dict[str, Any]) -> dict[str, Any]:
        out = {
            k: copy.deepcopy(pod.get(k))
            for k in (
                "name",
                "task",
                "ordinal",
                "uid",
                "phase",
                "node",
                "reason",
                "message",
                "created_at",
                "started_at",
                "container",
                "labels",
                "shm_size",
                "image",
                "requests",
            )
        }
        out["ip"] = (pod.get("ip") or "127.0.0.1") if pod.get("pid") else ""
        out["pid"] = pod.get("pid")
        out["terminating"] = pkey in self.killing
        if pkey in self.killing:
            out["reason"] = "Terminating"
        return out

    # ---- lifecycle ---------------------------------------------------------------------------
    def run_loop(self) -> None:
        while not self.stopping.is_set():
            try:
                self.reconcile()
            except Exception:  # noqa: BLE001 - never let the loop die
                log.exception("reconcile failed")
            self.wake.wait(TICK)
            self.wake.clear()

    def shutdown(self, keep_pods: bool = False) -> None:
        """Stop the loop; unless ``keep_pods``, stop every Worker (in parallel) and forget the
        Pods (the desired Tasks stay in state.json and are re-created on the next start)."""
        self.stopping.set()
        if keep_pods:
            with self.lock:
                self._save()
            return
        with self.lock:
            pods = [(k, p["pid"], self.procs.get(k)) for k, p in self.state["pods"].items() if p.get("pid")]
        threads = [
            threading.Thread(target=launcher.kill_group, args=(pid, self.stop_grace, proc)) for _, pid, proc in pods
        ]
        for th in threads:
            th.start()
        for th in threads:
            th.join()
        with self.lock:
            for key in list(self.state["pods"]):
                self._forget_pod(key)
            keep = {j["gcs_port"] for j in self.state["jobs"].values()}
            for base in list(self.port_locks):
                if base not in keep:
                    self._unlock_block(base)
            self.state["ports"] = sorted(keep)
            self._dirty = True
            self._save()


def _cpu_seconds(procs) -> float:
    import psutil

    total = 0.0
    for p in procs:
        with contextlib.suppress(psutil.Error):
            t = p.cpu_times()
            total += t.user + t.system
    return total
