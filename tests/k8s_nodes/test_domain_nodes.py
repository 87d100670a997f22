"""A network domain across two real clusters: two control planes, each with its real node on a bridge of its own
that cannot reach the other (``tools/k8s/hostnet.py``). Header on cluster A (``real-a``, node ``real-0``), rollout x2
on cluster B (``real-b``, nodes ``edge-0`` and ``edge-1``), ``spec.domain`` set, through the console's REST API.

- Each Pod's native sidecar (``NET_ADMIN`` only) reads its certificate from the Task's Secret, which the status sync
  writes, creates ``tun0`` and connects to the console's relay: the relay listens on both bridges' host addresses
  (``RLARK_DOMAIN_RELAY_LISTEN``), and both clusters' CoreDNS answer ``console.rlark.test`` with their own bridge
  address (``RLARK_DOMAIN_RELAY_PUBLIC_HOST``), as an edge cluster and a cloud cluster reach one console by
  different routes.
- Ray forms one 3-node cluster across the two clusters.
- In every Pod, each TCP and UDP socket's peer (``/proc/net/tcp``, ``udp``: what ``ss -tun`` prints) is a domain
  member, the relay, or loopback.
- The same job without the domain does not form, and the Diagnosis names the cause (``cross_cluster_no_domain``).
"""

from __future__ import annotations

import ipaddress
import socket
import time

import pytest
import yaml
from rest_framework.test import APIClient

from domains import dataplane
from domains import sidecar as network_sidecar
from domains.models import Domain
from rlark_console.db_threads import in_thread
from tests.domains.support import RelayThread
from tests.k8s_nodes.conftest import CLUSTER, RealCluster, namespace_running, stop_all
from tests.k8s_nodes.jobs import HEADER_SELECTOR, pod_logs
from tests.k8s_real.conftest import KubeNamespace, discard_namespace, wait_for
from tests.k8s_real.jobs import document, running, synced, task
from tools.k8s.controlplane import ControlPlane
from tools.k8s.fleet import console_kubeconfig

pytestmark = [pytest.mark.k8s_nodes, pytest.mark.django_db(transaction=True), pytest.mark.timeout(900)]

EDGE = "real-b"
DOMAIN_CIDR = "10.100.0.0/16"
# Ray must form (3 alive nodes) within 150 s; the Pods then stay up while the test reads their sockets.
RUN_SCRIPT = """python - <<'PY'
import time, ray
ray.init(address="auto")
for _ in range(150):
    alive = [n for n in ray.nodes() if n["Alive"]]
    if len(alive) >= 3:
        break
    time.sleep(1)
print(f"alive ray nodes: {len(alive)}", flush=True)
print("ray node addresses: " + " ".join(sorted(n["NodeManagerAddress"] for n in alive)), flush=True)
PY
sleep 900"""

# Every connected TCP/UDP socket of the Pod's network namespace: "<proto> <local> <remote> <state>" per line.
SOCKETS = r"""python3 - <<'PY'
import socket, struct
def addr(h):
    ip, port = h.split(":")
    return socket.inet_ntoa(struct.pack("<I", int(ip, 16))) + ":" + str(int(port, 16))
for proto in ("tcp", "udp"):
    for line in open(f"/proc/net/{proto}").read().splitlines()[1:]:
        f = line.split()
        if f[2] != "00000000:0000":
            print(proto, addr(f[1]), addr(f[2]), f[3])
PY"""


@pytest.fixture(scope="module")
def edge_nodes(real_nodes: RealCluster):
    """Cluster B: a second control plane with two real nodes ``edge-0``, ``edge-1`` on a bridge of its own (the next
    free one; one Worker per node: the two rollouts)."""
    from tools.k8s import images, nodes

    cp = ControlPlane.start(die_with_parent=True)
    rn = None
    try:
        rn = nodes.RealNodes.start(
            cp, images.node_images(images.build_all()), count=2, prefix="edge", die_with_parent=True
        )
        yield cp, rn
    finally:
        stop_all(cp, rn)


@pytest.fixture
def edge_cluster(edge_nodes, real_nodes, real_cluster, real_namespace, tmp_path, admin_user):
    """Console Cluster ``real-b`` on cluster B, in a namespace of the same name as cluster A's."""
    from clusters.models import Cluster

    cp, _rn = edge_nodes
    ns = KubeNamespace(cp, real_namespace.name, tmp_path)
    api = APIClient()
    api.force_authenticate(admin_user)
    resp = api.post(
        "/api/v1/clusters/",
        {
            "name": EDGE,
            "runtime": "kubernetes",
            "namespace": ns.name,
            "kubeconfig": yaml.safe_dump(console_kubeconfig(cp, ns.name)),
        },
        format="json",
    )
    assert resp.status_code == 201, resp.content
    cluster = Cluster.objects.get(name=EDGE)
    cluster.network_agent_image = real_nodes.netagent  # an administrator's setting (the back office)
    cluster.save(update_fields=["network_agent_image"])
    yield cluster, ns
    discard_namespace(cp, ns.name)
    wait_for(lambda: not namespace_running(edge_nodes[1], ns.name), 180, f"no running container of {ns.name} left")


@pytest.fixture
def relay(real_nodes, edge_nodes, monkeypatch):
    """The console's relay on both bridges' host addresses, admitting members by their allocation (the database);
    the clusters reach it as ``console.rlark.test``."""
    from tools.k8s.nodes import CONSOLE_NAME

    hosts = (real_nodes.nodes.network.gateway, edge_nodes[1].network.gateway)
    monkeypatch.setenv("RLARK_DOMAIN_RELAY_LISTEN", ",".join(hosts))
    # admitted by allocation, on a worker thread as ``manage.py domain_relay`` does (the ORM is synchronous)
    r = RelayThread(
        port=_free_port(hosts),
        hosts=dataplane.relay_listen_hosts(),
        member_ok=lambda domain, ip: in_thread(dataplane.member_allocated, domain, ip),
    )
    r.start()
    monkeypatch.setenv("RLARK_DOMAIN_RELAY_PUBLIC_HOST", CONSOLE_NAME)
    monkeypatch.setenv("RLARK_DOMAIN_RELAY_PUBLIC_PORT", str(r.port))
    yield r
    r.stop()


def _free_port(hosts: tuple[str, ...]) -> int:
    """A port free on every one of ``hosts`` (the relay binds the same port on each)."""
    for _ in range(50):
        with socket.socket() as s:
            s.bind((hosts[0], 0))
            port = s.getsockname()[1]
        try:
            for h in hosts[1:]:
                with socket.socket() as s:
                    s.bind((h, port))
            return port
        except OSError:
            continue
    raise AssertionError(f"no port free on all of {hosts}")


def cross_cluster_job(name: str, image: str, domain: str | None, edge_bridge: str) -> dict:
    """Header on ``real-0`` (cluster A), rollout x2 on the two nodes of cluster B (their bridge's label)."""
    header = task("header", head=True, replicas=1, selector=HEADER_SELECTOR, role="Actor", image=image, cluster=CLUSTER)
    header["runScript"] = RUN_SCRIPT
    selector = {"rlark.io/network": edge_bridge}
    rollout = task("rollout", head=False, replicas=2, selector=selector, role="Rollout", image=image, cluster=EDGE)
    doc = document(name, header, rollout)
    if domain:
        doc["spec"]["domain"] = domain
    return doc


def sockets(ns: KubeNamespace, pod: str) -> list[tuple[str, str, str]]:
    """``[(proto, local, remote)]`` of the Pod's connected sockets (its network namespace, shared by the sidecar)."""
    out = ns.kubectl("exec", pod, "-c", "main", "--", "bash", "-c", SOCKETS, timeout=30)
    return [tuple(line.split()[:3]) for line in out.splitlines() if line.strip()]


def head_log(ns: KubeNamespace, pod: str) -> str:
    try:
        return ns.kubectl("logs", pod, "-c", "main", timeout=20)
    except Exception:  # noqa: BLE001 - not started yet
        return ""


def test_domain_forms_one_ray_cluster_across_two_real_clusters(
    real_nodes, real_cluster, real_namespace, edge_nodes, edge_cluster, relay, alice
):
    cluster_b, ns_b = edge_cluster
    ns_a = real_namespace
    Domain.objects.create(name="d1", cidr=DOMAIN_CIDR)
    api = APIClient()
    api.force_authenticate(alice)
    doc = cross_cluster_job("xd", real_nodes.worker, "d1", edge_nodes[1].network.bridge)
    resp = api.post("/api/v1/jobs/", doc, format="json")
    assert resp.status_code == 201, resp.content

    pods_a = wait_for(lambda: running(ns_a, 1), 120, "the Header Running on cluster A")
    pods_b = wait_for(lambda: running(ns_b, 2), 120, "2 rollouts Running on cluster B")
    assert {p["spec"]["nodeName"] for p in pods_b.values()} == {"edge-0", "edge-1"}
    for pod in [*pods_a.values(), *pods_b.values()]:
        sidecar = pod["status"]["initContainerStatuses"][0]
        assert sidecar["name"] == network_sidecar.NAME and sidecar["containerID"].startswith("containerd://")
        assert pod["spec"]["initContainers"][0]["securityContext"]["capabilities"] == {
            "add": ["NET_ADMIN"],
            "drop": ["ALL"],
        }

    # the sync allocates the domain addresses and writes each member's certificate into its Task's Secret;
    # every agent then connects to the relay (through its own cluster's bridge) and the head sees 3 Ray nodes
    def formed():
        synced("xd", lambda j: True, 30, "a sync")
        text = head_log(ns_a, "xd-header-0")
        return text if "alive ray nodes:" in text else None

    try:
        text = wait_for(formed, 300, "the run script's count of Ray nodes")
    except pytest.fail.Exception as exc:
        raise AssertionError(f"{exc}\nrelay members: {relay.relay.members()}\n{pod_logs(ns_a)}\n{pod_logs(ns_b)}")
    assert "alive ray nodes: 3" in text, f"{text[-3000:]}\n{pod_logs(ns_b)}"
    members = {m["ip"]: m for m in relay.relay.members()}
    assert len(members) == 3 and all(m["domain"] == "d1" for m in members.values()), members
    assert all(ipaddress.ip_address(ip) in ipaddress.ip_network(DOMAIN_CIDR) for ip in members)
    # the Ray nodes are the domain addresses: no Pod address of either cluster carries Ray traffic
    addresses = next(line for line in text.splitlines() if line.startswith("ray node addresses: "))
    assert set(addresses.split(": ", 1)[1].split()) == set(members), addresses

    # every Pod: tun0 holds its domain address, and every socket's peer is a member, the relay or loopback
    domain = ipaddress.ip_network(DOMAIN_CIDR)
    relays = {f"{host}:{relay.port}" for host in relay.hosts}
    for ns, pod in ((ns_a, "xd-header-0"), (ns_b, "xd-rollout-0"), (ns_b, "xd-rollout-1")):
        tun = ns.kubectl("exec", pod, "-c", "main", "--", "cat", "/sys/class/net/tun0/operstate", timeout=30)
        assert tun.strip() in ("up", "unknown"), (pod, tun)
        seen = sockets(ns, pod)
        assert any(remote in relays for _p, _l, remote in seen), (pod, seen)  # the sidecar's relay connection
        strangers = [
            (proto, local, remote)
            for proto, local, remote in seen
            if remote not in relays
            and not ipaddress.ip_address(remote.split(":")[0]).is_loopback
            and ipaddress.ip_address(remote.split(":")[0]) not in domain
        ]
        assert not strangers, f"{pod} talks to others than domain members, the relay and loopback: {strangers}"

    assert api.delete("/api/v1/jobs/xd/").status_code in (200, 202, 204)
    wait_for(lambda: not ns_a.pods() and not ns_b.pods(), 120, "the job's Pods gone from both clusters")


def test_without_the_domain_ray_does_not_form_and_the_diagnosis_names_the_cause(
    real_nodes, real_cluster, real_namespace, edge_nodes, edge_cluster, alice
):
    _cluster_b, ns_b = edge_cluster
    ns_a = real_namespace
    api = APIClient()
    api.force_authenticate(alice)
    doc = cross_cluster_job("nd", real_nodes.worker, None, edge_nodes[1].network.bridge)
    doc["spec"]["tasks"][0]["env"] = [{"name": "RLARK_RAY_CHECK_TIMEOUT", "value": "20"}]
    resp = api.post("/api/v1/jobs/", doc, format="json")
    assert resp.status_code == 201, resp.content

    wait_for(lambda: running(ns_a, 1) and running(ns_b, 2), 120, "3 Pods Running on the two clusters")

    def waiting():
        logs = [head_log(ns_b, p) for p in ("nd-rollout-0", "nd-rollout-1")]
        return logs if all("Waiting for head to be reachable at nd-header-ray-head" in t for t in logs) else None

    logs = wait_for(waiting, 120, "both rollouts waiting for the head")
    assert not any("Head is reachable" in t for t in logs)
    synced("nd", lambda j: True, 30, "a sync")
    deadline = time.monotonic() + 60
    while True:
        body = api.get("/api/v1/jobs/nd/diagnosis/", HTTP_ACCEPT_LANGUAGE="en").json()
        found = [f for f in body["findings"] if f["code"] == "cross_cluster_no_domain"]
        if found or time.monotonic() > deadline:
            break
        time.sleep(2)
    assert len(found) == 1, body["findings"]
    assert "no network domain" in found[0]["title"] and "nd-header-ray-head" in found[0]["detail"], found[0]
    assert f"{CLUSTER}, {EDGE}" in found[0]["detail"], found[0]
    zh = api.get("/api/v1/jobs/nd/diagnosis/", HTTP_ACCEPT_LANGUAGE="zh-hans").json()
    assert any(f["code"] == "cross_cluster_no_domain" and "网络域" in f["title"] for f in zh["findings"]), zh
