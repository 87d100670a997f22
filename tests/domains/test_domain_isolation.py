"""Isolation and lifecycle of the domain data path (real root supervisor, namespaces, TUN, SSH).

No Ray: every Worker serves HTTP on port 7000 (``python3 -m http.server``). Domain d1 (10.100.0.0/16) has a member
on cluster A and one on cluster B; domain d2 (10.101.0.0/16) has a member on B; a job without a domain runs on A.
- d1 members reach each other across the clusters; the non-member reaches no domain address;
- a d2 member cannot reach d1 even when it routes d1's CIDR into its tunnel itself (root in its netns, more than a
  Worker may): the relay drops the packets (``dropped_no_route``), as it drops spoofed sources;
- a member whose address is released is disconnected from the relay and its agent stops;
- after a relay restart every agent reconnects by itself and traffic flows again.
"""

from __future__ import annotations

import re
import subprocess

import pytest

from clusters.models import Cluster
from clusters.runtime.local import netns
from domains import dataplane, services
from domains.models import Domain
from tests.clusters.test_local_runtime_support import SupervisorProcess, manifest, nodes_spec, wait_for
from tests.domains.support import RelayThread, cleanup_networks, domain_manifest, isolated_runtime, needs_root, reach

pytestmark = [needs_root, pytest.mark.django_db]
NODES = nodes_spec(("n1", {}, {"cpu": 4}), ("n2", {}, {"cpu": 4}))
ADMIN_DOMAIN = "/admin/domains/domain/{}/change/"
SERVE = ["bash", "-c", "exec python3 -m http.server 7000 --bind 0.0.0.0"]


@pytest.fixture
def sup(tmp_path):
    s = SupervisorProcess(tmp_path / "root", RLARK_LOCAL_STOP_GRACE="2").start()
    yield s
    s.stop()
    cleanup_networks("iso-c", "iso-d")


def test_domains_are_isolated_and_members_reconnect(sup, monkeypatch, settings, client, admin_user):
    relay = RelayThread().start()
    monkeypatch.setenv("RLARK_DOMAIN_RELAY_PORT", str(relay.port))
    d1 = Domain.objects.create(name="d1", cidr="10.100.0.0/16")
    d2 = Domain.objects.create(name="d2", cidr="10.101.0.0/16")
    a = isolated_runtime(sup, "iso-c", NODES)
    b = isolated_runtime(sup, "iso-d", NODES)
    runtimes = {"iso-c": a, "iso-d": b}

    def publish():
        members = dataplane.memberships()
        relay.allowed = {(m["domain"], m["ip"]) for c in members.values() for m in c.values()}
        return {name: rt.set_domain_members(members.get(name, {})) for name, rt in runtimes.items()}

    try:
        for rt in runtimes.values():
            rt.ping()
        a.apply_task(domain_manifest("j1", "header", head=True, domain="d1", command=SERVE))
        b.apply_task(domain_manifest("j1", "rollout", head=False, domain="d1", command=SERVE))
        b.apply_task(domain_manifest("j2", "header", head=True, domain="d2", command=SERVE))
        a.apply_task(manifest("j3", "header", head=True, command=SERVE))
        wait_for(lambda: len(b.list_pods("rlark-system", "j1")) == 1 and b.list_pods("rlark-system", "j2"), 30)
        ip = {
            "j1-header-0": services.allocate(d1, "iso-c/rlark-system/j1-header-0", "j1", "j1-header"),
            "j1-rollout-0": services.allocate(d1, "iso-d/rlark-system/j1-rollout-0", "j1", "j1-rollout"),
            "j2-header-0": services.allocate(d2, "iso-d/rlark-system/j2-header-0", "j2", "j2-header"),
        }
        publish()
        ns = {
            "j1-header-0": netns.pod_netns("iso-c", "j1-header-0"),
            "j1-rollout-0": netns.pod_netns("iso-d", "j1-rollout-0"),
            "j2-header-0": netns.pod_netns("iso-d", "j2-header-0"),
            "j3-header-0": netns.pod_netns("iso-c", "j3-header-0"),
        }
        wait_for(
            lambda: (
                all(
                    p.phase == "Running"
                    for rt in runtimes.values()
                    for j in ("j1", "j2", "j3")
                    for p in rt.list_pods("rlark-system", j)
                )
                and len(relay.relay.members()) == 3
            ),
            60,
            what="members connected and serving",
        )
        wait_for(lambda: reach(ns["j1-header-0"], ip["j1-rollout-0"], 7000) == "connected", 20, what="d1 across")
        wait_for(lambda: reach(ns["j1-rollout-0"], ip["j1-header-0"], 7000) == "connected", 20, what="d1 back")
        # a Worker of no domain, on the same cluster as a d1 member: no route to any domain address
        assert reach(ns["j3-header-0"], ip["j1-header-0"], 7000).startswith("OSError 101")
        assert reach(ns["j3-header-0"], ip["j1-rollout-0"], 7000).startswith("OSError 101")
        # d1 -> d2 and d2 -> d1: not routed by the kernel ...
        assert reach(ns["j1-header-0"], ip["j2-header-0"], 7000).startswith("OSError 101")
        # ... and dropped by the relay even when the sender routes the other CIDR into its tunnel
        subprocess.run(["ip", "-n", ns["j2-header-0"], "route", "add", "10.100.0.0/16", "dev", "tun0"], check=True)
        before = relay.relay.stats["dropped_no_route"]
        assert reach(ns["j2-header-0"], ip["j1-header-0"], 7000, timeout=3) == "TimeoutError None"
        assert relay.relay.stats["dropped_no_route"] > before

        # the back office lists each member with IP, cluster, Pod and its connection state (asked live)
        settings.RLARK_LOCAL_ROOT = str(sup.root)
        for name in runtimes:
            Cluster.objects.create(name=name, runtime="local", status="online", isolated_network=True)
        client.force_login(admin_user)
        page = client.get(ADMIN_DOMAIN.format(d1.pk), HTTP_ACCEPT_LANGUAGE="en").content.decode()
        for pod, cluster in (("j1-header-0", "iso-c"), ("j1-rollout-0", "iso-d")):
            row = re.search(rf"<tr[^>]*>(?:(?!</tr>).)*{re.escape(ip[pod])}(?:(?!</tr>).)*</tr>", page, re.S).group(0)
            assert pod in row and f">{cluster}<" in row.replace("\n", "") or cluster in row, row
            assert "connected" in row and "connecting" not in row, row
        zh = client.get(ADMIN_DOMAIN.format(d1.pk), HTTP_ACCEPT_LANGUAGE="zh-hans").content.decode()
        assert zh.count("已连接") >= 2

        # relay restart: every agent reconnects by itself (back-off 1 s, 2 s, 4 s, ...)
        port = relay.port
        relay.stop()
        assert reach(ns["j1-header-0"], ip["j1-rollout-0"], 7000, timeout=2) == "TimeoutError None"
        relay = RelayThread(port).start()
        publish()
        wait_for(lambda: len(relay.relay.members()) == 3, 60, interval=0.5, what="agents reconnected")
        wait_for(lambda: reach(ns["j1-header-0"], ip["j1-rollout-0"], 7000) == "connected", 20, what="d1 again")
        states = publish()
        assert states["iso-c"]["j1-header-0"]["state"] == "connected"
        assert states["iso-c"]["j1-header-0"]["connects"] >= 2

        # releasing an address (the job stopped) disconnects that member and stops its agent
        services.release(d1, "iso-d/rlark-system/j1-rollout-0")
        publish()
        wait_for(lambda: ip["j1-rollout-0"] not in {m["ip"] for m in relay.relay.members()}, 20, what="released")
        assert reach(ns["j1-header-0"], ip["j1-rollout-0"], 7000, timeout=2) == "TimeoutError None"
    finally:
        for log in sorted(sup.root.glob("pods/*/*/agent/agent.log")):
            print(log, log.read_text()[-3000:])
        for rt, task in ((a, "j1-header"), (b, "j1-rollout"), (b, "j2-header"), (a, "j3-header")):
            rt.delete_task("rlark-system", task)
        relay.stop()
    wait_for(lambda: not [n for n in netns.list_ours() if n.startswith(("rlark-iso-c.", "rlark-iso-d."))], 60)
