"""Isolated local clusters (real root supervisor, real network namespaces, no Ray).

Two isolated clusters on one machine: each Worker has a network namespace of its own (``rlark-<cluster>.<pod>``) on
its cluster's bridge; Workers of one cluster reach each other, Workers of two clusters cannot reach each other at
all, nor any real address of the machine; the console is reachable from both at one address, on its published port
(the relay's) only. Deleting the
Workers and the cluster network leaves no ``rlark-`` namespace behind. Without root the option is refused.
"""

from __future__ import annotations

import subprocess

import pytest

from clusters.runtime.local import netns
from tests.clusters.test_local_runtime_support import SupervisorProcess, manifest, nodes_spec, wait_for
from tests.domains.support import cleanup_networks, console_listener, isolated_runtime, needs_root, reach

NODES = nodes_spec(("n1", {}, {"cpu": 8}), ("n2", {}, {"cpu": 8}))
SLEEP = ["bash", "-c", "trap 'exit 0' TERM; sleep 600 & wait"]


@pytest.fixture
def listener():
    """The console's published port (the relay's), at the console address, before the supervisor starts."""
    s = console_listener()
    yield s
    s.close()


@pytest.fixture
def sup(tmp_path, listener):
    s = SupervisorProcess(tmp_path / "root", RLARK_DOMAIN_RELAY_PORT=str(listener.getsockname()[1])).start()
    yield s
    s.stop()
    cleanup_networks("iso-a", "iso-b")


def _real_addresses() -> list[str]:
    out = subprocess.run(["ip", "-4", "-o", "addr"], capture_output=True, text=True).stdout
    return [
        line.split()[3].split("/")[0]
        for line in out.splitlines()
        if " lo " not in line and "rlkh" not in line and netns.CONSOLE_ADDRESS not in line
    ]


@needs_root
def test_two_isolated_clusters_cannot_reach_each_other_but_reach_the_console(sup, listener):
    a = isolated_runtime(sup, "iso-a", NODES)
    b = isolated_runtime(sup, "iso-b", NODES)
    a.ping()
    b.ping()
    port = listener.getsockname()[1]
    unpublished = console_listener()  # a console port that is not published: the host guard drops the packets
    try:
        a.apply_task(manifest("ja", "header", head=True, replicas=2, command=SLEEP))
        b.apply_task(manifest("jb", "header", head=True, command=SLEEP))
        pods = wait_for(
            lambda: (
                (pa := a.list_pods("rlark-system", "ja"))
                and (pb := b.list_pods("rlark-system", "jb"))
                and len(pa) == 2
                and all(p.phase == "Running" and p.ip for p in [*pa, *pb])
                and (pa, pb)
            ),
            60,
            what="Workers running in both clusters",
        )
        pa, pb = pods
        ip_a0, ip_a1, ip_b = pa[0].ip, pa[1].ip, pb[0].ip
        assert ip_a0.startswith("100.64.") and ip_b.startswith("100.64.")
        assert ip_a0.rsplit(".", 1)[0] == ip_a1.rsplit(".", 1)[0] != ip_b.rsplit(".", 1)[0]
        ns_a0 = netns.pod_netns("iso-a", pa[0].name)
        ns_b = netns.pod_netns("iso-b", pb[0].name)
        assert set(netns.list_ours()) >= {"rlark-iso-a", "rlark-iso-b", ns_a0, ns_b}
        # The Worker really runs in that namespace.
        # ns_pid is given once the Worker's PID 1 is in its id-mapped user namespace (exec needs that)
        ns_pid = wait_for(lambda: a.pod_info(pa[0].name)["ns_pid"], 20, what="the Worker's namespaces set up")
        identify = subprocess.run(["ip", "netns", "identify", str(ns_pid)], capture_output=True, text=True)
        assert identify.stdout.strip() == ns_a0

        # the console, at one address and port, from both clusters
        assert reach(ns_a0, netns.CONSOLE_ADDRESS, port) == "connected"
        assert reach(ns_b, netns.CONSOLE_ADDRESS, port) == "connected"
        assert reach(ns_a0, netns.CONSOLE_ADDRESS, unpublished.getsockname()[1]).startswith("TimeoutError")
        # same cluster: reachable (refused = the packet arrived, nothing listens)
        assert reach(ns_a0, ip_a1, 9) == "refused"
        # other cluster, the host's real addresses, the host's loopback listeners: unreachable
        assert reach(ns_a0, ip_b, 9).startswith("OSError 101"), reach(ns_a0, ip_b, 9)  # ENETUNREACH
        assert reach(ns_b, ip_a0, 9).startswith("OSError 101")
        for real in _real_addresses()[:3]:
            assert reach(ns_a0, real, 22).startswith("OSError 101"), real
        assert reach(ns_a0, "127.0.0.1", port) == "refused"  # its own loopback, not the host's
        routes = "\n".join(netns.routes(ns_a0))
        assert "default" not in routes, routes
    finally:
        unpublished.close()
        a.delete_task("rlark-system", "ja-header")
        b.delete_task("rlark-system", "jb-header")
    wait_for(lambda: ns_a0 not in netns.list_ours() and ns_b not in netns.list_ours(), 30, what="Worker netns removed")
    a._call("delete_network")
    b._call("delete_network")
    assert not [n for n in netns.list_ours() if n.startswith(("rlark-iso-a", "rlark-iso-b"))]


def test_isolated_network_refused_without_root(db, monkeypatch, admin_user):
    """Not root: the API refuses the option with a translated message (zh default, en)."""
    from rest_framework.test import APIClient

    monkeypatch.setattr(netns.os, "geteuid", lambda: 1000)
    client = APIClient()
    client.force_authenticate(admin_user)
    body = {"name": "iso", "runtime": "local", "isolated_network": True, "nodes": [{"name": "n1"}]}
    r = client.post("/api/v1/clusters/", body, format="json", HTTP_ACCEPT_LANGUAGE="en")
    assert r.status_code == 400, r.content
    assert r.json()["field"] == "isolated_network"
    assert "needs the local runtime to run as root" in r.json()["detail"]
    r = client.post("/api/v1/clusters/", body, format="json", HTTP_ACCEPT_LANGUAGE="zh-hans")
    assert r.status_code == 400 and "root" in r.json()["detail"] and "隔离网络" in r.json()["detail"], r.json()
    k8s = {"name": "k", "runtime": "kubernetes", "in_cluster": True, "isolated_network": True}
    r = client.post("/api/v1/clusters/", k8s, format="json", HTTP_ACCEPT_LANGUAGE="en")
    assert r.status_code == 400 and "Only a local cluster" in r.json()["detail"]
