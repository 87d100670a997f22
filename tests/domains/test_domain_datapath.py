"""A job across two isolated clusters forms one real Ray cluster over its network domain.

Real root supervisor, real network namespaces, real TUN devices, real SSH (asyncssh) between each member's network
agent and the console's relay, real Ray. The Header is on cluster A, a rollout role x2 on cluster B; the job has
``spec.domain: d1`` (10.100.0.0/16). Every Worker gets its domain IP on ``tun0`` in its own namespace and a managed
``/etc/hosts`` block; Ray forms one 3-node cluster on the domain addresses and the run script sees 3 alive nodes,
with ``RLINF_NODE_RANK`` 0, 1 and 2. All of Ray's connections are between domain addresses, inside the namespaces
the test made: ``ss`` in each Worker's namespace shows no peer outside the domain and the console address, and the
host's own ``ss`` shows no Ray process at all.
"""

from __future__ import annotations

import re
import subprocess
import time

import pytest

from clusters.runtime.local import netns
from domains import dataplane, services
from domains.models import Domain
from tests.clusters.test_local_runtime_support import SupervisorProcess, nodes_spec, wait_for
from tests.domains.support import RelayThread, cleanup_networks, domain_manifest, isolated_runtime, needs_root

pytestmark = [needs_root, pytest.mark.ray, pytest.mark.django_db]
NODES = nodes_spec(("n1", {}, {"cpu": 4}), ("n2", {}, {"cpu": 4}))
RUN = (
    "python -c \"import ray, time\nray.init(address='auto')\nwhile True:\n"
    "    ns = [n for n in ray.nodes() if n['Alive']]\n"
    "    print('ALIVE', len(ns), ' '.join(sorted(n['NodeManagerAddress'] for n in ns)), flush=True)\n"
    '    time.sleep(2)\n"'
)
OUTAGE = 10  # seconds without the relay


@pytest.fixture
def relay(monkeypatch):
    r = RelayThread().start()
    monkeypatch.setenv("RLARK_DOMAIN_RELAY_PORT", str(r.port))
    yield r
    r.stop()


@pytest.fixture
def sup(tmp_path):
    s = SupervisorProcess(tmp_path / "root", RLARK_LOCAL_STOP_GRACE="3").start()
    yield s
    s.stop()
    cleanup_networks("dom-a", "dom-b")


def publish(relay, runtimes, domain):
    """What ``domains.dataplane.publish`` does for the test's runtimes (they are not Cluster rows)."""
    members = dataplane.memberships()
    relay.allowed = {(m["domain"], m["ip"]) for c in members.values() for m in c.values()}
    return {name: rt.set_domain_members(members.get(name, {})) for name, rt in runtimes.items()}


def allocate_running(runtimes, domain, job):
    for name, rt in runtimes.items():
        for p in rt.list_pods("rlark-system", job):
            services.allocate(domain, f"{name}/rlark-system/{p.name}", job, p.task)


def ns_peers(ns: str) -> set[str]:
    out = subprocess.run(["ip", "netns", "exec", ns, "ss", "-tnH"], capture_output=True, text=True, timeout=10)
    peers = set()
    for line in out.stdout.splitlines():
        parts = line.split()
        if len(parts) >= 5:
            peers.add(parts[4].rsplit(":", 1)[0].strip("[]").removeprefix("::ffff:"))
    return peers


def test_job_across_two_isolated_clusters_forms_one_ray_cluster_over_the_domain(sup, relay):
    d1 = Domain.objects.create(name="d1", cidr="10.100.0.0/16")
    a = isolated_runtime(sup, "dom-a", NODES)
    b = isolated_runtime(sup, "dom-b", NODES)
    runtimes = {"dom-a": a, "dom-b": b}
    for rt in runtimes.values():
        rt.ping()
    a.apply_task(domain_manifest("xj", "header", head=True, domain="d1", total=3, run=RUN))
    b.apply_task(domain_manifest("xj", "rollout", head=False, domain="d1", replicas=2, rank_start=1, total=3))
    # The members wait for their domain address, as a Pod waits for its native sidecar.
    pods = wait_for(lambda: len(a.list_pods("rlark-system", "xj")) + len(b.list_pods("rlark-system", "xj")) == 3, 30)
    assert pods
    waiting = a.list_pods("rlark-system", "xj")[0]
    assert waiting.container.reason == "PodInitializing" and "domain address" in waiting.container.message
    allocate_running(runtimes, d1, "xj")
    publish(relay, runtimes, d1)

    def head_log():
        return a.read_log("rlark-system", "xj-header-0")

    try:
        log = wait_for(lambda: "ALIVE" in (t := head_log()) and t, 300, interval=1, what="the run script on the head")
        m = re.search(r"^ALIVE (\d+) (.*)$", log, re.M)
        assert m and m.group(1) == "3", log
        addresses = m.group(2).split()
        assert all(ip.startswith("10.100.") for ip in addresses), addresses
        ranks = {
            p: re.search(r"RLINF_NODE_RANK: (\d+)", rt.read_log("rlark-system", p)).group(1)
            for rt, p in ((a, "xj-header-0"), (b, "xj-rollout-0"), (b, "xj-rollout-1"))
        }
        assert ranks == {"xj-header-0": "0", "xj-rollout-0": "1", "xj-rollout-1": "2"}

        # Every member: tun0 with its domain IP, the managed hosts block, all agents connected to the relay.
        states = publish(relay, runtimes, d1)
        assert all(s["state"] == "connected" for c in states.values() for s in c.values()), states
        ips = {a_.pod_key.rsplit("/", 1)[1]: a_.ip for a_ in d1.allocations.all()}
        for cluster, pod in (("dom-a", "xj-header-0"), ("dom-b", "xj-rollout-0"), ("dom-b", "xj-rollout-1")):
            ns = netns.pod_netns(cluster, pod)
            assert f"{ips[pod]}/16" in " ".join(x for x in netns.addresses(ns) if x.startswith("tun0")), ns
            hosts = (sup.root / "pods" / cluster / pod / "hosts").read_text()
            block = hosts[hosts.index("# BEGIN rlark sidecar") : hosts.index("# END rlark sidecar")]
            for other, ip in ips.items():
                assert f"{ip}\t{other}.rlark-domain" in block
            # Ray's traffic stays inside the domain (and the agent's SSH connection to the console address)
            peers = ns_peers(ns)
            assert peers and peers <= {*ips.values(), netns.CONSOLE_ADDRESS, "127.0.0.1"}, (pod, peers)
        assert {m_["ip"] for m_ in relay.relay.members()} == set(ips.values())
        assert relay.relay.stats["packets"] > 100  # Ray's packets went through the relay
        # No process of these Workers (Ray, the run script, the agents) has a socket in the host's namespace.
        ours = set()
        for cluster, pod in (("dom-a", "xj-header-0"), ("dom-b", "xj-rollout-0"), ("dom-b", "xj-rollout-1")):
            out = subprocess.run(["ip", "netns", "pids", netns.pod_netns(cluster, pod)], capture_output=True, text=True)
            ours |= {int(x) for x in out.stdout.split()}
        assert len(ours) > 10  # raylets, GCS, workers, agents
        host_ss = subprocess.run(["ss", "-tunpH"], capture_output=True, text=True, timeout=10).stdout
        assert not ours & {int(x) for x in re.findall(r"pid=(\d+)", host_ss)}

        # The relay (the console) restarts: the agents reconnect by themselves; tun0 and its address stay, so the
        # Ray nodes' TCP connections outlive an outage of OUTAGE s and Ray keeps its 3 nodes (no re-forming).
        port = relay.port
        relay.stop()
        time.sleep(OUTAGE)
        mark = len(head_log())
        relay2 = RelayThread(port).start()
        try:
            publish(relay2, runtimes, d1)
            wait_for(lambda: len(relay2.relay.members()) == 3, 60, interval=0.5, what="agents reconnected")
            # Ray's existing TCP connections resume once their retransmission back-off fires again (seconds)
            wait_for(lambda: relay2.relay.stats["packets"] > 50, 120, interval=1, what="Ray's packets flowing again")
            mark2 = len(head_log())
            after = wait_for(
                lambda: (t := head_log()[mark:]).count("ALIVE") >= 5 and head_log()[mark2:].count("ALIVE") >= 3 and t,
                60,
                interval=1,
                what="ALIVE lines",
            )
            counts = re.findall(r"^ALIVE (\d+)", after, re.M)
            assert counts and set(counts) == {"3"}, after
        finally:
            relay2.stop()
    finally:
        for log in sorted(sup.root.glob("pods/*/*/*.log")) + sorted(sup.root.glob("pods/*/*/agent/agent.log")):
            print("==", log, log.read_text()[-2500:])
        a.delete_task("rlark-system", "xj-header")
        b.delete_task("rlark-system", "xj-rollout")
    wait_for(lambda: not [n for n in netns.list_ours() if "." in n and n.startswith("rlark-dom-")], 60)
