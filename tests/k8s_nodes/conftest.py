"""Fixtures for tests on REAL nodes (marker ``k8s_nodes``): the control plane of ``tools/k8s`` plus two kubelets
with containerd (``tools/k8s/nodes.py``), so Workers run as real runc containers from images built here
(``tools/k8s/images.py``: ``rlark-worker`` with the Ray CLI, ``rlark-console-netagent``).

One control plane with its real nodes per test session (``real_nodes``): two Nodes ``real-0`` and ``real-1``
(``type=real``) on a guarded bridge, CoreDNS for the headless Services. Each test gets its own namespace with
``deploy/rbac.yaml`` and a console Cluster ``real-a`` registered through the REST API with the ``rlark-console``
ServiceAccount's token (``real_cluster``), exactly as for the kwok tests in ``tests/k8s_real``.

Without the binaries, the Debian packages, root or the images, the tests skip and say why; with
``RLARK_REQUIRE_REAL_K8S=1`` (``.ci/run``) that is a failure instead.
"""

from __future__ import annotations

import itertools
import os
from dataclasses import dataclass

import pytest
import yaml
from rest_framework.test import APIClient

from tests.k8s_real.conftest import KubeNamespace, discard_namespace, wait_for
from tools.k8s.controlplane import ControlPlane, ControlPlaneError, missing_binaries
from tools.k8s.fleet import console_kubeconfig

_ns_counter = itertools.count(1)
NODE_SELECTOR = {"type": "real"}
CLUSTER = "real-a"


def _unavailable(reason: str) -> None:
    if os.environ.get("RLARK_REQUIRE_REAL_K8S") == "1":
        pytest.fail(f"RLARK_REQUIRE_REAL_K8S=1 but real nodes are unavailable: {reason}")
    pytest.skip(f"real nodes unavailable: {reason}")


@dataclass
class RealCluster:
    """The session's control plane, its real nodes and the images they hold (``worker``/``netagent`` refs)."""

    cp: ControlPlane
    nodes: object  # tools.k8s.nodes.RealNodes
    worker: str
    netagent: str


@pytest.fixture(scope="session")
def real_nodes():
    from tools.k8s import images, nodes

    missing = missing_binaries() + nodes.missing_node_prerequisites()
    if missing:
        _unavailable(f"missing: {', '.join(missing)} (make k8s-build; make install as root for Debian's packages)")
    try:
        built = images.build_all()
    except (images.ImageError, OSError) as exc:
        _unavailable(f"images could not be built: {exc}")
    try:
        cp = ControlPlane.start(die_with_parent=True)
    except ControlPlaneError as exc:
        _unavailable(str(exc))
    rn = None
    try:
        rn = nodes.RealNodes.start(cp, images.node_images(built), count=2, die_with_parent=True, timeout=180)
        yield RealCluster(
            cp=cp,
            nodes=rn,
            worker=built["rlark-worker"].ref,
            netagent=built["rlark-console-netagent"].ref,
        )
    except nodes.NodeError as exc:
        _unavailable(str(exc))
    finally:
        stop_all(cp, rn)


def stop_all(cp: ControlPlane, rn) -> None:
    """Stop real nodes ``rn`` (if started) and their control plane; fail when the nodes left anything on the host."""
    try:
        left = rn.stop() if rn is not None else []
        assert not left, f"real nodes left on the host: {left}"
    finally:
        cp.stop()


@pytest.fixture
def real_namespace(real_nodes, tmp_path, request):
    from tests.k8s_real.conftest import NAMESPACE_KEY

    name = f"rlark-n{os.getpid() % 1000}-{next(_ns_counter)}"
    ns = KubeNamespace(real_nodes.cp, name, tmp_path)
    request.node.stash[NAMESPACE_KEY] = ns
    yield ns
    discard_namespace(real_nodes.cp, name)
    real_nodes.cp.kubectl(
        "delete", "clusterrole,clusterrolebinding", f"rlark-console-nodes-{name}", "--ignore-not-found"
    )
    # nothing of this test may keep running on the nodes (the kubelet's garbage collection removes the stopped
    # containers' records later, up to a minute on: waiting for those is not needed by the next test)
    wait_for(lambda: not namespace_running(real_nodes.nodes, name), 180, f"no running container of {name} left")


@pytest.fixture(autouse=True)
def _in_process_channel_layer(settings):
    settings.CHANNEL_LAYERS = {"default": {"BACKEND": "channels.layers.InMemoryChannelLayer"}}


@pytest.fixture
def real_cluster(real_nodes, real_namespace, settings, tmp_path, admin_user, db):
    """A console Cluster ``real-a`` registered through ``POST /api/v1/clusters/`` with the ``rlark-console``
    ServiceAccount of this test's namespace; the worker and network-agent images are the ones built here."""
    from clusters.models import Cluster

    settings.CELERY_TASK_ALWAYS_EAGER = True
    settings.VAR_DIR = tmp_path
    settings.RLARK_K8S_CONNECT_TIMEOUT = 5
    settings.RLARK_K8S_READ_TIMEOUT = 20
    kubeconfig = console_kubeconfig(real_nodes.cp, real_namespace.name)
    api = APIClient()
    api.force_authenticate(admin_user)
    resp = api.post(
        "/api/v1/clusters/",
        {
            "name": "real-a",
            "runtime": "kubernetes",
            "namespace": real_namespace.name,
            "kubeconfig": yaml.safe_dump(kubeconfig),
        },
        format="json",
    )
    assert resp.status_code == 201, resp.content
    cluster = Cluster.objects.get(name="real-a")
    cluster.network_agent_image = real_nodes.netagent  # an administrator's setting (the back office), not the API's
    cluster.save(update_fields=["network_agent_image"])
    return cluster


def namespace_containers(rn, namespace: str) -> list[str]:
    """IDs of the containers (sandboxes included) of ``namespace``'s Pods still in the containerd of real nodes
    ``rn`` (a ``tools.k8s.nodes.RealNodes``; ``ctr -n k8s.io``)."""
    out = []
    for node in rn.nodes:
        listing = node.ctr("containers", "ls", "labels.io.kubernetes.pod.namespace==" + namespace, timeout=30)
        out += [line.split()[0] for line in listing.splitlines()[1:] if line.strip()]
    return out


def namespace_running(rn, namespace: str) -> list[str]:
    """IDs of the containers (sandboxes included) of ``namespace``'s Pods whose process still runs on real nodes
    ``rn`` (:func:`namespace_containers` whose task is RUNNING)."""
    running = {cid for node in rn.nodes for cid in node.running_tasks()}  # IDs are unique across the nodes
    return [cid for cid in namespace_containers(rn, namespace) if cid in running]


# On a failure, attach the test namespace's events and Pods (the hook of tests/k8s_real, for this directory too).
from tests.k8s_real.conftest import pytest_runtest_makereport  # noqa: E402, F401
