"""A slow Ray start is not a failed job (docs/security.md, "Supervision"; the wrapper scripts), on real Ray.

Every Worker's first ``ray start`` fails the way a loaded machine makes it fail (Ray's "The current node timed out
during startup ... the GCS has become overloaded", exit 1), through a ``ray`` first on the job's PATH that fails
once per Worker and then runs the real one. The Header and the rollout Worker start Ray again, the cluster forms
with 2 nodes and the run script exits 0. A Worker stopped on purpose (TERM) is not started again; the Ray logs
of its run are kept until the job is deleted.
"""

from __future__ import annotations

import contextlib
import io
import shutil
import tarfile
import tempfile
from pathlib import Path

import pytest

from clusters.runtime.local import launcher
from tests.clusters.test_local_runtime_support import SupervisorProcess, manifest, nodes_spec, wait_for

pytestmark = [pytest.mark.ray, pytest.mark.timeout(900)]

NODES = nodes_spec(("n1", {}, {"cpu": 16, "memory": "64Gi"}))
FAIL_ONCE = """#!/bin/bash
if [ "$1" = start ] && [ ! -e "$HOME/.ray-failed-once" ]; then
    touch "$HOME/.ray-failed-once"
    echo "Exception: The current node timed out during startup. This could happen because some of the raylet" \\
        "failed to startup or the GCS has become overloaded." >&2
    exit 1
fi
exec /rlark/scripts/local/ray "$@"
"""
RUN = """python -u -c 'import ray
ray.init(address="auto", logging_level="ERROR")
print("NODES", len([n for n in ray.nodes() if n["Alive"]]), flush=True)'"""


@pytest.fixture
def fail_once_bin():
    """A directory outside /tmp (so the Workers see it at the same path) with the failing-once ``ray``."""
    base = Path("/var/lib/rlark-tests")
    base.mkdir(parents=True, exist_ok=True)
    d = Path(tempfile.mkdtemp(prefix="ray-start-", dir=base))
    d.chmod(0o755)
    (d / "ray").write_text(FAIL_ONCE)
    (d / "ray").chmod(0o755)
    try:
        yield d
    finally:
        shutil.rmtree(d, ignore_errors=True)


def log_of(root: Path, pod: str, name: str = "main.log") -> str:
    path = root / "pods" / "c1" / pod / name
    return path.read_text(errors="replace") if path.exists() else ""


def test_a_failed_ray_start_is_started_again_and_a_stop_is_not(tmp_path, fail_once_bin):
    root = tmp_path / "root"
    sup = SupervisorProcess(root, RLARK_LOCAL_JOB_NETWORKS="1").start()
    rt = sup.runtime(NODES)
    env = [{"name": "PATH", "value": f"{fail_once_bin}:{launcher.default_path()}"}]
    try:
        rt.apply_task(manifest("slow", "header", head=True, total=2, run=RUN, env=env))
        rt.apply_task(manifest("slow", "rollout", head=False, rank_start=1, total=2, env=env))
        wait_for(lambda: "Run script exited" in log_of(root, "slow-header-0"), 600, 1, what="the run script")
        head, rollout = log_of(root, "slow-header-0"), log_of(root, "slow-rollout-0")
        assert "Run script exited with code 0" in head and "NODES 2" in head, head[-3000:]
        assert "Ray head did not start; starting it again (attempt 2 of 3)" in head, head[-3000:]
        assert "Ray worker did not start (exit code 1); starting it again (attempt 2 of 3)" in rollout, rollout[-3000:]
        pods = rt.list_pods("rlark-system", "slow")
        assert [p.container.restart_count for p in pods] == [0, 0]  # retried inside, never restarted

        # a stop on purpose: TERM to the wrapper (PID 1 of the Worker); its container then restarts
        stream = rt.exec("rlark-system", "slow-rollout-0", ["bash", "-c", "kill -TERM 1"])
        while stream.read(2.0) != b"":
            pass
        stream.close()
        wait_for(lambda: "Stopping Ray worker" in log_of(root, "slow-rollout-0", "main.previous.log"), 120, 1)
        stopped = log_of(root, "slow-rollout-0", "main.previous.log")
        after_stop = stopped.split("Stopping Ray worker", 1)[1]
        assert "starting it again" not in after_stop, stopped[-2000:]
        # the run that ended with 143 keeps its Ray logs (raylet.out and the rest) until the job is deleted
        kept = root / "ray-logs" / "c1" / "slow" / "slow-rollout-0"
        wait_for(lambda: list(kept.glob("run-*/session_*/raylet.out")), 60, what="the kept Ray logs")
        assert rt.kept_ray_logs_bytes("rlark-system", "slow", "slow-rollout-0") > 0
        bundle = b"".join(rt.stream_ray_logs("rlark-system", "slow", "slow-rollout-0", max_bytes=64 << 20))
        with tarfile.open(fileobj=io.BytesIO(bundle), mode="r:gz") as tar:
            assert any(m.name.endswith("/raylet.out") for m in tar.getmembers())  # what the log archive keeps
        for task in ("slow-header", "slow-rollout"):
            rt.delete_task("rlark-system", task)
        wait_for(lambda: not (root / "ray-logs" / "c1" / "slow").exists(), 60, what="the kept logs deleted")
    finally:
        for task in ("slow-header", "slow-rollout"):
            with contextlib.suppress(Exception):
                rt.delete_task("rlark-system", task)
        sup.stop()
