"""The local runtime through its public interface (LocalRuntime -> supervisor process): scheduling on
virtual nodes, StatefulSet-like restarts with previous logs, mounts seen at their mountPath, env, exec,
metrics, scale to 0 without leftovers, and supervisor restarts (adopt while alive, nothing left on stop)."""

from __future__ import annotations

import signal
import time
import uuid
from pathlib import Path

import pytest

from clusters.runtime.base import PodNotFound, RuntimeFailure
from clusters.runtime.local import launcher
from clusters.runtime.local.runtime import _tail
from tests.clusters.test_local_runtime_support import (
    SupervisorProcess,
    manifest,
    nodes_spec,
    pid_alive,
    wait_for,
)

NODES = nodes_spec(
    ("n-head", {"pool": "head"}, {"nvidia.com/gpu": 3, "cpu": 16, "memory": "64Gi"}),
    ("n-a", {"pool": "rollout"}, {"nvidia.com/gpu": 8}),
    ("n-b", {"pool": "rollout"}, {}),
)


@pytest.fixture
def sup(tmp_path):
    s = SupervisorProcess(tmp_path / "root").start()
    yield s
    s.stop()


def pods_by_name(rt, job):
    return {p.name: p for p in rt.list_pods("rlark-system", job)}


def sleeper(job, template="header", **kw):
    command = ["bash", "-c", "trap 'exit 0' TERM; sleep 600 & wait"]  # PID 1 ignores an untrapped SIGTERM
    return manifest(job, template, head=template == "header", command=command, **kw)


def test_unreachable_supervisor_is_reported(tmp_path):
    rt = SupervisorProcess(tmp_path / "nobody").runtime(NODES)
    with pytest.raises(RuntimeFailure) as err:
        rt.ping()
    assert err.value.reason == "unreachable"
    assert "local_supervisor" in str(err.value)


def test_scheduling_selector_capacity_and_anti_affinity(sup):
    rt = sup.runtime(NODES)
    rt.ping()
    rt.apply_task(
        sleeper("big", selector={"pool": "head"}, resources={"limits": {"nvidia.com/gpu": "8"}, "requests": {}})
    )
    rt.apply_task(sleeper("nomatch", selector={"pool": "nowhere"}))
    rt.apply_task(sleeper("roll", "rollout", replicas=3, rank_start=1, selector={"pool": "rollout"}))
    big = wait_for(lambda: pods_by_name(rt, "big").get("big-header-0"), 10, what="pod")
    assert big.phase == "Pending" and big.node == ""
    assert big.reason == "Unschedulable"
    assert "nvidia.com/gpu need 8, free 3" in big.message
    nomatch = pods_by_name(rt, "nomatch")["nomatch-header-0"]
    assert nomatch.phase == "Pending" and "no node matches the node selector" in nomatch.message
    roll = wait_for(
        lambda: (p := pods_by_name(rt, "roll")) and sum(x.phase == "Running" for x in p.values()) == 2 and p,
        15,
        what="two rollout pods running",
    )
    # one pod of a task per node (required anti-affinity): the third stays Pending
    assert sorted(p.node for p in roll.values() if p.phase == "Running") == ["n-a", "n-b"]
    assert "anti-affinity" in roll["roll-rollout-2"].message
    # capacity accounting is visible in list_nodes
    rt.apply_task(sleeper("small", selector={"pool": "head"}, resources={"limits": {"nvidia.com/gpu": "2"}}))
    wait_for(lambda: pods_by_name(rt, "small")["small-header-0"].phase == "Running", 15, what="small running")
    used = {n.name: n.used for n in rt.list_nodes()}
    assert used["n-head"] == {"nvidia.com/gpu": 2.0}
    wait_for(
        lambda: "nvidia.com/gpu need 8, free 1" in pods_by_name(rt, "big")["big-header-0"].message,
        5,
        what="the pending reason to follow the free capacity",
    )
    for task in ("big-header", "nomatch-header", "roll-rollout", "small-header"):
        rt.delete_task("rlark-system", task)
    wait_for(lambda: not any(rt.list_pods("rlark-system", j) for j in ("big", "roll", "small")), 20, what="gone")


def test_restart_keeps_previous_log_and_exit_codes(sup):
    rt = sup.runtime(NODES)
    script = 'n=$(ls "$HOME" | wc -l); touch "$HOME/run-$RANDOM$RANDOM"; echo "attempt $n"; exit 3'
    rt.apply_task(manifest("crash", "header", head=True, command=["bash", "-c", script]))
    pod = wait_for(
        lambda: (p := pods_by_name(rt, "crash").get("crash-header-0")) and p.container.restart_count >= 2 and p,
        30,
        what="two restarts",
    )
    assert pod.phase == "Running"  # restartPolicy Always: the pod stays, the container restarts
    assert pod.container.last_exit_code == 3 or pod.container.exit_code == 3
    previous = rt.read_log("rlark-system", "crash-header-0", previous=True)
    current = rt.read_log("rlark-system", "crash-header-0")
    assert previous.startswith("attempt ")
    assert previous != current or current == ""
    # a re-created pod (Restart) starts fresh: no previous instance, restart count 0
    rt.scale_task("rlark-system", "crash-header", 0)
    wait_for(lambda: not rt.list_pods("rlark-system", "crash"), 15, what="scaled down")
    with pytest.raises(PodNotFound):
        rt.read_log("rlark-system", "crash-header-0")
    rt.apply_task(sleeper("crash"))
    rt.scale_task("rlark-system", "crash-header", 1)
    fresh = wait_for(lambda: pods_by_name(rt, "crash").get("crash-header-0"), 10, what="fresh pod")
    assert fresh.uid != pod.uid and fresh.container.restart_count == 0
    with pytest.raises(RuntimeFailure) as err:
        rt.read_log("rlark-system", "crash-header-0", previous=True)
    assert err.value.reason == "not_found"
    rt.delete_task("rlark-system", "crash-header")


def test_mounts_env_exec_metrics_and_scale_to_zero(sup, tmp_path):
    rt = sup.runtime(NODES)
    host_dir = tmp_path / "host-output"
    mount_at = f"/tmp/rlark-h2-mnt-{uuid.uuid4().hex[:8]}/output"
    volumes = [
        {"name": "out", "hostPath": {"path": str(host_dir), "type": "DirectoryOrCreate"}},
        {"name": "ckpt", "persistentVolumeClaim": {"claimName": "ckpt-claim"}},
        {"name": "dshm", "emptyDir": {"medium": "Memory", "sizeLimit": "64Mi"}},
    ]
    mounts = [
        {"name": "out", "mountPath": mount_at},
        {"name": "ckpt", "mountPath": "/ckpt"},
        {"name": "dshm", "mountPath": "/dev/shm"},
    ]
    pvc = {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": {"name": "ckpt-claim", "annotations": {"rlark.io/storage-class": "oss-a"}},
        "spec": {"storageClassName": "oss-a"},
    }
    script = (
        f'echo "written by $POD_NAME" > {mount_at}/hello.txt; echo pvc > /ckpt/p.txt; '
        "df -B1 --output=size /dev/shm | tail -1 | tr -d ' ' > /ckpt/shm-size; "
        'echo "FOO=$FOO PORT=$RLARK_RAY_PORT HEAD=$RLARK_HEAD_ADDRESS PWD=$(pwd)"; sleep 600 & wait'
    )
    m = manifest(
        "mnt",
        "rollout",
        head=False,
        rank_start=4,
        replicas=2,
        env=[{"name": "FOO", "value": "bar"}],
        volumes=volumes,
        mounts=mounts,
        extra_objects=(pvc,),
        command=["bash", "-c", script],
        selector={"pool": "rollout"},
    )
    rt.apply_task(m)
    wait_for(lambda: (host_dir / "hello.txt").exists(), 20, what="file written through the mount")
    pods = wait_for(
        lambda: (p := pods_by_name(rt, "mnt")) and all(x.phase == "Running" for x in p.values()) and len(p) == 2 and p,
        10,
        what="2 running",
    )
    assert (host_dir / "hello.txt").read_text().startswith("written by mnt-rollout-")
    claim_dir = Path(sup.root) / "storage" / "c1" / "oss-a" / "ckpt-claim"
    assert (claim_dir / "p.txt").read_text() == "pvc\n"
    shm = claim_dir / "shm-size"  # written after hello.txt: wait for it, not just for the file to be opened
    assert int(wait_for(lambda: shm.exists() and shm.read_text().strip(), 20, what="the /dev/shm size")) == 64 * 2**20
    assert not Path(mount_at).exists()  # only the Worker sees the mountPath (in its private /tmp)
    log = wait_for(lambda: (t := rt.read_log("rlark-system", "mnt-rollout-1")) and "FOO=" in t and t, 10, what="log")
    assert "FOO=bar" in log and "HEAD=127.0.0.1" in log and "PORT=6379" not in log
    info = rt.pod_info("mnt-rollout-1")
    assert info["node"] in ("n-a", "n-b") and pods["mnt-rollout-1"].ip == "127.0.0.1"

    # exec: a login shell in the Worker's namespaces, env and working directory
    stream = rt.exec("rlark-system", "mnt-rollout-1")
    stream.resize(30, 100)
    stream.write(f"echo RANK=$RLINF_NODE_RANK; pwd; cat {mount_at}/hello.txt; hostname; exit 5\n".encode())
    out = b""
    while (chunk := stream.read(2.0)) != b"":
        out += chunk or b""
    stream.close()
    text = out.decode(errors="replace")
    assert "RANK=5" in text
    assert info["workdir"] in text
    assert "written by mnt-rollout-" in text
    assert "mnt-rollout-1" in text
    assert stream.exit_code == 5

    metrics = rt.pod_metrics("rlark-system", "mnt")
    assert set(metrics) == {"mnt-rollout-0", "mnt-rollout-1"}
    assert all(v["memory"] > 0 and v["cpu"] >= 0 for v in metrics.values())

    pids = {p["pid"]: launcher.namespace_members(p["pid"]) for p in rt._call("list_pods", job="mnt")}
    assert all(len(members) >= 3 for members in pids.values())  # unshare, bash (PID 1), sleep
    rt.scale_task("rlark-system", "mnt-rollout", 0)
    wait_for(lambda: not rt.list_pods("rlark-system", "mnt"), 10, what="scale to 0 within 10 s")
    assert not any(pid_alive(p) for members in pids.values() for p in members)
    assert (host_dir / "hello.txt").exists() and (claim_dir / "p.txt").exists()  # storage outlives the pods
    rt.delete_task("rlark-system", "mnt-rollout", delete_storage=True)
    wait_for(lambda: not claim_dir.exists(), 10, what="storage deleted")
    assert not Path(mount_at).parent.exists()  # the mount point lived in the Worker's private /tmp


def test_supervisor_restart_adopts_workers_and_stop_leaves_nothing(tmp_path):
    root = tmp_path / "root"
    first = SupervisorProcess(root).start()
    rt = first.runtime(NODES)
    rt.apply_task(sleeper("keep", selector={"pool": "head"}))
    pod = wait_for(lambda: (p := rt._call("list_pods", job="keep")) and p[0]["pid"] and p[0], 10, what="pid")
    wait_for(lambda: rt.pod_info("keep-header-0")["ns_pid"], 10, what="namespace init")
    members = [pod["pid"], rt.pod_info("keep-header-0")["ns_pid"]]  # unshare and PID 1 of the Worker
    second = SupervisorProcess(root).start(wait=False)  # waits for the state directory's lock
    time.sleep(2)
    assert second.proc.poll() is None
    first.stop(signal.SIGKILL)  # crash: the Worker keeps running, the waiting supervisor takes over
    assert all(pid_alive(p) for p in members)
    try:

        def listed():
            try:
                return rt._call("list_pods", job="keep")[0]
            except RuntimeFailure:
                return None

        again = wait_for(lambda: (p := listed()) and p["pid"] and p, 30, what="second supervisor answering")
        assert again["pid"] == pod["pid"] and again["uid"] == pod["uid"] and again["phase"] == "Running"
    finally:
        second.stop(signal.SIGTERM)  # a clean stop leaves no Worker process behind
    assert not any(pid_alive(p) for p in members)
    third = SupervisorProcess(root).start()
    try:
        recreated = wait_for(lambda: (p := rt._call("list_pods", job="keep")) and p[0]["pid"] and p[0], 10, what="pod")
        assert recreated["uid"] != pod["uid"]  # desired state survived; the pod is a new instance
        rt.delete_task("rlark-system", "keep-header")
        wait_for(lambda: not rt._call("list_pods", job="keep"), 15, what="deleted")
        assert not pid_alive(recreated["pid"])
    finally:
        third.stop()


def test_tail_reads_last_lines(tmp_path):
    path = tmp_path / "log"
    path.write_bytes(b"".join(f"line {i}\n".encode() for i in range(100000)))
    with open(path, "rb") as f:
        assert _tail(f, 3) == b"line 99997\nline 99998\nline 99999\n"
    path.write_bytes(b"a\nb")
    with open(path, "rb") as f:
        assert _tail(f, 1) == b"b"
        assert _tail(f, 0) == b""


@pytest.mark.django_db
def test_registry_picks_the_runtime_by_cluster_kind():
    from clusters.models import Cluster
    from clusters.runtime.local import LocalRuntime
    from clusters.runtime.registry import get_runtime

    local = Cluster.objects.create(name="loc", runtime=Cluster.Runtime.LOCAL)
    runtime = get_runtime(local)
    assert isinstance(runtime, LocalRuntime) and runtime.name == "loc"
    kube = Cluster.objects.create(name="kube", runtime=Cluster.Runtime.KUBERNETES)
    try:  # imported lazily; without a kubeconfig the Kubernetes runtime itself may refuse
        assert type(get_runtime(kube)).__name__ == "KubernetesRuntime"
    except RuntimeFailure as exc:
        assert "not available" not in str(exc)
    local.runtime = "other"
    with pytest.raises(RuntimeFailure) as err:
        get_runtime(local)
    assert err.value.reason == "invalid"
