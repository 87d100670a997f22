"""Host paths are allowed, not just possible, in the runtimes themselves (clusters/host_paths.py, docs/security.md).

The local supervisor (real, root) refuses a system directory, the console's files, or a ``subPath`` that leads out
of its volume (``..`` or a symlink a Worker left there) before it creates anything,
and makes a missing ``DirectoryOrCreate`` directory as the job's uid with mode 0750; the console side of both
runtimes refuses a path below none of the cluster's roots before a single object is written.
"""

from __future__ import annotations

import dataclasses
import os
import shutil
import stat
import types
from pathlib import Path

import pytest

from clusters.host_paths import HostPathRefused, check_cluster_host_paths
from clusters.runtime.base import RuntimeFailure
from tests.clusters.test_local_runtime_support import SupervisorProcess, manifest, nodes_spec, wait_for

NODES = nodes_spec(("n1", {}, {"cpu": 8}))
SLEEP = ["bash", "-c", "echo started; trap 'exit 0' TERM; sleep 600 & wait"]


def host_path_task(job: str, path: str, sub_path: str = "") -> object:
    volumes = [{"name": "out", "hostPath": {"path": path, "type": "DirectoryOrCreate"}}]
    mounts = [{"name": "out", "mountPath": "/output", **({"subPath": sub_path} if sub_path else {})}]
    return manifest(job, "header", head=True, command=SLEEP, volumes=volumes, mounts=mounts)


@pytest.mark.skipif(os.geteuid() != 0, reason="the job's uid is what a root supervisor has")
def test_the_supervisor_creates_nothing_it_refuses_and_makes_the_rest_as_the_job(tmp_path):
    sup = SupervisorProcess(tmp_path / "root").start()
    rt = sup.runtime(NODES)  # a test double of a cluster: the always-refused rule only, in the supervisor
    refused = [Path("/root") / f"rlark-test-{os.getpid()}", tmp_path / "root" / "stolen", Path("/etc/rlark-test")]
    allowed = Path("/srv") / f"rlark-test-{os.getpid()}" / "out"
    allowed.parent.mkdir(parents=True)  # an administrator's root, root-owned 0755
    (allowed.parent / "lnk").symlink_to("/etc")  # as a Worker could leave it in its own directory
    escapes = [("../../../etc/rlark-sub-a", Path("/etc/rlark-sub-a")), ("lnk/rlark-sub-b", Path("/etc/rlark-sub-b"))]
    try:
        tasks = [host_path_task(f"bad{i}", str(path)) for i, path in enumerate(refused)]
        tasks += [host_path_task(f"bad{3 + i}", str(allowed.parent), sub) for i, (sub, _) in enumerate(escapes)]
        refused += [target for _, target in escapes]
        for task in tasks:  # straight to the supervisor, past the console's own check
            rt._call("apply_task", with_nodes=True, manifest=dataclasses.asdict(task))
        rt.apply_task(host_path_task("good", str(allowed)))
        wait_for(lambda: "started" in rt.read_log("rlark-system", "good-header-0"), 30, what="the allowed Worker")
        for i, path in enumerate(refused):
            pod = wait_for(
                lambda i=i: next((p for p in rt.list_pods("rlark-system", f"bad{i}") if p.container.message), None),
                30,
                what=f"the refusal of {path}",
            )
            assert pod.container.reason == "CreateContainerError" and "refused" in pod.container.message, pod
            assert not path.exists(), f"{path} was created although refused"
        info = allowed.stat()
        ns_pid = wait_for(lambda: rt.pod_info("good-header-0")["ns_pid"], 20, what="the Worker's namespaces")
        worker_uid = int(Path(f"/proc/{ns_pid}/status").read_text().split("\nUid:")[1].split()[0])
        assert stat.S_IMODE(info.st_mode) == 0o750, oct(info.st_mode)
        assert info.st_uid == worker_uid != 0, (info.st_uid, worker_uid)
    finally:
        for job in ("bad0", "bad1", "bad2", "bad3", "bad4", "good"):
            rt.delete_task("rlark-system", f"{job}-header")
        sup.stop()
        shutil.rmtree(allowed.parent, ignore_errors=True)


def test_a_path_below_no_root_is_refused_before_anything_is_written(tmp_path, monkeypatch):
    """The console side of the runtimes (``LocalRuntime.apply_task``, ``KubernetesRuntime.apply_task``)."""
    cluster = types.SimpleNamespace(name="c1", allow_host_path=True, host_path_roots=str(tmp_path / "ok"))
    task = host_path_task("j", str(tmp_path / "elsewhere"))
    with pytest.raises(HostPathRefused) as refused:
        check_cluster_host_paths(cluster, task.workload)
    assert refused.value.code == "host_path_outside_roots"
    check_cluster_host_paths(cluster, host_path_task("j", str(tmp_path / "ok" / "run")).workload)
    cluster.allow_host_path = False
    with pytest.raises(HostPathRefused):
        check_cluster_host_paths(cluster, host_path_task("j", str(tmp_path / "ok" / "run")).workload)

    from clusters.runtime.kubernetes import KubernetesRuntime, workloads

    calls = []
    k8s = KubernetesRuntime.__new__(KubernetesRuntime)
    k8s.kube = types.SimpleNamespace(cluster=types.SimpleNamespace(name="c1", allow_host_path=True, host_path_roots=""))
    monkeypatch.setattr(workloads, "apply", lambda kube, obj, *a, **kw: calls.append(obj))  # nothing reaches the API
    with pytest.raises(RuntimeFailure):
        k8s.apply_task(task)
    assert calls == []
