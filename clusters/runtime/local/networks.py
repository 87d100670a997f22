"""The networks of one supervisor's Workers (the namespaces themselves are :mod:`.netns`).

A Worker joins the network of its cluster when the whole cluster is isolated (``Cluster.isolated_network``,
``op_set_network``); else the network of its job (``netns.job_network_key``) when this supervisor makes job
networks (root, and ``RLARK_LOCAL_JOB_NETWORKS`` is not ``0``); else the host's network (an unprivileged
supervisor, whose local clusters are single-user: :mod:`.tenancy`).

``state["networks"]``: network key -> ``{"index": c, "pods": {pod: p}}`` (+ ``"job"`` for a job network); ``c``
(1..253) is claimed across the host's supervisors (``netns.lock_index``), ``p`` (2..254) is the Worker's address
on the network's bridge, stable per Pod name. A job network is made with the job's first Worker and removed with
its last; the host guard (``netns.ensure_guard``) stays while any network of this supervisor is left.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import rlark_config
from clusters.runtime.local import domain_members, launcher, netns
from clusters.runtime.local.statedir import cluster_key, pod_dir

log = logging.getLogger("rlark.local_supervisor")


class Networks:
    """The isolated networks in ``state["networks"]``; ``changed()`` is called whenever the state changes."""

    def __init__(self, root: Path, state: dict[str, Any], changed: Callable[[], None]) -> None:
        self.root = root
        self.state = state
        self.changed = changed
        self.locks: dict[int, int] = {}  # network index -> fd holding its lock file (netns.lock_index)
        # Every job in a network of its own, unless RLARK_LOCAL_JOB_NETWORKS=0 or this supervisor cannot make one
        # (not root): then the local cluster is single-user (:mod:`.tenancy`).
        self.job_networks = rlark_config.current().local_job_networks and netns.available()[0]

    @property
    def nets(self) -> dict[str, Any]:
        """``state["networks"]`` (made when missing)."""
        return self.state.setdefault("networks", {})

    def relock(self) -> None:
        """After ``state.json`` was read: hold the index of every recorded network again (a warning for one that
        another supervisor holds)."""
        if not netns.available()[0]:
            return
        for key, net in (self.state.get("networks") or {}).items():
            fd = netns.lock_index(net["index"])
            if fd is None:
                log.warning("network %s: index %s is held by another supervisor", key, net["index"])
            else:
                self.locks[net["index"]] = fd

    def claim_index(self) -> int:
        """A network index (1..253) no network of this supervisor uses and no other supervisor on the host holds
        (``netns.lock_index``). Raises RuntimeError when none is left."""
        used = {n["index"] for n in self.nets.values()}
        for index in range(1, 254):
            if index in used or index in self.locks:
                continue
            fd = netns.lock_index(index)
            if fd is not None:
                self.locks[index] = fd
                return index
        raise RuntimeError("no free network left on this host (at most 253 networks at once)")

    def release_index(self, index: int | None) -> None:
        fd = self.locks.pop(index, None) if index is not None else None
        if fd is not None:
            os.close(fd)

    def set_isolated(self, cluster: str, isolated: bool) -> None:
        """``isolated`` gives the cluster's Workers a network namespace each (netns.py). Raises ValueError (the
        API's ``invalid``) when this supervisor cannot build one. Turning it off removes the cluster's namespaces
        once it has no Workers left."""
        nets = self.nets
        if isolated and cluster not in nets:
            ok, why = netns.available()
            if not ok:
                raise ValueError(why)
            try:
                index = self.claim_index()
            except RuntimeError as exc:
                raise ValueError(str(exc)) from None
            nets[cluster] = {"index": index, "pods": {}}
            self.changed()
        elif not isolated and cluster in nets and not any(p["cluster"] == cluster for p in self.state["pods"].values()):
            self.delete(cluster)

    def delete(self, cluster: str) -> None:
        """Remove the cluster's isolated network (cluster deleted, test teardown)."""
        net = self.nets.pop(cluster, None)
        if net is not None:
            self.release_index(net.get("index"))
            self.changed()
        if netns.available()[0]:
            netns.delete_cluster(cluster)
            self.drop_guard_if_unused()

    def drop_guard_if_unused(self) -> None:
        """Remove the host guard once no network of this supervisor is left (it protects nothing then)."""
        if not self.state.get("networks") and netns.available()[0]:
            netns.remove_guard()

    def refresh_guard(self) -> None:
        """Let the host guard follow :meth:`published_ports` while this supervisor has networks."""
        if self.state.get("networks") and netns.available()[0]:
            netns.ensure_guard(self.published_ports())

    def published_ports(self) -> list[int]:
        """The console's ports a Worker may open at ``netns.CONSOLE_ADDRESS``: the network-domain relay, as this
        supervisor's environment names it and as every domain membership the console sent names it."""
        ports = {rlark_config.current().domain_relay_port}
        for member in self.state.get("domains", {}).values():
            port = (member.get("relay") or {}).get("port")
            if port:
                ports.add(int(port))
        return sorted(ports)

    def key(self, cluster: str, job: str) -> str | None:
        """The key of the network a Worker of ``job`` joins: its cluster's when the whole cluster is isolated, else
        the job's own (``netns.job_network_key``) when this supervisor makes job networks, else None (the host's
        network: an unprivileged supervisor, whose cluster is single-user)."""
        if cluster in self.nets:
            return cluster
        return netns.job_network_key(cluster, job) if self.job_networks else None

    def address(self, cluster: str, job: str, pod: str, allocate: bool = True) -> str:
        """The Worker's address on its network's bridge (netns.py), "" when it has none (:meth:`key`). Stable
        per Pod name (a restarted Worker keeps it); allocated on first use unless ``allocate`` is False, the job
        network with it. Raises RuntimeError when no network index or address is left."""
        key = self.key(cluster, job)
        if key is None:
            return ""
        nets = self.state["networks"]
        net = nets.get(key)
        if net is None:
            if not allocate:
                return ""
            net = nets[key] = {"index": self.claim_index(), "pods": {}, "job": job}
            self.changed()
        pods = net.setdefault("pods", {})
        if pod not in pods:
            if not allocate:
                return ""
            used = set(pods.values())
            free = [i for i in range(2, 255) if i not in used]
            if not free:
                raise RuntimeError(f"no free address left on network {key}")
            pods[pod] = free[0]
            self.changed()
        return netns.pod_address(net["index"], pods[pod])

    def prepare(self, pod: dict[str, Any]) -> None:
        """The Worker's netns and its agent's files, before its ``main`` container (domain members). Records the
        network's key on the Pod (``pod["net"]``) and keeps the host guard in place."""
        key = self.key(pod["cluster"], pod["job"])
        net = self.state["networks"][key]
        netns.ensure_guard(self.published_ports())
        netns.ensure_cluster(key, net["index"])
        netns.ensure_pod(key, net["index"], pod["name"], net["pods"][pod["name"]])
        if pod.get("net") != key:
            pod["net"] = key
            self.changed()
        member = self.state.get("domains", {}).get(cluster_key(pod["cluster"], pod["name"]))
        pdir = pod_dir(self.root, pod["cluster"], pod["name"])
        if member and not (domain_members.agent_dir(pdir) / "config.json").exists():
            pdir.mkdir(parents=True, exist_ok=True)
            pdir.chmod(0o700)
            domain_members.write_config(pdir, member)

    def join(self, pod: dict[str, Any], head_task: str, address: str, pdir: Path) -> tuple[str, launcher.Mount]:
        """Before a Worker at ``address`` starts: its netns made (:meth:`prepare`), its ``/etc/hosts`` written
        (itself, the head Service's name as cluster DNS would answer it when the head ``<head_task>-0`` is in this
        cluster, its domain's members). Returns the netns path to join and the read-only ``/etc/hosts`` mount."""
        self.prepare(pod)
        ns_path = netns.netns_path(netns.pod_netns(pod["net"], pod["name"]))
        member = self.state.get("domains", {}).get(cluster_key(pod["cluster"], pod["name"])) or {}
        head = self.address(pod["cluster"], pod["job"], f"{head_task}-0", allocate=False)
        # the headless Service's name, as cluster DNS would answer it (only for a head in this cluster)
        services = {f"{head_task}-ray-head": head} if head and head_task else {}
        pod["hosts_services"] = services
        domain_members.write_hosts(pdir / "hosts", pod["name"], address, member.get("hosts") or {}, services)
        return ns_path, launcher.Mount("bind", str(pdir / "hosts"), "/etc/hosts", read_only=True)

    def forget_pod(self, pod: dict[str, Any]) -> None:
        """The Pod is gone: its netns goes, and with the job's last Worker its job network (and the host guard when
        no network is left)."""
        key = pod.get("net") or pod["cluster"]
        net = self.nets.get(key)
        if net is None:
            return
        net.get("pods", {}).pop(pod["name"], None)
        netns.delete_pod_netns(netns.pod_netns(key, pod["name"]))
        if key != pod["cluster"] and not net.get("pods"):  # the job's last Worker: its network goes too
            self.state["networks"].pop(key, None)
            netns.delete_cluster(key)
            self.release_index(net.get("index"))
            self.drop_guard_if_unused()
