"""Isolated networks of local clusters: one network namespace per cluster and per Worker.

Only a root supervisor can build them (``ip netns``/veth/bridge need ``CAP_NET_ADMIN`` in the host's network
namespace); :func:`available` says whether it can. Layout, for a cluster with index ``c`` (0..253, kept in the
supervisor's ``state["networks"]``) and a Worker with index ``p`` (2..254)::

    host netns                 rlark-<cluster> (cluster netns)           rlark-<cluster>.<pod> (Worker netns)
    rlkh<hash> 100.127.255.1 ── up0 100.127.c.2            br0 100.64.c.1/24 ── eth0 100.64.c.p/24
       peer 100.127.c.2/32         peer 100.127.255.1/32   p<hash> (bridge port)   route 100.127.255.1 via 100.64.c.1

- Workers of one cluster reach each other on the cluster's bridge (``100.64.c.0/24``, the cluster's Pod CIDR).
- The console is reachable from every Worker of every isolated cluster at one address, :data:`CONSOLE_ADDRESS`
  (the host end of each cluster's veth carries it, as a ``/32``); the host routes ``100.64.c.0/24`` back over the
  same veth. Nothing else is routed: there is no default route in any namespace made here and no NAT, so a Worker
  reaches neither another cluster nor any real address of the machine (the host's listeners on 127.0.0.1 stay out of
  reach too: loopback is per namespace). ``100.64.0.0/10`` (RFC 6598) is outside the private ranges a network
  domain may use, so a domain CIDR never overlaps a cluster network.
- The Worker's root is an id-mapped user namespace created after joining the netns (``launcher``), so it holds no
  capability over it: it can change neither addresses nor routes.

A **job network** is the same layout for one job of a cluster that is not isolated as a whole: its key is
``<cluster>+<job>`` where a cluster's key is its name, so a job's Workers reach each other and the console's
address and nothing else; it is made with the job's first Worker and removed with its last (supervision.py).

The host guard (:func:`ensure_guard`): the host's ``INPUT`` and ``FORWARD`` chains send every packet from the
Workers' range ``100.64.0.0/10`` to the chain ``RLARK-WORKERS``, which accepts replies to connections the host
opened and new TCP connections to the console's published ports at :data:`CONSOLE_ADDRESS` only, and drops the
rest: a Worker reaches neither a service the host listens for on every address (sshd, a database) nor, through
the host, another network.

Names: every namespace made here starts with ``rlark-``; interface names are at most 15 characters. Deleting a
Worker netns removes its veth pair; deleting a cluster netns removes the bridge and the host veth with it.
Errors: :class:`NetworkError` with the failing ``ip`` command's message.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import shutil
import subprocess
from pathlib import Path

PREFIX = "rlark-"
CONSOLE_ADDRESS = "100.127.255.1"
NETNS_DIR = Path("/run/netns")
WORKER_RANGE = "100.64.0.0/10"
GUARD_CHAIN = "RLARK-WORKERS"


NET_LOCK_DIR = Path("/run/rlark-networks")


def lock_index(index: int) -> int | None:
    """Claim network index ``index`` (1..253) across every supervisor on this host: an exclusive ``flock`` on
    ``/run/rlark-networks/<index>.lock``, held while the network exists and released if the process dies. Returns
    the descriptor, or None when another supervisor holds it."""
    NET_LOCK_DIR.mkdir(mode=0o700, parents=True, exist_ok=True)
    fd = os.open(NET_LOCK_DIR / f"{int(index)}.lock", os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        os.close(fd)
        return None
    return fd


def job_network_key(cluster: str, job: str) -> str:
    """The network key of ``job``'s own network on ``cluster`` (see the module docstring)."""
    return f"{cluster}+{job}"


def _iptables(*args: str, check: bool = True) -> subprocess.CompletedProcess:
    proc = subprocess.run(["iptables", "-w", "5", *args], capture_output=True, text=True, timeout=30)
    if check and proc.returncode != 0:
        raise NetworkError(f"iptables {' '.join(args)}: {proc.stderr.strip() or proc.returncode}")
    return proc


def ensure_guard(ports: list[int]) -> None:
    """Install the host guard, or add ``ports`` to it: new TCP connections from Workers to those ports on
    :data:`CONSOLE_ADDRESS` are accepted, everything else they start towards the host is dropped. Additive and
    idempotent: several supervisors on one host (other state roots, tests) each add their relay's port.
    Raises NetworkError when iptables fails."""
    if _iptables("-n", "-L", GUARD_CHAIN, check=False).returncode != 0:
        _iptables("-N", GUARD_CHAIN)
        _iptables("-A", GUARD_CHAIN, "-m", "conntrack", "--ctstate", "ESTABLISHED,RELATED", "-j", "ACCEPT")
        _iptables("-A", GUARD_CHAIN, "-j", "DROP")
    for port in sorted({int(p) for p in ports}):
        rule = ("-d", CONSOLE_ADDRESS, "-p", "tcp", "--dport", str(port), "-j", "ACCEPT")
        if _iptables("-C", GUARD_CHAIN, *rule, check=False).returncode != 0:
            _iptables("-I", GUARD_CHAIN, "2", *rule)
    for hook in ("INPUT", "FORWARD"):
        rule = (hook, "-s", WORKER_RANGE, "-j", GUARD_CHAIN)
        if _iptables("-C", *rule, check=False).returncode != 0:
            _iptables("-I", *rule)


def remove_guard() -> None:
    """Remove the host guard once no Worker network of any supervisor is left on the host. Never fails."""
    if list_ours():
        return
    for hook in ("INPUT", "FORWARD"):
        while _iptables("-D", hook, "-s", WORKER_RANGE, "-j", GUARD_CHAIN, check=False).returncode == 0:
            pass
    _iptables("-F", GUARD_CHAIN, check=False)
    _iptables("-X", GUARD_CHAIN, check=False)


class NetworkError(RuntimeError):
    """An ``ip`` command failed while building or removing an isolated network."""


def available() -> tuple[bool, str]:
    """``(True, "")`` when this process can build isolated networks (root and ``ip`` present), else the reason."""
    if os.geteuid() != 0:
        return False, "isolated networks need the local runtime supervisor to run as root"
    if not shutil.which("ip"):
        return False, "the ip command (iproute2) is missing"
    if not shutil.which("iptables"):
        return False, "the iptables command is missing"
    return True, ""


def _h(text: str, n: int = 8) -> str:
    return hashlib.sha1(text.encode()).hexdigest()[:n]


def cluster_netns(cluster: str) -> str:
    return f"{PREFIX}{cluster}"


def pod_netns(cluster: str, pod: str) -> str:
    return f"{PREFIX}{cluster}.{pod}"


def netns_path(name: str) -> str:
    return str(NETNS_DIR / name)


def pod_cidr(index: int) -> str:
    return f"100.64.{int(index)}.0/24"


def pod_address(cluster_index: int, pod_index: int) -> str:
    return f"100.64.{int(cluster_index)}.{int(pod_index)}"


def _ip(*args: str, check: bool = True) -> str:
    proc = subprocess.run(["ip", *args], capture_output=True, text=True, timeout=30)
    if check and proc.returncode != 0:
        raise NetworkError(f"ip {' '.join(args)}: {proc.stderr.strip() or proc.returncode}")
    return proc.stdout


def exists(name: str) -> bool:
    return Path(netns_path(name)).exists()


def list_ours() -> list[str]:
    """Every network namespace made here (name starts with ``rlark-``)."""
    try:
        return sorted(p.name for p in NETNS_DIR.iterdir() if p.name.startswith(PREFIX))
    except FileNotFoundError:
        return []


def ensure_cluster(cluster: str, index: int) -> None:
    """Create the cluster's netns, bridge and veth to the host (idempotent)."""
    ns = cluster_netns(cluster)
    if exists(ns):
        return
    host_if = f"rlkh{_h(cluster, 8)}"
    c = int(index)
    _ip("netns", "add", ns)
    try:
        _ip("-n", ns, "link", "set", "lo", "up")
        _ip("-n", ns, "link", "add", "br0", "type", "bridge")
        _ip("-n", ns, "addr", "add", f"100.64.{c}.1/24", "dev", "br0")
        _ip("-n", ns, "link", "set", "br0", "up")
        _ip("link", "del", host_if, check=False)  # a leftover of a crashed run
        _ip("link", "add", host_if, "type", "veth", "peer", "name", "up0", "netns", ns)
        _ip("addr", "add", CONSOLE_ADDRESS, "peer", f"100.127.{c}.2/32", "dev", host_if)
        _ip("link", "set", host_if, "up")
        _ip("-n", ns, "addr", "add", f"100.127.{c}.2", "peer", f"{CONSOLE_ADDRESS}/32", "dev", "up0")
        _ip("-n", ns, "link", "set", "up0", "up")
        _ip("route", "replace", pod_cidr(c), "via", f"100.127.{c}.2", "dev", host_if)
        subprocess.run(["ip", "netns", "exec", ns, "sysctl", "-qw", "net.ipv4.ip_forward=1"], check=True, timeout=30)
    except (NetworkError, subprocess.SubprocessError) as exc:
        delete_cluster(cluster)
        raise NetworkError(str(exc)) from exc


def delete_cluster(cluster: str) -> None:
    """Remove the cluster's netns (its bridge and the host veth go with it) and every Worker netns left in it."""
    for name in list_ours():
        if name.startswith(cluster_netns(cluster) + "."):
            delete_pod_netns(name)
    if exists(cluster_netns(cluster)):
        _ip("netns", "del", cluster_netns(cluster), check=False)
    _ip("link", "del", f"rlkh{_h(cluster, 8)}", check=False)


def ensure_pod(cluster: str, cluster_index: int, pod: str, pod_index: int) -> str:
    """Create the Worker's netns on the cluster's bridge; returns its address (``100.64.c.p``)."""
    ns = pod_netns(cluster, pod)
    address = pod_address(cluster_index, pod_index)
    if exists(ns):
        return address
    port = f"p{_h(cluster + '/' + pod, 10)}"
    cns = cluster_netns(cluster)
    _ip("netns", "add", ns)
    try:
        _ip("-n", ns, "link", "set", "lo", "up")
        _ip("-n", cns, "link", "add", port, "type", "veth", "peer", "name", "eth0", "netns", ns)
        _ip("-n", cns, "link", "set", port, "master", "br0")
        _ip("-n", cns, "link", "set", port, "up")
        _ip("-n", ns, "addr", "add", f"{address}/24", "dev", "eth0")
        _ip("-n", ns, "link", "set", "eth0", "up")
        _ip("-n", ns, "route", "add", f"{CONSOLE_ADDRESS}/32", "via", f"100.64.{int(cluster_index)}.1")
    except NetworkError:
        delete_pod_netns(ns)
        raise
    return address


def delete_pod_netns(name: str) -> None:
    """Remove a Worker's netns (its veth pair goes with it). Processes still in it keep it alive until they exit."""
    if exists(name):
        _ip("netns", "del", name, check=False)


def addresses(name: str) -> list[str]:
    """``ip -brief addr`` lines of a namespace (for diagnostics and tests)."""
    return _ip("-n", name, "-brief", "addr").splitlines()


def routes(name: str) -> list[str]:
    return _ip("-n", name, "route").splitlines()
