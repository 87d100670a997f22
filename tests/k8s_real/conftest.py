"""Fixtures for tests against the REAL control plane of ``tools/k8s`` (marker ``k8s_real``).

One control plane per test session (``control_plane``): etcd, kube-apiserver, kube-controller-manager,
kube-scheduler and kwok on 127.0.0.1, with a standard kwok fleet (:data:`FLEET`). Each test gets its own
namespace with ``deploy/rbac.yaml`` applied in it and a console :class:`~clusters.models.Cluster` registered
through the REST API with the ``rlark-console`` ServiceAccount's token (``k8s_cluster``), so the console runs
with exactly the permissions production gives it.

Without the binaries (no Go, no module proxy) the tests skip and say why; with ``RLARK_REQUIRE_REAL_K8S=1``
(``.ci/run``) that is a failure instead.
"""

from __future__ import annotations

import itertools
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml
from rest_framework.test import APIClient

from tools.k8s.controlplane import ControlPlane, ControlPlaneError, bin_dir, missing_binaries
from tools.k8s.fleet import NodeSpec, add_nodes, console_kubeconfig, gpu_fleet

# 4 GPU nodes (8 x A800 each; gpu-3 cordoned and the only "pool=reserved" node) and 2 CPU nodes.
FLEET: list[NodeSpec] = [
    *gpu_fleet("gpu", 3, gpus=8, extra_labels={"pool": "gpu"}),
    NodeSpec(
        name="gpu-3",
        labels={"rlark.io/node-category": "gpu", "rlark.io/gpu-model": "A800", "pool": "reserved"},
        gpus=8,
        cordoned=True,
    ),
    NodeSpec(name="cpu-0", labels={"rlark.io/node-category": "cpu", "pool": "cpu"}, gpus=0, cpu=64),
    NodeSpec(name="cpu-1", labels={"rlark.io/node-category": "cpu", "pool": "cpu"}, gpus=0, cpu=64),
]

_ns_counter = itertools.count(1)


def _unavailable(reason: str) -> None:
    if os.environ.get("RLARK_REQUIRE_REAL_K8S") == "1":
        pytest.fail(f"RLARK_REQUIRE_REAL_K8S=1 but the real control plane is unavailable: {reason}")
    pytest.skip(f"real Kubernetes control plane unavailable: {reason}")


@pytest.fixture(scope="session")
def control_plane():
    missing = missing_binaries()
    if missing:
        _unavailable(f"{', '.join(missing)} not built in {bin_dir()} (run `make k8s-build`; needs Go + module proxy)")
    try:
        cp = ControlPlane.start(die_with_parent=True)
    except ControlPlaneError as exc:
        _unavailable(str(exc))
    try:
        add_nodes(cp, FLEET)
        wait_for(lambda: _ready_nodes(cp) >= len(FLEET), 60, "kwok nodes Ready")
        yield cp
    finally:
        cp.stop()


def _ready_nodes(cp: ControlPlane) -> int:
    docs = yaml.safe_load(cp.kubectl("get", "nodes", "-o", "yaml"))["items"]
    ready = 0
    for node in docs:
        for cond in (node.get("status") or {}).get("conditions") or []:
            if cond["type"] == "Ready" and cond["status"] == "True":
                ready += 1
    return ready


def wait_for(check: Callable[[], Any], timeout: float, what: str, interval: float = 0.25) -> Any:
    """Poll ``check`` until it returns something truthy (returned) or ``timeout`` seconds pass (fail)."""
    deadline = time.monotonic() + timeout
    last: Any = None
    while time.monotonic() < deadline:
        last = check()
        if last:
            return last
        time.sleep(interval)
    pytest.fail(f"timed out after {timeout:.0f} s waiting for {what} (last: {last!r})")


class KubeNamespace:
    """One test's namespace on the shared control plane, read through the admin credentials."""

    def __init__(self, cp: ControlPlane, name: str, log_dir: Path) -> None:
        self.cp = cp
        self.name = name
        self.log_dir = log_dir

    def write_log(self, pod: str, lines: list[str], previous: list[str] | None = None, append: bool = False) -> Path:
        """What the Worker's container printed: kwok serves ``pods/log`` (tail, follow, previous) from a file in
        CRI log format named by a ``Logs`` object, through the real API server. Returns the file."""
        path = self.log_dir / f"{pod}.log"
        stamp = time.strftime("%Y-%m-%dT%H:%M:%S.000000000Z", time.gmtime())
        with path.open("a" if append else "w") as f:
            f.writelines(f"{stamp} stdout F {line}\n" for line in lines)
        spec: dict[str, Any] = {"containers": ["main"], "logsFile": str(path), "follow": True}
        if previous is not None:
            prev = self.log_dir / f"{pod}.previous.log"
            prev.write_text("".join(f"{stamp} stdout F {line}\n" for line in previous))
            spec["previousLogsFile"] = str(prev)
        if not append:
            self.apply(
                [
                    {
                        "apiVersion": "kwok.x-k8s.io/v1alpha1",
                        "kind": "Logs",
                        "metadata": {"name": pod},
                        "spec": {"logs": [spec]},
                    }
                ]
            )
        return path

    def allow_exec(self, pod: str, workdir: Path) -> None:
        """Let ``pods/exec`` into ``pod`` run commands (kwok runs them in ``workdir`` on this machine)."""
        workdir.mkdir(parents=True, exist_ok=True)
        self.apply(
            [
                {
                    "apiVersion": "kwok.x-k8s.io/v1alpha1",
                    "kind": "Exec",
                    "metadata": {"name": pod},
                    "spec": {"execs": [{"containers": ["main"], "local": {"workDir": str(workdir)}}]},
                }
            ]
        )

    def get(self, kind: str, name: str = "") -> Any:
        args = ["-n", self.name, "get", kind, "-o", "yaml"]
        if name:
            args.insert(4, name)
        return yaml.safe_load(self.cp.kubectl(*args))

    def names(self, kind: str) -> list[str]:
        return sorted(o["metadata"]["name"] for o in self.get(kind)["items"])

    def pods(self) -> dict[str, dict]:
        return {p["metadata"]["name"]: p for p in self.get("pods")["items"]}

    def apply(self, docs: list[dict]) -> None:
        for d in docs:
            d.setdefault("metadata", {}).setdefault("namespace", self.name)
        self.cp.kubectl("apply", "-f", "-", input=yaml.safe_dump_all(docs))

    def annotate(self, kind: str, name: str, **annotations: str) -> None:
        pairs = [f"{k.replace('__', '/').replace('_', '-')}={v}" for k, v in annotations.items()]
        self.cp.kubectl("-n", self.name, "annotate", "--overwrite", kind, name, *pairs)

    def kubectl(self, *args: str, **kw: Any) -> str:
        return self.cp.kubectl("-n", self.name, *args, **kw)


NAMESPACE_KEY = pytest.StashKey["KubeNamespace"]()


def discard_namespace(cp: ControlPlane, name: str) -> None:
    """Delete namespace ``name`` and free the node resources of its Pods at once.

    A plain namespace delete leaves its Pods on their nodes until the namespace controller gets to them, which
    on a loaded 2-core CI machine took long enough that the next test's validation saw every ``pool=gpu`` GPU
    still in use (CI: ``test_resource_quota_that_refuses_pod_creation`` refused with ``gpu_exceeds_pool``).
    One kubectl call deletes in the order listed: the StatefulSets first, so that none recreates a Pod, then the
    Pods, force-deleted (grace 0)."""
    cp.kubectl(
        "-n",
        name,
        "delete",
        "statefulsets,pods",
        "--all",
        "--ignore-not-found",
        "--force",
        "--grace-period=0",
        "--wait=false",
    )
    cp.kubectl("delete", "namespace", name, "--ignore-not-found", "--wait=false")


@pytest.fixture
def k8s_namespace(control_plane, tmp_path, request):
    name = f"rlark-t{os.getpid() % 1000}-{next(_ns_counter)}"
    (tmp_path / "pod-logs").mkdir()
    ns = KubeNamespace(control_plane, name, tmp_path / "pod-logs")
    request.node.stash[NAMESPACE_KEY] = ns  # for the failure report below
    yield ns
    discard_namespace(control_plane, name)
    control_plane.kubectl(
        "delete", "clusterrole,clusterrolebinding", f"rlark-console-nodes-{name}", "--ignore-not-found"
    )


@pytest.fixture(autouse=True)
def _in_process_channel_layer(settings):
    """Consumers in these tests run in this process (Channels' communicator); with ``REDIS_URL`` set (CI) the Redis
    layer's connections outlive each test's event loop and time out, which is not what these tests are about."""
    settings.CHANNEL_LAYERS = {"default": {"BACKEND": "channels.layers.InMemoryChannelLayer"}}


@pytest.fixture
def k8s_settings(settings, tmp_path):
    settings.CELERY_TASK_ALWAYS_EAGER = True
    settings.VAR_DIR = tmp_path
    settings.RLARK_K8S_CONNECT_TIMEOUT = 2
    settings.RLARK_K8S_READ_TIMEOUT = 10
    return settings


@pytest.fixture
def k8s_cluster(control_plane, k8s_namespace, k8s_settings, admin_user, db):
    """A console Cluster named ``kwok-a`` registered through ``POST /api/v1/clusters/`` with the
    ``rlark-console`` ServiceAccount of this test's namespace."""
    from clusters.models import Cluster

    kubeconfig = console_kubeconfig(control_plane, k8s_namespace.name)
    api = APIClient()
    api.force_authenticate(admin_user)
    resp = api.post(
        "/api/v1/clusters/",
        {
            "name": "kwok-a",
            "runtime": "kubernetes",
            "namespace": k8s_namespace.name,
            "kubeconfig": yaml.safe_dump(kubeconfig),
        },
        format="json",
    )
    assert resp.status_code == 201, resp.content
    return Cluster.objects.get(name="kwok-a")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    """On a failure, attach the test namespace's events and Pods: what the real controllers said."""
    outcome = yield
    report = outcome.get_result()
    ns = item.stash.get(NAMESPACE_KEY, None)
    if report.when in ("setup", "call") and report.failed and isinstance(ns, KubeNamespace):
        try:
            events = ns.kubectl("get", "events", "--sort-by=.lastTimestamp", timeout=10)
            pods = ns.kubectl("get", "pods,statefulsets,pvc,controllerrevisions", "-o", "wide", timeout=10)
        except ControlPlaneError as exc:
            events, pods = str(exc), ""
        try:
            from jobs.models import Task

            tasks = "\n".join(f"task {t.name}: replicas={t.replicas} message={t.message!r}" for t in Task.objects.all())
        except Exception as exc:  # noqa: BLE001 - diagnostics only
            tasks = repr(exc)
        report.sections.append(("kubernetes", f"{pods}\n{events}\n{tasks}"))
