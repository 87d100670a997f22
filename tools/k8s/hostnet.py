"""The host side of real test nodes: one Linux bridge per control plane, a private Pod range on it, and an
iptables guard so that nothing from or to that range leaves the machine.

Layout of one :class:`PodNetwork` (``index`` 0..15 picks the range, so two control planes get two bridges that
cannot reach each other)::

    bridge   rlkn<index>                 (a plain Linux bridge; no uplink is ever attached)
    range    10.219.<64+index>.0/24      (Pods: .16-.239, split between the nodes by host-local IPAM)
    .1       the bridge's own address    (CoreDNS listens here, port 53)
    .2, .3…  node addresses on the bridge (each kubelet's --node-ip and serving address)

The guard is two chains jumped to first (filter table): ``RLARK-NODES-<index>`` from FORWARD and OUTPUT,
``RLARK-NODES-<index>-IN`` from INPUT::

    FORWARD/OUTPUT: out through loopback                                      -> RETURN (stays on the machine)
                    from or to the range, out of anything but the bridge      -> DROP
    INPUT:          in through loopback                                       -> RETURN
                    in from the bridge to anything outside the range          -> DROP
                    from the range in through anything but the bridge         -> DROP

Pods get no default route and no masquerade (the CNI config in ``tools/k8s/nodes.py``), so the guard is a second
line: even a Pod that adds a route cannot get a packet past the host.

Errors: :class:`HostNetError` (with the failing command's stderr) when a command fails; removal never raises.
"""

from __future__ import annotations

import ipaddress
import subprocess
from dataclasses import dataclass
from pathlib import Path

RANGE_BASE = ipaddress.ip_network("10.219.64.0/24")
MAX_NETWORKS = 16
POD_FIRST_HOST = 16
POD_LAST_HOST = 239


class HostNetError(RuntimeError):
    """A host network command failed."""


def run(*args: str, check: bool = True, timeout: float = 30) -> subprocess.CompletedProcess[str]:
    """Run a host command; raise :class:`HostNetError` on a non-zero exit when ``check``."""
    proc = subprocess.run(list(args), capture_output=True, text=True, timeout=timeout, check=False)
    if check and proc.returncode != 0:
        raise HostNetError(f"{' '.join(args)}: {proc.stderr.strip() or proc.stdout.strip()}")
    return proc


@dataclass(frozen=True)
class PodNetwork:
    """One bridge with its /24 and its guard chain. ``index``: 0..15."""

    index: int

    def __post_init__(self) -> None:
        if not 0 <= self.index < MAX_NETWORKS:
            raise ValueError(f"network index {self.index} not in 0..{MAX_NETWORKS - 1}")

    @property
    def bridge(self) -> str:
        return f"rlkn{self.index}"

    @property
    def chain(self) -> str:
        return f"RLARK-NODES-{self.index}"

    @property
    def cidr(self) -> ipaddress.IPv4Network:
        return ipaddress.ip_network(f"{RANGE_BASE.network_address + 256 * self.index}/24")

    def host(self, n: int) -> str:
        """The ``n``-th address of the range as a string (1 = the bridge, 2.. = nodes)."""
        return str(self.cidr.network_address + n)

    @property
    def gateway(self) -> str:
        return self.host(1)

    def node_ip(self, node: int) -> str:
        """Address of node ``node`` (0-based) on the bridge."""
        return self.host(2 + node)

    def pod_range(self, node: int, nodes: int) -> tuple[str, str]:
        """First and last Pod address host-local hands out on node ``node`` of ``nodes`` (disjoint slices)."""
        size = (POD_LAST_HOST - POD_FIRST_HOST + 1) // max(nodes, 1)
        first = POD_FIRST_HOST + node * size
        return self.host(first), self.host(first + size - 1)

    # --- up / down ------------------------------------------------------------------------------------------

    def up(self, nodes: int) -> None:
        """Create the bridge with its addresses (gateway + ``nodes`` node addresses) and install the guard.
        Idempotent: an existing bridge or chain is reused after the guard is rewritten."""
        if not Path(f"/sys/class/net/{self.bridge}").exists():
            run("ip", "link", "add", self.bridge, "type", "bridge")
        have = run("ip", "-o", "-4", "addr", "show", "dev", self.bridge).stdout
        for n in range(1, 2 + nodes):
            if f" {self.host(n)}/" not in have:
                run("ip", "addr", "add", f"{self.host(n)}/24", "dev", self.bridge)
        run("ip", "link", "set", self.bridge, "up")
        self._guard()

    @property
    def chain_in(self) -> str:
        return f"RLARK-NODES-{self.index}-IN"

    def _hooks(self) -> list[tuple[str, str]]:
        """(built-in chain, guard chain) pairs: ``-o`` rules cannot be reached from INPUT, so it has its own."""
        return [("INPUT", self.chain_in), ("FORWARD", self.chain), ("OUTPUT", self.chain)]

    def _guard(self) -> None:
        br, cidr = self.bridge, str(self.cidr)
        rules = {
            # forwarded or sent by the host: from/to the range only through the bridge
            # (the host talking to its own bridge addresses goes through loopback)
            self.chain: [
                ["-o", "lo", "-j", "RETURN"],
                ["-s", cidr, "!", "-o", br, "-j", "DROP"],
                ["-d", cidr, "!", "-o", br, "-j", "DROP"],
            ],
            # into the host: from the bridge only to the range's own addresses, and the range only from the bridge
            self.chain_in: [
                ["-i", "lo", "-j", "RETURN"],
                ["-i", br, "!", "-d", cidr, "-j", "DROP"],
                ["-s", cidr, "!", "-i", br, "-j", "DROP"],
            ],
        }
        for chain, chain_rules in rules.items():
            if run("iptables", "-n", "-L", chain, check=False).returncode != 0:
                run("iptables", "-N", chain)
            run("iptables", "-F", chain)
            for rule in chain_rules:
                run("iptables", "-A", chain, *rule)
        for hook, chain in self._hooks():
            if run("iptables", "-C", hook, "-j", chain, check=False).returncode != 0:
                run("iptables", "-I", hook, "1", "-j", chain)

    def down(self) -> list[str]:
        """Remove the guard and the bridge. Returns what could not be removed (empty when all went)."""
        left: list[str] = []
        for hook, chain in self._hooks():
            while run("iptables", "-C", hook, "-j", chain, check=False).returncode == 0:
                run("iptables", "-D", hook, "-j", chain, check=False)
        for chain in (self.chain, self.chain_in):
            if run("iptables", "-n", "-L", chain, check=False).returncode == 0:
                run("iptables", "-F", chain, check=False)
                if run("iptables", "-X", chain, check=False).returncode != 0:
                    left.append(f"iptables chain {chain}")
        if Path(f"/sys/class/net/{self.bridge}").exists():
            if run("ip", "link", "del", self.bridge, check=False).returncode != 0:
                left.append(f"bridge {self.bridge}")
        return left


def claim_network() -> PodNetwork:
    """The first network whose bridge does not exist yet, claimed by creating that bridge (``ip link add`` is
    atomic, so two processes never get the same one: a test session, a second cluster of a test, a bench and
    ``make k8s-up-real`` side by side). Raises :class:`HostNetError` when all :data:`MAX_NETWORKS` are taken."""
    for index in range(MAX_NETWORKS):
        net = PodNetwork(index)
        if Path(f"/sys/class/net/{net.bridge}").exists():
            continue
        if run("ip", "link", "add", net.bridge, "type", "bridge", check=False).returncode == 0:
            return net
    raise HostNetError(f"all {MAX_NETWORKS} test networks (rlkn0..rlkn{MAX_NETWORKS - 1}) are in use")


# --- what the kubelet adds to the host -------------------------------------------------------------------------

KUBELET_SYSCTLS = (
    "vm/overcommit_memory",
    "vm/panic_on_oom",
    "kernel/panic",
    "kernel/panic_on_oops",
    "kernel/keys/root_maxkeys",
    "kernel/keys/root_maxbytes",
    "net/ipv4/ip_forward",
)


def read_sysctls() -> dict[str, str]:
    """The kernel settings a kubelet (``protectKernelDefaults: false``) or a CNI plugin may change: ``{key: value}``
    with ``key`` relative to ``/proc/sys``."""
    out: dict[str, str] = {}
    for key in KUBELET_SYSCTLS:
        path = Path("/proc/sys") / key
        if path.exists():
            out[key] = path.read_text().strip()
    return out


def restore_sysctls(saved: dict[str, str]) -> None:
    """Write back what :func:`read_sysctls` returned; a value that cannot be written is left as it is."""
    for key, value in saved.items():
        path = Path("/proc/sys") / key
        try:
            if path.read_text().strip() != value:
                path.write_text(value + "\n")
        except OSError:
            pass


def remove_kube_chains() -> list[str]:
    """Delete every ``KUBE-*`` chain (the kubelet's ``KUBE-FIREWALL``, ``KUBE-KUBELET-CANARY``,
    ``KUBE-IPTABLES-HINT``…) from the filter, nat and mangle tables of iptables and ip6tables, after removing the
    rules that jump to them. Call only when no kubelet runs. Returns the chains that could not be removed."""
    left: list[str] = []
    for tool in ("iptables", "ip6tables"):
        for table in ("filter", "nat", "mangle"):
            proc = run(tool, "-t", table, "-S", check=False)
            if proc.returncode != 0:
                continue
            chains = [line.split()[1] for line in proc.stdout.splitlines() if line.startswith("-N KUBE-")]
            if not chains:
                continue
            for line in proc.stdout.splitlines():
                parts = line.split()
                if parts[:1] == ["-A"] and "-j" in parts and parts[parts.index("-j") + 1].startswith("KUBE-"):
                    run(tool, "-t", table, "-D", *parts[1:], check=False)
            for chain in chains:
                run(tool, "-t", table, "-F", chain, check=False)
            for chain in chains:
                if run(tool, "-t", table, "-X", chain, check=False).returncode != 0:
                    left.append(f"{tool} -t {table} {chain}")
    return left
