"""KubernetesRuntime against the fake API server over real HTTP, driven by the official client.

At the runtime level: apply the manifests of a 3-role job and see exactly the specified
objects, re-apply idempotently, pods progress through phases with reasons/events, logs (tail, previous,
streamed), exec (bash -> sh fallback, no shell), stop (replicas 0), start, delete (nothing left), plus the
failure translation (500, timeout, refused, 401, RBAC, missing namespace).
"""

from __future__ import annotations

import time
from pathlib import Path
from types import SimpleNamespace

import pytest
import yaml

from clusters.runtime.base import PodNotFound, RuntimeFailure
from clusters.runtime.kubernetes import NO_SHELL, KubernetesRuntime
from jobs.jobspec.manifests import build_task_manifests
from tests.fake_k8s.fixtures import MARKER_TOKEN, fake_k8s, fake_kubeconfig  # noqa: F401

NS = "rlark-system"
JOB = yaml.safe_load((Path(__file__).parents[1] / "fake_k8s" / "golden" / "job_3role.yaml").read_text())
REGISTRY = SimpleNamespace(
    name="corp", registry="registry.example.com", username="robot", password="pw-1", public=False
)


def cluster_for(kubeconfig: dict, name: str = "gpu-a", namespace: str = NS) -> SimpleNamespace:
    return SimpleNamespace(
        pk=None, name=name, namespace=namespace, in_cluster=False, kubeconfig=yaml.safe_dump(kubeconfig)
    )


@pytest.fixture
def runtime(fake_kubeconfig, settings):  # noqa: F811
    settings.RLARK_K8S_CONNECT_TIMEOUT = 1
    settings.RLARK_K8S_READ_TIMEOUT = 2
    return KubernetesRuntime(cluster_for(fake_kubeconfig))


@pytest.fixture
def manifests(runtime):
    return build_task_manifests(
        "robot-policy-training",
        JOB,
        clusters={"gpu-a": runtime.cluster},
        registries=[REGISTRY],
        ssh_keys=["ssh-ed25519 AAAA k1"],
    )


def owned(fake, kind_plural):
    return sorted(o["metadata"]["name"] for o in fake.list(kind_plural, NS))


def test_ping_ok_and_clear_failures(runtime, fake_k8s, fake_kubeconfig):  # noqa: F811
    runtime.ping()
    fake_k8s.denied |= {("create", "pods/exec"), ("list", "nodes")}
    with pytest.raises(RuntimeFailure) as exc:
        runtime.ping()
    assert exc.value.reason == "forbidden"
    assert "create pods/exec" in str(exc.value) and "list nodes (cluster-wide)" in str(exc.value)
    fake_k8s.denied.clear()
    with pytest.raises(RuntimeFailure) as exc:
        KubernetesRuntime(cluster_for(fake_kubeconfig, namespace="nope")).ping()
    assert exc.value.reason == "namespace_missing" and '"nope"' in str(exc.value)
    with pytest.raises(RuntimeFailure) as exc:
        KubernetesRuntime(cluster_for(fake_k8s.kubeconfig(token="wrong"), name="other")).ping()
    assert exc.value.reason == "unauthorized"
    assert MARKER_TOKEN not in str(exc.value)


def test_list_nodes_gpu_used_ready_cordon(runtime, fake_k8s, manifests):  # noqa: F811
    fake_k8s.add_node("gpu-a-0", {"pool": "head"}, {"nvidia.com/gpu": 8, "cpu": 64, "memory": "512Gi"})
    fake_k8s.add_node(
        "edge-1", {"rlark.io/node-category": "edge"}, {"rlinf.io/device-franka": 1, "cpu": 8}, ready=False
    )
    for m in manifests:
        runtime.apply_task(m)
    fake_k8s.set_pod(NS, "robot-policy-training-actor-0", "Running", node="gpu-a-0", ip="10.244.0.5")
    nodes = {n.name: n for n in runtime.list_nodes()}
    assert nodes["gpu-a-0"].capacity["nvidia.com/gpu"] == 8 and nodes["gpu-a-0"].capacity["memory"] == 512 * 2**30
    assert nodes["gpu-a-0"].used == {"nvidia.com/gpu": 8, "cpu": 32, "memory": 256 * 2**30}
    assert nodes["gpu-a-0"].ready and not nodes["edge-1"].ready
    runtime.cordon("edge-1", True)
    assert {n.name: n.unschedulable for n in runtime.list_nodes()} == {"gpu-a-0": False, "edge-1": True}
    runtime.cordon("edge-1", False)
    assert not fake_k8s.get("nodes", "", "edge-1")["spec"]["unschedulable"]


def test_apply_exactly_as_specified_and_idempotent(runtime, fake_k8s, manifests):  # noqa: F811
    for m in manifests:
        runtime.apply_task(m)
    assert owned(fake_k8s, "statefulsets") == [
        "robot-policy-training-actor",
        "robot-policy-training-env-20-worker",
        "robot-policy-training-rollout-20-worker",
    ]
    assert owned(fake_k8s, "services") == ["robot-policy-training-actor-ray-head"]
    assert owned(fake_k8s, "configmaps") == [f"{m.task}-rlark-scripts" for m in sorted(manifests, key=lambda m: m.task)]
    assert owned(fake_k8s, "persistentvolumeclaims") == [
        "pvc-robot-policy-training-actor-mnt-checkpoints",
        "pvc-robot-policy-training-env-20-worker-mnt-data",
    ]
    assert owned(fake_k8s, "secrets") == ["rlark-registry-corp"]
    # what the server stored is what we built (server-side apply by rlark-console)
    for m in manifests:
        sts = fake_k8s.get("statefulsets", NS, m.task)
        assert sts["spec"] == m.workload["spec"]
        assert sts["metadata"]["labels"] == m.workload["metadata"]["labels"]
        assert any(f["manager"] == "rlark-console" for f in sts["metadata"]["managedFields"])
    assert any(
        method == "PATCH" and "fieldManager=rlark-console" in path and "force=true" in path
        for method, path in fake_k8s.requests
    )
    pods = owned(fake_k8s, "pods")
    assert pods == [
        "robot-policy-training-actor-0",
        "robot-policy-training-env-20-worker-0",
        "robot-policy-training-env-20-worker-1",
        "robot-policy-training-rollout-20-worker-0",
        "robot-policy-training-rollout-20-worker-1",
    ]
    versions = {o["metadata"]["name"]: o["metadata"]["resourceVersion"] for o in fake_k8s.list("statefulsets", NS)}
    uids = {o["metadata"]["name"]: o["metadata"]["uid"] for o in fake_k8s.list("pods", NS)}
    for m in manifests:
        runtime.apply_task(m)
    assert versions == {
        o["metadata"]["name"]: o["metadata"]["resourceVersion"] for o in fake_k8s.list("statefulsets", NS)
    }
    assert uids == {o["metadata"]["name"]: o["metadata"]["uid"] for o in fake_k8s.list("pods", NS)}


def test_pods_progress_with_states_and_events(runtime, fake_k8s, manifests):  # noqa: F811
    for m in manifests:
        runtime.apply_task(m)
    pods = runtime.list_pods(NS, "robot-policy-training")
    assert [(p.task, p.ordinal, p.phase) for p in pods][:2] == [
        ("robot-policy-training-actor", 0, "Pending"),
        ("robot-policy-training-env-20-worker", 0, "Pending"),
    ]
    fake_k8s.add_event(
        NS,
        "robot-policy-training-env-20-worker-1",
        "FailedScheduling",
        "0/3 nodes are available: 3 Insufficient nvidia.com/gpu.",
        "Warning",
    )
    fake_k8s.set_pod(NS, "robot-policy-training-actor-0", "Running", node="gpu-a-0", ip="10.244.0.5")
    fake_k8s.set_pod(
        NS,
        "robot-policy-training-rollout-20-worker-0",
        "Pending",
        node="edge-1",
        waiting="ImagePullBackOff",
        message='Back-off pulling image "registry.example.com/rlinf/rlinf:0.2.1"',
    )
    fake_k8s.set_pod(
        NS,
        "robot-policy-training-rollout-20-worker-1",
        "Running",
        node="edge-2",
        ip="10.244.0.7",
        waiting="CrashLoopBackOff",
        last_terminated=("OOMKilled", 137),
        restarts=4,
    )
    fake_k8s.set_pod(NS, "robot-policy-training-env-20-worker-0", "Failed", terminated=("Error", 3))
    by = {p.name: p for p in runtime.list_pods(NS, "robot-policy-training")}
    head = by["robot-policy-training-actor-0"]
    assert (head.phase, head.node, head.ip, head.container.state, head.container.ready) == (
        "Running",
        "gpu-a-0",
        "10.244.0.5",
        "running",
        True,
    )
    assert head.started_at is not None and head.uid
    pull = by["robot-policy-training-rollout-20-worker-0"].container
    assert (pull.state, pull.reason) == ("waiting", "ImagePullBackOff") and "Back-off pulling" in pull.message
    crash = by["robot-policy-training-rollout-20-worker-1"].container
    assert (crash.reason, crash.restart_count, crash.last_exit_code, crash.last_reason) == (
        "CrashLoopBackOff",
        4,
        137,
        "OOMKilled",
    )
    failed = by["robot-policy-training-env-20-worker-0"]
    assert (failed.phase, failed.container.exit_code, failed.container.reason) == ("Failed", 3, "Error")
    assert failed.finished_at is not None
    pending = by["robot-policy-training-env-20-worker-1"]
    assert [(e.type, e.reason) for e in pending.events] == [("Warning", "FailedScheduling")]
    assert "Insufficient nvidia.com/gpu" in pending.events[0].message
    assert runtime.list_pods(NS, "other-job") == []


def test_logs_tail_previous_stream(runtime, fake_k8s, manifests):  # noqa: F811
    runtime.apply_task(manifests[0])
    pod = "robot-policy-training-actor-0"
    fake_k8s.set_pod(NS, pod, "Running")
    fake_k8s.set_log(NS, pod, "".join(f"Global Step: {i}/3000\n" for i in range(3000)))
    text = runtime.read_log(NS, pod)
    assert len(text.splitlines()) == 1000 and text.splitlines()[-1] == "Global Step: 2999/3000"
    assert runtime.read_log(NS, pod, tail_lines=5).splitlines()[0] == "Global Step: 2995/3000"
    assert len(runtime.read_log(NS, pod, tail_lines=None).splitlines()) == 3000
    with pytest.raises(RuntimeFailure) as exc:
        runtime.read_log(NS, pod, previous=True)
    assert exc.value.reason == "not_found" and "no previous instance" in str(exc.value)
    fake_k8s.set_log(NS, pod, "new\n", previous="Ray worker process exited with code 1\n")
    assert runtime.read_log(NS, pod, previous=True) == "Ray worker process exited with code 1\n"
    fake_k8s.set_log(NS, pod, "x" * 1_000_000)
    chunks = list(runtime.stream_log(NS, pod))
    assert sum(map(len, chunks)) == 1_000_000 and max(map(len, chunks)) <= 65536
    assert any("/log?container=main" in p for _, p in fake_k8s.requests)
    with pytest.raises(PodNotFound):
        runtime.read_log(NS, "ghost-0")


def test_exec_interactive_and_shell_fallback(runtime, fake_k8s, manifests):  # noqa: F811
    runtime.apply_task(manifests[0])
    pod = "robot-policy-training-actor-0"
    fake_k8s.set_pod(NS, pod, "Running")
    stream = runtime.exec(NS, pod)
    assert stream.command == ["bash"]
    out = b""
    stream.write(b"echo $POD_NAME\n")
    deadline = time.monotonic() + 5
    while b"robot-policy-training-actor-0\r\n" not in out and time.monotonic() < deadline:
        out += stream.read(0.2) or b""
    assert b"robot-policy-training-actor-0" in out
    stream.resize(40, 132)
    stream.write(b"exit 7\n")
    while (chunk := stream.read(0.2)) != b"" and time.monotonic() < deadline:
        pass
    assert stream.exit_code == 7
    session = fake_k8s.exec_sessions[-1]
    assert session["resizes"] == [{"Width": 132, "Height": 40}]
    assert session["protocol"] in ("v5.channel.k8s.io", "v4.channel.k8s.io")
    fake_k8s.set_shells(NS, pod, ("sh",))
    assert runtime.exec(NS, pod).command == ["sh"]
    fake_k8s.set_shells(NS, pod, ())
    with pytest.raises(RuntimeFailure, match=r"no shell found \(tried bash, sh\)") as exc:
        runtime.exec(NS, pod)
    assert str(exc.value) == NO_SHELL
    with pytest.raises(PodNotFound):
        runtime.exec(NS, "ghost-0")
    del chunk


def test_exec_refuses_pending_pod_and_fails_fast_when_unreachable(runtime, fake_k8s, manifests):  # noqa: F811
    runtime.apply_task(manifests[0])
    with pytest.raises(RuntimeFailure, match="is not running"):
        runtime.exec(NS, "robot-policy-training-actor-0")
    fake_k8s.set_pod(NS, "robot-policy-training-actor-0", "Running")
    fake_k8s.set_fault("timeout", delay=6)
    started = time.monotonic()
    with pytest.raises(RuntimeFailure) as exc:
        runtime.exec(NS, "robot-policy-training-actor-0")
    assert exc.value.reason == "unreachable" and time.monotonic() - started < 4
    fake_k8s.set_fault(None)


def test_exec_over_v4_channel_protocol(runtime, fake_k8s, manifests):  # noqa: F811
    runtime.apply_task(manifests[0])
    pod = "robot-policy-training-actor-0"
    fake_k8s.set_pod(NS, pod, "Running")
    fake_k8s.exec_protocols = ("v4.channel.k8s.io",)
    stream = runtime.exec(NS, pod)
    stream.write(b"exit 3\n")
    deadline = time.monotonic() + 5
    while stream.read(0.2) != b"" and time.monotonic() < deadline:
        pass
    assert stream.exit_code == 3 and fake_k8s.exec_sessions[-1]["protocol"] == "v4.channel.k8s.io"


def test_stop_start_restart_delete_nothing_left(runtime, fake_k8s, manifests):  # noqa: F811
    for m in manifests:
        runtime.apply_task(m)
    for m in manifests:
        runtime.scale_task(NS, m.task, 0)
    assert runtime.list_pods(NS, "robot-policy-training") == []
    assert all(s["spec"]["replicas"] == 0 for s in fake_k8s.list("statefulsets", NS))
    assert len(owned(fake_k8s, "persistentvolumeclaims")) == 2  # kept on stop
    for m in manifests:
        runtime.scale_task(NS, m.task, m.replicas)
    pods = runtime.list_pods(NS, "robot-policy-training")
    assert len(pods) == 5
    old = {p.name: p.uid for p in pods}
    runtime.restart_pods(NS, manifests[1].task)
    new = {p.name: p.uid for p in runtime.list_pods(NS, "robot-policy-training")}
    assert set(new) == set(old)
    assert all(new[n] != old[n] for n in new if "rollout" in n) and all(new[n] == old[n] for n in new if "actor" in n)
    for m in manifests:
        runtime.delete_task(NS, m.task)
    assert owned(fake_k8s, "statefulsets") == owned(fake_k8s, "pods") == owned(fake_k8s, "services") == []
    assert owned(fake_k8s, "configmaps") == [] and owned(fake_k8s, "secrets") == []
    # PVCs follow their explicit policy: the checkpoint claim says Retain, the data claim goes with its Task
    assert owned(fake_k8s, "persistentvolumeclaims") == ["pvc-robot-policy-training-actor-mnt-checkpoints"]
    for m in manifests:
        runtime.delete_task(NS, m.task, delete_storage=True)  # idempotent: already gone is fine
    assert owned(fake_k8s, "persistentvolumeclaims") == []
    runtime.scale_task(NS, manifests[0].task, 0)  # stopping something gone is a no-op


def test_delete_policy_annotation(runtime, fake_k8s):  # noqa: F811
    ms = build_task_manifests(
        "j", JOB, clusters={"gpu-a": runtime.cluster}, registries=[], ssh_keys=[], pvc_policy="Retain"
    )
    for m in ms:
        runtime.apply_task(m)
    for m in ms:
        runtime.delete_task(NS, m.task)
    assert len(owned(fake_k8s, "persistentvolumeclaims")) == 2


def test_watch_relists_on_410(runtime, fake_k8s, manifests):  # noqa: F811
    runtime.apply_task(manifests[0])
    events = runtime.watch_pods(NS, "robot-policy-training", timeout_seconds=4)
    kind, pods, rv = next(events)
    assert kind == "RELIST" and [p.name for p in pods] == ["robot-policy-training-actor-0"]
    fake_k8s.set_pod(NS, "robot-policy-training-actor-0", "Running")
    kind, pod, rv2 = next(events)
    assert (kind, pod.phase) == ("MODIFIED", "Running") and int(rv2) > int(rv)
    events.close()
    fake_k8s.compact()
    fake_k8s.set_pod(NS, "robot-policy-training-actor-0", "Running", restarts=1)
    events = runtime.watch_pods(NS, "robot-policy-training", resource_version=rv, timeout_seconds=4)
    kind, pods, _ = next(events)
    assert kind == "RELIST" and pods[0].container.restart_count == 1
    events.close()


def test_metrics_when_present(runtime, fake_k8s, manifests):  # noqa: F811
    runtime.apply_task(manifests[0])
    assert runtime.pod_metrics(NS, "robot-policy-training") is None
    fake_k8s.metrics_enabled = True
    fake_k8s.pod_metrics[(NS, "robot-policy-training-actor-0")] = {"cpu": "1500m", "memory": "2Gi"}
    assert runtime.pod_metrics(NS, "robot-policy-training") == {
        "robot-policy-training-actor-0": {"cpu": 1.5, "memory": 2 * 2**30}
    }


@pytest.mark.parametrize("fault", ["500", "timeout", "refused"])
def test_failures_are_clear_and_credential_free(runtime, fake_k8s, fault):  # noqa: F811
    if fault == "refused":
        fake_k8s.refuse_connections()
    else:
        fake_k8s.set_fault(fault, delay=5)
    started = time.monotonic()
    with pytest.raises(RuntimeFailure) as exc:
        runtime.list_nodes()
    assert time.monotonic() - started < 4
    expected = {
        "500": ("internal", "500"),
        "timeout": ("unreachable", "timed out"),
        "refused": ("unreachable", "connection refused"),
    }[fault]
    assert exc.value.reason == expected[0] and expected[1] in str(exc.value)
    assert MARKER_TOKEN not in str(exc.value)
    fake_k8s.set_fault(None)
    fake_k8s.accept_connections()
    assert runtime.list_nodes() == []


@pytest.mark.skipif(not __import__("os").environ.get("RLARK_TEST_KUBECONFIG"), reason="RLARK_TEST_KUBECONFIG not set")
def test_real_cluster_ping_and_nodes():
    """Optional: against a real cluster (read-only: ping and list nodes)."""
    import os

    cluster = SimpleNamespace(
        pk=None,
        name="real",
        namespace=os.environ.get("RLARK_TEST_NAMESPACE", NS),
        in_cluster=False,
        kubeconfig=Path(os.environ["RLARK_TEST_KUBECONFIG"]).read_text(),
    )
    rt = KubernetesRuntime(cluster)
    rt.ping()
    assert rt.list_nodes()
