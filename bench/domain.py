"""Network-domain data path: what carrying Workers' packets through the console's relay costs.

On two isolated local clusters (root; real namespaces, TUN devices, asyncssh relay in this process):

- TCP throughput between two domain members (a Python socket pump: one sender, one receiver, ``--mb`` MiB), against
  the same kind of pump between two network namespaces joined by a plain veth, as a ratio;
- RTT p50/p95 of 64-byte TCP ping-pongs (``--pings``) over both paths;
- CPU seconds the relay spends per 100 Mbit/s carried (this process's CPU time during the domain pump: the relay is
  the only thing running in it);
- unless ``--quick``: the time for a 3-node Ray cluster (Header on A, rollout x2 on B, ``spec.domain``) to form,
  against the same job inside one isolated cluster without a domain.

Usage: ``sudo .venv/bin/python bench/domain.py [--mb 200] [--pings 500] [--quick]``. Private state under a temp dir;
every namespace it makes starts with ``rlark-`` and is removed at the end.
"""

from __future__ import annotations

import argparse
import os
import re
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.quick import quick_defaults, wait_for  # noqa: E402

RAY_RUN = (
    "python -c \"import ray; ray.init(address='auto'); "
    "print('ALIVE', len([n for n in ray.nodes() if n['Alive']]))\"; sleep 600"
)
PUMP_SERVER = r"""
import socket, sys, time
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1); s.bind(("0.0.0.0", 7100)); s.listen(4)
print("ready", flush=True)
for _ in range(2):
    c, _a = s.accept()
    mode = c.recv(1)
    if mode == b"p":  # ping-pong
        while (d := c.recv(64)):
            c.sendall(d)
    else:
        n = 0
        while (d := c.recv(1 << 20)):
            n += len(d)
        c.sendall(str(n).encode())
    c.close()
"""
PUMP_CLIENT = r"""
import socket, sys, time
host, mb, pings = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
c = socket.create_connection((host, 7100), timeout=30); c.sendall(b"p"); rtts = []
for _ in range(pings):
    t = time.perf_counter(); c.sendall(b"x" * 64); got = 0
    while got < 64:
        got += len(c.recv(64))
    rtts.append(time.perf_counter() - t)
c.close()
c = socket.create_connection((host, 7100), timeout=30); c.sendall(b"b"); buf = b"y" * (1 << 20)
t = time.perf_counter()
for _ in range(mb):
    c.sendall(buf)
c.shutdown(socket.SHUT_WR); n = int(c.recv(64)); dt = time.perf_counter() - t
print("RESULT", n, dt, " ".join(f"{r:.6f}" for r in rtts))
"""


def pump(server_ns: str, client_ns: str, host: str, mb: int, pings: int) -> tuple[float, list[float]]:
    """(Mbit/s, RTTs in s) of the socket pump from ``client_ns`` to ``server_ns`` at ``host``."""
    srv = subprocess.Popen(
        ["ip", "netns", "exec", server_ns, sys.executable, "-c", PUMP_SERVER], stdout=subprocess.PIPE, text=True
    )
    try:
        assert srv.stdout.readline().strip() == "ready"
        out = subprocess.run(
            ["ip", "netns", "exec", client_ns, sys.executable, "-c", PUMP_CLIENT, host, str(mb), str(pings)],
            capture_output=True,
            text=True,
            timeout=600,
        ).stdout
    finally:
        srv.wait(timeout=30)
    m = re.search(r"RESULT (\d+) (\S+) (.*)", out)
    if not m:
        raise RuntimeError(f"pump failed: {out!r}")
    n, dt = int(m.group(1)), float(m.group(2))
    return n * 8 / dt / 1e6, [float(x) for x in m.group(3).split()]


def veth_pair() -> tuple[str, str]:
    a, b = "rlark-bench-x", "rlark-bench-y"
    for ns in (a, b):
        subprocess.run(["ip", "netns", "add", ns], check=True)
        subprocess.run(["ip", "-n", ns, "link", "set", "lo", "up"], check=True)
    subprocess.run(
        ["ip", "-n", a, "link", "add", "eth0", "type", "veth", "peer", "name", "eth0", "netns", b], check=True
    )
    for ns, ip in ((a, "10.199.0.1/24"), (b, "10.199.0.2/24")):
        subprocess.run(["ip", "-n", ns, "addr", "add", ip, "dev", "eth0"], check=True)
        subprocess.run(["ip", "-n", ns, "link", "set", "eth0", "up"], check=True)
    return a, b


def pct(values: list[float], q: float) -> float:
    values = sorted(values)
    return values[min(len(values) - 1, int(q * len(values)))]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mb", type=int, default=200)
    parser.add_argument("--pings", type=int, default=500)
    parser.add_argument("--ray", action=argparse.BooleanOptionalAction, default=True)
    quick_defaults(parser, mb=20, pings=100, ray=False)
    args = parser.parse_args()
    if os.geteuid() != 0:
        print("bench/domain.py needs root (network namespaces, TUN); skipped")
        return 0

    tmp = Path(tempfile.mkdtemp(prefix="rlark-bench-domain-"))
    os.environ.update(RLARK_VAR_DIR=str(tmp / "var"), DJANGO_SETTINGS_MODULE="rlark_console.settings")
    os.environ.pop("DATABASE_URL", None)
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)
    from clusters.runtime.local import netns
    from domains import dataplane, services
    from domains.models import Domain
    from tests.clusters.test_local_runtime_support import SupervisorProcess, manifest, nodes_spec
    from tests.domains.support import RelayThread, domain_manifest, isolated_runtime

    nodes = nodes_spec(("n1", {}, {"cpu": 4}), ("n2", {}, {"cpu": 4}))
    relay = RelayThread().start()
    os.environ["RLARK_DOMAIN_RELAY_PORT"] = str(relay.port)
    sup = SupervisorProcess(tmp / "root", RLARK_LOCAL_STOP_GRACE="2").start()
    a, b = isolated_runtime(sup, "bench-a", nodes), isolated_runtime(sup, "bench-b", nodes)
    runtimes = {"bench-a": a, "bench-b": b}
    d1 = Domain.objects.create(name="d1", cidr="10.100.0.0/16")

    def publish():
        members = dataplane.memberships()
        relay.allowed = {(m["domain"], m["ip"]) for c in members.values() for m in c.values()}
        for name, rt in runtimes.items():
            rt.set_domain_members(members.get(name, {}))

    sleep = ["bash", "-c", "trap 'exit 0' TERM; sleep 3600 & wait"]
    pair = None
    try:
        for rt in runtimes.values():
            rt.ping()
        a.apply_task(domain_manifest("bj", "header", head=True, domain="d1", command=sleep))
        b.apply_task(domain_manifest("bj", "rollout", head=False, domain="d1", command=sleep))
        wait_for(lambda: b.list_pods("rlark-system", "bj") and a.list_pods("rlark-system", "bj"), 30, "pods")
        services.allocate(d1, "bench-a/rlark-system/bj-header-0", "bj", "bj-header")
        ip_b = services.allocate(d1, "bench-b/rlark-system/bj-rollout-0", "bj", "bj-rollout")
        publish()
        wait_for(lambda: len(relay.relay.members()) == 2, 60, "members connected")
        ns_a, ns_b = netns.pod_netns("bench-a", "bj-header-0"), netns.pod_netns("bench-b", "bj-rollout-0")
        pair = veth_pair()
        veth_mbps, veth_rtt = pump(pair[1], pair[0], "10.199.0.2", args.mb, args.pings)
        cpu0 = resource.getrusage(resource.RUSAGE_SELF)
        t0 = time.monotonic()
        dom_mbps, dom_rtt = pump(ns_b, ns_a, ip_b, args.mb, args.pings)
        cpu1 = resource.getrusage(resource.RUSAGE_SELF)
        wall = time.monotonic() - t0
        cpu = (cpu1.ru_utime - cpu0.ru_utime) + (cpu1.ru_stime - cpu0.ru_stime)
        carried = (args.mb * 8 * 1.048576) / max(wall, 1e-9)  # average Mbit/s over the whole run (pings included)
        print(f"TCP throughput: plain veth {veth_mbps:.0f} Mbit/s, domain {dom_mbps:.0f} Mbit/s")
        print(f"ratio domain/veth: {dom_mbps / veth_mbps:.3f}")
        print(
            f"RTT p50/p95: veth {pct(veth_rtt, 0.5) * 1e3:.3f}/{pct(veth_rtt, 0.95) * 1e3:.3f} ms, "
            f"domain {pct(dom_rtt, 0.5) * 1e3:.3f}/{pct(dom_rtt, 0.95) * 1e3:.3f} ms"
        )
        per100 = cpu / wall / carried * 100
        print(f"relay CPU: {cpu / wall:.2f} cores at {carried:.0f} Mbit/s = {per100:.2f} cores per 100 Mbit/s")
        dropped = sum(v for k, v in relay.relay.stats.items() if k.startswith("dropped"))
        print(f"relay packets {relay.relay.stats['packets']}, dropped {dropped}", flush=True)
        a.delete_task("rlark-system", "bj-header")
        b.delete_task("rlark-system", "bj-rollout")
        if args.ray:
            run = RAY_RUN
            t = time.monotonic()
            a.apply_task(domain_manifest("rj", "header", head=True, domain="d1", total=3, run=run))
            b.apply_task(domain_manifest("rj", "rollout", head=False, domain="d1", replicas=2, rank_start=1, total=3))
            wait_for(
                lambda: len(b.list_pods("rlark-system", "rj")) == 2 and a.list_pods("rlark-system", "rj"), 30, "pods"
            )
            for rt, name in ((a, "bench-a"), (b, "bench-b")):
                for p in rt.list_pods("rlark-system", "rj"):
                    services.allocate(d1, f"{name}/rlark-system/{p.name}", "rj", p.task)
            publish()
            wait_for(
                lambda: "ALIVE 3" in a.read_log("rlark-system", "rj-header-0"), 300, "3 nodes over the domain", 0.5
            )
            cross = time.monotonic() - t
            print(f"Ray 3-node form time across clusters over the domain: {cross:.1f} s", flush=True)
            a.delete_task("rlark-system", "rj-header")
            b.delete_task("rlark-system", "rj-rollout")
            t = time.monotonic()
            a.apply_task(manifest("sj", "header", head=True, total=3, run=run))
            a.apply_task(manifest("sj", "rollout", head=False, replicas=2, rank_start=1, total=3))
            wait_for(lambda: "ALIVE 3" in a.read_log("rlark-system", "sj-header-0"), 300, "3 nodes in one cluster", 0.5)
            same = time.monotonic() - t
            print(f"Ray 3-node form time in one isolated cluster: {same:.1f} s")
            print(f"ratio form domain/same-cluster: {cross / same:.2f}")
            a.delete_task("rlark-system", "sj-header")
            a.delete_task("rlark-system", "sj-rollout")
        return 0
    finally:
        if pair:
            for ns in pair:
                subprocess.run(["ip", "netns", "del", ns], check=False)
        sup.stop()
        relay.stop()
        for c in runtimes:
            netns.delete_cluster(c)
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
