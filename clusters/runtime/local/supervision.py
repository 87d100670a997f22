"""Process supervision of the local runtime: :class:`Supervisor` owns every local Worker process.

It runs inside the supervisor process (``clusters.runtime.local.supervisor``, which serves it over a unix
socket; ``python manage.py local_supervisor``, started by ``manage.py runconsole`` / ``make run``). It survives
web-server and Celery restarts; the web/Celery processes reach it through
:class:`clusters.runtime.local.LocalRuntime`. Nothing here knows the socket or the wire format.

The desired state (Tasks) and the Pods live in ``<root>/state.json`` (:mod:`.statedir`). The supervisor keeps
them and reconciles them every :data:`TICK` s; the rest is done by its collaborators, one job each:

- :mod:`.pod_records`: the Pod records, as a StatefulSet with ``restartPolicy: Always`` keeps them (upstream-rlark
  4.4, 4.8): Pods ``<task>-<ordinal>``, restarts in place with back-off; scaling down kills the highest ordinals;
  a changed pod template re-creates the Pods;
- :mod:`.processes`: the Worker processes: exits, reaping, stopping (SIGTERM to the Worker's own process group,
  ``RLARK_LOCAL_STOP_GRACE`` s (default 5), then SIGKILL of the group and of its PID namespace; never by name);
- :mod:`.ports`: the Ray nodes' port blocks; :mod:`.networks`: the Workers' network namespaces;
  :mod:`.id_slots`: the host ids a job's Workers run as; :mod:`.volumes`: the Pod directory and volumes;
  :mod:`.worker_env`: the container's environment; :mod:`.ray_logs`: Ray logs of failed runs;
  :mod:`.pod_metrics`: CPU and memory; :mod:`.domain_members`: network-domain agents; :mod:`.scheduling`:
  placement on the cluster's virtual nodes.

Restart safety: PIDs and process start times are recorded in ``state.json``; a restarted supervisor
adopts Workers that are still alive (same PID and start time) and restarts the ones that vanished (a host
reboot) in place with reason ``RuntimeRestarted`` (the sync then bumps the job's attempt, see
``jobs.observe.runtime_restart``). runconsole leaves the supervisor running when it stops.

Unprivileged Workers: as root, each job gets a slot of subordinate ids (:mod:`.id_slots`); its Pod directories,
volumes and claims belong to that uid, and the Worker runs as it (:mod:`.launcher`).
On SIGTERM/SIGINT it stops every Worker (nothing is left running) unless ``RLARK_LOCAL_KEEP_PODS=1``;
the desired state stays, so the next supervisor re-creates the Pods.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import threading
import time
from pathlib import Path
from typing import Any

import rlark_config
from clusters.runtime.local import (
    domain_members,
    launcher,
    log_times,
    pod_records,
    processes,
    ray_auth,
    ray_logs,
    scheduling,
    tracking,
    volumes,
)
from clusters.runtime.local.id_slots import IdSlots
from clusters.runtime.local.networks import Networks
from clusters.runtime.local.pod_metrics import CpuSampler
from clusters.runtime.local.ports import PortBlocks, ray_start_args
from clusters.runtime.local.processes import Processes
from clusters.runtime.local.statedir import cluster_key, pod_dir
from clusters.runtime.local.worker_env import worker_env

log = logging.getLogger("rlark.local_supervisor")

TICK = 0.5


class Supervisor:
    """Owns the local Workers. All public ``op_*`` methods run under ``self.lock``."""

    def __init__(self, root: Path, stop_grace: float | None = None) -> None:
        self.root = Path(root)
        self.root.mkdir(parents=True, exist_ok=True)
        grace = float(stop_grace if stop_grace is not None else rlark_config.current().local_stop_grace)
        self.lock = threading.RLock()
        self.wake = threading.Event()
        self.stopping = threading.Event()
        self.state: dict[str, Any] = {
            "clusters": {},
            "tasks": {},
            "pods": {},
            "jobs": {},
            "ports": [],
            "id_slots": {},
            "networks": {},  # cluster -> {"index": c, "pods": {pod: p}} (isolated clusters, networks.py)
            "domains": {},  # "<cluster>/<pod>" -> the Pod's domain membership (domain_members.py)
        }
        self._dirty = False
        self.processes = Processes(grace)
        self.ports = PortBlocks(self.state)
        self.networks = Networks(self.root, self.state, self._changed)
        # Root supervisor: Workers run as the job's subordinate ids (idmap); else as this user.
        self.id_slots = IdSlots(self.state, self._changed)
        self.cpu = CpuSampler()
        self.log_times = log_times.LogTimes()  # when each log line was written (the Logs tab's timestamps)
        extra = list(rlark_config.current().local_hide)
        self.hidden = launcher.hidden_roots([self.root, *extra])
        self.volumes = volumes.Volumes(self.root, self.hidden)
        self._load()

    def _changed(self) -> None:
        """The state changed: written to ``state.json`` at the next :meth:`_save`."""
        self._dirty = True

    # ---- persistence -------------------------------------------------------------------------
    @property
    def state_file(self) -> Path:
        return self.root / "state.json"

    def _load(self) -> None:
        """Read ``state.json`` (a missing or unreadable one: start empty), lock its port blocks and networks again,
        adopt the Workers that still run and restart in place the ones that vanished."""
        try:
            self.state.update(json.loads(self.state_file.read_text()))
        except FileNotFoundError:
            return
        except (OSError, ValueError) as exc:
            log.warning("ignoring unreadable state file: %s", exc)
            return
        self.ports.relock()  # a block another supervisor took meanwhile is given up
        self.networks.relock()
        for key, pod in list(self.state["pods"].items()):
            pid = pod.get("pid")
            if not pid:
                continue
            if processes.still_running(pod):
                log.info("adopting running worker %s (pid %s)", key, pid)
                pod["adopted"] = True
            else:
                log.info("worker %s (pid %s) vanished while the supervisor was down", key, pid)
                # Reap what may remain of its process group, then restart it in place.
                processes.reap_vanished(pid)
                self._container_exited(key, None, pod_records.RUNTIME_RESTARTED, pod_records.RUNTIME_RESTARTED_MESSAGE)
        self._dirty = True

    def _save(self) -> None:
        if not self._dirty:
            return
        tmp = self.state_file.with_suffix(".tmp")
        tmp.write_text(json.dumps(self.state, indent=1, sort_keys=True))
        os.replace(tmp, self.state_file)
        self._dirty = False

    # ---- ops: clusters and networks ----------------------------------------------------------
    def op_ping(self) -> dict[str, Any]:
        """``pid``, ``root``, ``pods`` (count) and ``job_networks`` (each job gets a network of its own)."""
        return {
            "pid": os.getpid(),
            "root": str(self.root),
            "pods": len(self.state["pods"]),
            "job_networks": self.networks.job_networks,
        }

    def op_set_nodes(self, cluster: str, nodes: list[dict[str, Any]]) -> None:
        if self.state["clusters"].get(cluster, {}).get("nodes") != nodes:
            self.state["clusters"].setdefault(cluster, {})["nodes"] = nodes
            self._dirty = True
            self.wake.set()

    def op_set_network(self, cluster: str, isolated: bool) -> None:
        """``isolated`` gives the cluster's Workers a network namespace each (netns.py). Refused (ValueError, the
        API's ``invalid``) when this supervisor cannot build one. Turning it off removes the cluster's namespaces
        once it has no Workers left."""
        self.networks.set_isolated(cluster, isolated)

    def op_delete_network(self, cluster: str) -> None:
        """Remove the cluster's isolated network (cluster deleted, test teardown)."""
        self.networks.delete(cluster)

    def op_set_domain_members(self, cluster: str, members: dict[str, Any]) -> dict[str, Any]:
        """The console's view of the cluster's domain members (``{pod: membership}``, domain_members.py); returns
        each member's connection state as its agent last wrote it. The host guard follows the relay ports named."""
        states = domain_members.set_members(self, cluster, members, pod_dir)
        self.networks.refresh_guard()
        return states

    def op_domain_states(self, cluster: str) -> dict[str, Any]:
        """``{pod: agent state}`` of the cluster's domain members (``status.json`` of each agent)."""
        prefix = cluster + "/"
        return {
            key[len(prefix) :]: domain_members.status(pod_dir(self.root, cluster, key[len(prefix) :]))
            for key in self.state.get("domains", {})
            if key.startswith(prefix)
        }

    # ---- ops: tasks --------------------------------------------------------------------------
    def op_apply_task(self, cluster: str, manifest: dict[str, Any]) -> None:
        manifest, token = ray_auth.take_token(manifest)  # the job's Ray token goes to a root-only file, not state.json
        ray_auth.store(self.root, manifest["job"], token)
        manifest, values = tracking.take(manifest)  # W&B / SwanLab keys: a root-only file too (.tracking)
        tracking.store(self.root, manifest["job"], values)
        key = cluster_key(cluster, manifest["task"])
        old = self.state["tasks"].get(key)
        task = {
            "cluster": cluster,
            **{k: manifest[k] for k in ("job", "task", "namespace", "ray_role", "rank_start", "total_nodes")},
            "head_task": manifest.get("head_task") or "",
            "replicas": int((manifest["workload"].get("spec") or {}).get("replicas", manifest["replicas"])),
            "workload": manifest["workload"],
            "extra_objects": list(manifest.get("extra_objects") or []),
            "template_hash": pod_records.template_hash(manifest["workload"]),
        }
        if old != task:
            self.state["tasks"][key] = task
            jkey = cluster_key(cluster, task["job"])
            if jkey not in self.state["jobs"]:
                self.state["jobs"][jkey] = {"gcs_port": self.ports.allocate()}
            self._dirty = True
            self.wake.set()

    def op_scale_task(self, cluster: str, task: str, replicas: int) -> None:
        t = self.state["tasks"].get(cluster_key(cluster, task))
        if t is None:
            raise LookupError(f"task {task} not found")
        if t["replicas"] != int(replicas):
            t["replicas"] = int(replicas)
            t["workload"].setdefault("spec", {})["replicas"] = int(replicas)
            self._dirty = True
            self.wake.set()

    def op_delete_task(self, cluster: str, task: str, delete_storage: bool = False) -> None:
        """Forget the Task and stop its Pods; ``delete_storage`` removes its claims' directories too. The job's
        last Task gives back its GCS port block, its Ray token and its kept Ray logs."""
        t = self.state["tasks"].pop(cluster_key(cluster, task), None)
        if t is None:
            return
        for pkey, pod in list(self.state["pods"].items()):
            if pod["cluster"] == cluster and pod["task"] == task:
                self._delete_pod(pkey)
        if delete_storage:
            for obj in t.get("extra_objects") or []:
                if obj.get("kind") == "PersistentVolumeClaim":
                    shutil.rmtree(self.volumes.claim_dir(cluster, obj), ignore_errors=True)
        jkey = cluster_key(cluster, t["job"])
        if not any(x["cluster"] == cluster and x["job"] == t["job"] for x in self.state["tasks"].values()):
            job = self.state["jobs"].pop(jkey, None)
            if job:
                self.ports.free(job.get("gcs_port"))
        if not any(x["job"] == t["job"] for x in self.state["tasks"].values()):
            ray_auth.forget(self.root, t["job"])
            tracking.forget(self.root, t["job"])
        if not any(x["cluster"] == cluster and x["job"] == t["job"] for x in self.state["tasks"].values()):
            shutil.rmtree(ray_logs.ray_logs_dir(self.root, cluster, t["job"]), ignore_errors=True)  # job deleted
        self._dirty = True
        self.wake.set()

    def op_restart_pods(self, cluster: str, task: str) -> None:
        for pkey, pod in list(self.state["pods"].items()):
            if pod["cluster"] == cluster and pod["task"] == task:
                self._delete_pod(pkey)
        self.wake.set()

    # ---- ops: reads --------------------------------------------------------------------------
    def op_list_pods(self, cluster: str, job: str | None = None) -> list[dict[str, Any]]:
        out = []
        for pkey, pod in self.state["pods"].items():
            if pod["cluster"] != cluster or (job is not None and pod["job"] != job):
                continue
            out.append(pod_records.public_pod(pod, pkey in self.processes.killing))
        return sorted(out, key=lambda p: (p["task"], p["ordinal"]))

    def op_list_namespaces(self, cluster: str) -> list[str]:
        """The namespaces of the Tasks this supervisor holds for ``cluster`` (the local runtime has no other)."""
        return sorted({t["namespace"] for t in self.state["tasks"].values() if t["cluster"] == cluster})

    def op_list_nodes(self, cluster: str) -> dict[str, dict[str, float]]:
        return self._used(cluster)

    def op_job_ids(self, cluster: str, job: str) -> list[int] | None:
        """``[first host uid, count]`` of ``job``'s subordinate slot (what its Workers run as), None when this
        supervisor is not root. Raises RuntimeError when a root supervisor has no usable range."""
        ids = self.id_slots.job_ids(cluster, job)
        return list(ids) if ids is not None else None

    def op_pod_info(self, cluster: str, pod: str) -> dict[str, Any]:
        pkey = cluster_key(cluster, pod)
        p = self.state["pods"].get(pkey)
        if p is None:
            raise LookupError(f"pod {pod} not found")
        task = self.state["tasks"].get(cluster_key(p["cluster"], p["task"]))
        return {
            **pod_records.public_pod(p, pkey in self.processes.killing),
            "dir": str(pod_dir(self.root, cluster, pod)),
            "ns_pid": processes.ns_pid(p.get("pid"), self.id_slots.range is not None),
            # exec shells also get the rank the wrapper computed (upstream-rlark 4.2)
            "env": {**(p.get("env") or {}), "RLINF_NODE_RANK": str(pod_records.rank(p, task))},
            "workdir": p.get("workdir") or "/",
        }

    def op_pod_metrics(self, cluster: str, job: str) -> dict[str, dict[str, float]]:
        """``{pod name: {"cpu": cores, "memory": bytes}}`` of the job's running Workers (:mod:`.pod_metrics`)."""
        running = {
            pkey: (pod["name"], pod["pid"])
            for pkey, pod in self.state["pods"].items()
            if pod["cluster"] == cluster and pod["job"] == job and pod.get("pid")
        }
        return self.cpu.measure(running)

    # ---- reconcile ---------------------------------------------------------------------------
    def reconcile(self) -> None:
        with self.lock:
            self._reap()
            self._sync_pods()
            self._schedule_and_start()
            self.log_times.note([pod_dir(self.root, p["cluster"], p["name"]) for p in self.state["pods"].values()])
            self._save()

    def _reap(self) -> None:
        for pkey, pod in list(self.state["pods"].items()):
            if pkey in self.processes.killing or not pod.get("pid"):
                continue
            exited, code = self.processes.exited(pkey, pod["pid"])
            if not exited:
                continue
            self.processes.reap(pkey, pod["pid"])
            self._container_exited(pkey, code, processes.exit_reason(code))

    def _container_exited(self, pkey: str, code: int | None, reason: str, message: str = "") -> None:
        self.ports.free(pod_records.container_exited(self.state["pods"][pkey], code, reason, message))
        self._dirty = True

    def _sync_pods(self) -> None:
        """Pods to the Tasks' replicas: missing ordinals made, changed templates re-created, extra ordinals and
        Pods of vanished Tasks deleted."""
        killing = self.processes.killing
        for t in self.state["tasks"].values():
            cluster = t["cluster"]
            for ordinal in range(t["replicas"]):
                pkey = cluster_key(cluster, f"{t['task']}-{ordinal}")
                pod = self.state["pods"].get(pkey)
                if pod is not None and pod.get("template_hash") != t["template_hash"] and pkey not in killing:
                    self._delete_pod(pkey)
                    pod = None
                if pod is None and pkey not in killing:
                    self._new_pod(t, ordinal)
            for pkey, pod in list(self.state["pods"].items()):
                if pod["cluster"] == cluster and pod["task"] == t["task"] and pod["ordinal"] >= t["replicas"]:
                    self._delete_pod(pkey)
        # pods whose task vanished
        for pkey, pod in list(self.state["pods"].items()):
            if cluster_key(pod["cluster"], pod["task"]) not in self.state["tasks"]:
                self._delete_pod(pkey)

    def _new_pod(self, t: dict[str, Any], ordinal: int) -> None:
        pod = pod_records.new_pod(t, ordinal)
        self.state["pods"][cluster_key(t["cluster"], pod["name"])] = pod
        shutil.rmtree(pod_dir(self.root, t["cluster"], pod["name"]), ignore_errors=True)
        self._dirty = True

    def _delete_pod(self, pkey: str) -> None:
        """Stop the Pod's Worker in the background, then forget the Pod (at once when it has none)."""
        pod = self.state["pods"].get(pkey)
        if pod is None or pkey in self.processes.killing:
            return
        if not pod.get("pid"):
            self._forget_pod(pkey)
            return
        pod["reason"] = "Terminating"
        self.processes.stop_in_background(pkey, pod["pid"], self._forget_stopped)

    def _forget_stopped(self, pkey: str) -> None:
        """The Worker of a deleted Pod stopped (in the stopping thread): forget the Pod."""
        with self.lock:
            self.processes.stopped(pkey)
            self._forget_pod(pkey)
            self._save()
        self.wake.set()

    def _forget_pod(self, pkey: str) -> None:
        """Drop the Pod: its port block, CPU sample, domain agent, network; its failed runs' Ray logs kept, its
        directory removed."""
        pod = self.state["pods"].pop(pkey, None)
        if pod is None:
            return
        self.ports.free(pod.get("port_base"))
        self.cpu.forget(pkey)
        domain_members.stop_agent(pod)
        self.networks.forget_pod(pod)
        pdir = pod_dir(self.root, pod["cluster"], pod["name"])
        ray_logs.keep(self.root, self.state["tasks"].values(), pod, pdir)
        shutil.rmtree(pdir, ignore_errors=True)
        self._dirty = True

    def _used(self, cluster: str) -> dict[str, dict[str, float]]:
        """``{node: {resource: requested}}`` of the cluster's placed, unfinished Pods."""
        used: dict[str, dict[str, float]] = {}
        for pod in self.state["pods"].values():
            if pod["cluster"] != cluster or not pod.get("node") or pod["phase"] in ("Succeeded", "Failed"):
                continue
            node_used = used.setdefault(pod["node"], {})
            for k, v in (pod.get("requests") or {}).items():
                node_used[k] = node_used.get(k, 0.0) + v
        return used

    def _schedule_and_start(self) -> None:
        """Oldest first: place each Pod without a Worker, then start it unless its back-off or its network
        domain holds it. A failed start is reported on the Pod (``CreateContainerError``) and retried after
        ``BACKOFF_BASE`` s."""
        now = time.time()
        for pkey, pod in sorted(self.state["pods"].items(), key=lambda kv: kv[1]["created_at"]):
            if pkey in self.processes.killing or pod.get("pid"):
                continue
            t = self.state["tasks"].get(cluster_key(pod["cluster"], pod["task"]))
            if t is None:
                continue
            spec = ((t["workload"].get("spec") or {}).get("template") or {}).get("spec") or {}
            if not pod["node"] and not self._place(pod, spec):
                continue
            if pod.get("restart_at", 0) > now:
                if pod_records.back_off(pod):
                    self._dirty = True
                continue
            if self._held_for_domain(pkey, pod, t):
                continue
            try:
                self._start(pkey, pod, t, spec)
            except Exception as exc:  # noqa: BLE001 - reported on the pod, retried with back-off
                log.exception("could not start %s", pkey)
                pod["container"].update(state="waiting", reason="CreateContainerError", message=str(exc)[:500])
                pod["restart_at"] = now + pod_records.BACKOFF_BASE
                self._dirty = True

    def _place(self, pod: dict[str, Any], spec: dict[str, Any]) -> bool:
        """Put the Pod on a node of its cluster (:func:`scheduling.place`); False (reason ``Unschedulable``) when
        none fits."""
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
            return False
        pod.update(node=placement.node, reason="", message="")
        self._dirty = True
        return True

    def _held_for_domain(self, pkey: str, pod: dict[str, Any], t: dict[str, Any]) -> bool:
        """A network-domain member waits (``PodInitializing``, the reason as message) until its agent has brought
        its domain address up (:func:`domain_members.hold`); True while it waits."""
        if not (domain_members.is_member(t) and self.networks.address(pod["cluster"], pod["job"], pod["name"])):
            return False
        try:
            self.networks.prepare(pod)
            why = domain_members.hold(self, pkey, pod, pod_dir(self.root, pod["cluster"], pod["name"]))
        except Exception as exc:  # noqa: BLE001 - reported on the pod, retried next tick
            why = str(exc)[:500]
        if not why:
            return False
        if pod["container"].get("message") != why:
            pod["container"].update(state="waiting", reason="PodInitializing", message=why)
            self._dirty = True
        return True

    # ---- starting a Worker -------------------------------------------------------------------
    def _start(self, pkey: str, pod: dict[str, Any], t: dict[str, Any], spec: dict[str, Any]) -> None:
        """Start the Pod's ``main`` container as a Worker process: its directory, volumes, network, environment
        and Ray ports, then :func:`launcher.spawn`. Raises on any failure (the caller reports it on the Pod)."""
        containers = spec.get("containers") or []
        main = next((c for c in containers if c.get("name") == "main"), containers[0] if containers else {})
        ids = self.id_slots.job_ids(pod["cluster"], t["job"])
        pdir = pod_dir(self.root, pod["cluster"], pod["name"])
        volumes.prepare_pod_dir(pdir, ids)
        mounts, shm = self.volumes.mounts(t, pod, spec, main, pdir, ids)
        volumes.private_tmpfs(mounts, ids)
        mounts.append(ray_auth.worker_mount(self.root, t["job"], ids))
        mounts += [m for m in [tracking.worker_mount(self.root, t["job"], ids)] if m is not None]
        address = self.networks.address(pod["cluster"], pod["job"], pod["name"])
        env = self._env(t, pod, main, address)
        ns_path = None
        if address:
            ns_path, hosts = self.networks.join(pod, t.get("head_task") or "", address, pdir)
            mounts.append(hosts)
        base = self.ports.allocate()
        gpus = sum(v for k, v in (pod.get("requests") or {}).items() if k.endswith("/gpu"))
        cpus = (pod.get("requests") or {}).get("cpu", 0)
        env["RLARK_LOCAL_RAY_START_ARGS"] = json.dumps(ray_start_args(base, t["ray_role"] == "head", gpus, cpus))
        command = [*(main.get("command") or ["bash", "-c", "sleep infinity"]), *(main.get("args") or [])]
        workdir = main.get("workingDir") or launcher.POD_WORK
        log_path = pdir / "main.log"
        self._fresh_run(pod, pdir)
        proc = launcher.spawn(pdir, command, env, mounts, workdir, log_path, ids=ids, hidden=self.hidden, netns=ns_path)
        pod_records.mark_running(
            pod,
            proc.pid,
            port_base=base,
            env={k: v for k, v in env.items() if k != "RLARK_LOCAL_RAY_START_ARGS"},
            workdir=workdir,
            shm_size=shm,
            image=main.get("image", ""),
            ip=address or "127.0.0.1",
        )
        self.processes.started(pkey, proc)
        self._dirty = True

    def _env(self, t: dict[str, Any], pod: dict[str, Any], main: dict[str, Any], address: str) -> dict[str, str]:
        """The container's environment (:func:`worker_env`): with the domain IP of a member in a network of its
        own, else with the job's GCS port on the host's network."""
        if address:
            member = self.state.get("domains", {}).get(cluster_key(pod["cluster"], pod["name"]))
            return worker_env(t, pod, main, address=address, domain_ip=member["ip"] if member else None)
        gcs = self.state["jobs"][cluster_key(pod["cluster"], t["job"])]["gcs_port"]
        return worker_env(t, pod, main, address="", gcs_port=gcs)

    def _fresh_run(self, pod: dict[str, Any], pdir: Path) -> None:
        """Before a restart: the last log becomes ``main.previous.log``, and the container starts with a fresh
        /tmp (old Ray sessions gone, their logs kept when the run failed), as on Kubernetes."""
        if pod.get("runs", 0) <= 0:
            return
        log_path = pdir / "main.log"
        if log_path.exists():
            os.replace(log_path, pdir / "main.previous.log")
            self.log_times.rotate(pdir)
        ray_logs.keep(self.root, self.state["tasks"].values(), pod, pdir)
        shutil.rmtree(pdir / "tmp", ignore_errors=True)

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
            workers = [(p["pid"], self.processes.procs.get(k)) for k, p in self.state["pods"].items() if p.get("pid")]
        self.processes.stop_all(workers)
        with self.lock:
            for key in list(self.state["pods"]):
                self._forget_pod(key)
            self.ports.keep_only({j["gcs_port"] for j in self.state["jobs"].values()})
            self._dirty = True
            self._save()
