"""The Ray wrapper scripts (clusters/scripts, upstream-rlark 5) run as a local Worker runs them: in a
private user+mount+PID namespace with the scripts at /rlark/scripts (clusters.runtime.local.launcher).
Markers must be byte-identical and in order; failures must leave the matching marker last."""

from __future__ import annotations

import json
import os
import shutil
import signal
import stat
import time
from pathlib import Path

import pytest

from clusters.runtime.local import launcher
from clusters.runtime.local.ports import ray_start_args
from tests.clusters.test_local_runtime_support import (
    LoopbackWatch,
    free_port_block,
    markers_in_order,
    pid_alive,
    wait_for,
)

KEY_A = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOMqqnkVzrm0SdG6UOoqKLsabgH5C9okWi0dh2l9GKJl alice@laptop"
KEY_B = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIKx1y2z3bob0000000000000000000000000000000000 bob@desk"
RAY_MISSING = "Error: Ray CLI is not found. Please ensure Ray is installed."


class Pod:
    def __init__(self, tmp_path: Path, name: str, script: str, env: dict[str, str]) -> None:
        self.dir = tmp_path / name
        self.dir.mkdir(parents=True)
        self.home = self.dir / "home"
        full = launcher.base_env(name)  # HOME=/rlark/home, bound to <pod dir>/home
        full.update({"POD_NAME": name, **env})
        self.log_path = self.dir / "main.log"
        self.proc = launcher.spawn(self.dir, ["bash", f"/rlark/scripts/{script}"], full, [])

    @property
    def log(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    def wait_log(self, text: str, timeout: float) -> None:
        try:
            wait_for(lambda: text in self.log, timeout, what=repr(text))
        except AssertionError as exc:
            raise AssertionError(f"{exc}; exit={self.proc.poll()}; log:\n{self.log[-3000:]}") from None

    def wait(self, timeout: float = 60) -> int:
        return self.proc.wait(timeout=timeout)

    def kill(self) -> None:
        launcher.kill_group(self.proc.pid, grace=5, wait_pid=self.proc)


def last_line(text: str) -> str:
    return [line for line in text.splitlines() if line.strip()][-1]


def test_head_prepare_script_failure_stops_before_ray(tmp_path):
    pod = Pod(
        tmp_path,
        "j-header-0",
        "ray_head.sh",
        {"RLARK_NODE_RANK_START": "0", "RLARK_PREPARE_SCRIPT": "echo preparing\n(exit 7)\necho never"},
    )
    assert pod.wait() == 7
    log = pod.log
    assert markers_in_order(log, ["RLINF_NODE_RANK: 0", "Executing prepare script...", "preparing"]) == []
    assert "never" not in log
    assert "Waiting for" not in log and "Ray cluster is ready" not in log
    assert last_line(log) == "preparing"


@pytest.mark.parametrize(
    ("script", "name", "rank_start", "rank", "ssh_marker"),
    [
        (
            "ray_head.sh",
            "j-header-0",
            "0",
            "0",
            "SSH public key injected into authorized_keys (fallback: no rlark-sshd binary)",
        ),
        ("ray_worker.sh", "j-rollout-1", "2", "3", "SSH public key injected into authorized_keys"),
    ],
)
def test_no_ray_on_path_and_ssh_keys(tmp_path, script, name, rank_start, rank, ssh_marker):
    path = "/usr/bin:/bin"
    assert shutil.which("ray", path=path) is None
    pod = Pod(
        tmp_path,
        name,
        script,
        {
            "PATH": path,
            "RLARK_NODE_RANK_START": rank_start,
            "RLARK_SSH_PUBLIC_KEYS": f"{KEY_A}\n{KEY_B}\n",
            "RLARK_PREPARE_SCRIPT": "echo prepared",
            "RLARK_HEAD_ADDRESS": "127.0.0.1",
        },
    )
    assert pod.wait() == 1
    log = pod.log
    expected = [f"RLINF_NODE_RANK: {rank}", ssh_marker, "Executing prepare script...", "prepared", RAY_MISSING]
    assert markers_in_order(log, expected) == []
    assert last_line(log) == RAY_MISSING
    assert "Connecting to Ray head" not in log and "Waiting for" not in log
    ssh = pod.home / ".ssh"
    keys = (ssh / "authorized_keys").read_text().splitlines()
    assert keys == [KEY_A, KEY_B]
    assert stat.S_IMODE(ssh.stat().st_mode) == 0o700
    assert stat.S_IMODE((ssh / "authorized_keys").stat().st_mode) == 0o600


def test_worker_cannot_reach_head_keeps_waiting(tmp_path):
    port = free_port_block(size=1, start=39000)  # nothing listens there
    pod = Pod(
        tmp_path,
        "j-rollout-0",
        "ray_worker.sh",
        {"RLARK_NODE_RANK_START": "1", "RLARK_HEAD_ADDRESS": "127.0.0.1", "RLARK_RAY_PORT": str(port)},
    )
    try:
        pod.wait_log("(attempt 3)", 90)
        log = pod.log
        assert (
            markers_in_order(
                log,
                [
                    "RLINF_NODE_RANK: 1",
                    f"Connecting to Ray head at 127.0.0.1:{port}...",
                    "HEAD IP: 127.0.0.1",
                    f"Waiting for head to be reachable at 127.0.0.1:{port}... (attempt 1)",
                    f"Waiting for head to be reachable at 127.0.0.1:{port}... (attempt 3)",
                ],
            )
            == []
        )
        assert "Head is reachable" not in log
        assert last_line(log).startswith(f"Waiting for head to be reachable at 127.0.0.1:{port}...")
        assert pod.proc.poll() is None  # still waiting (upstream: 120 attempts)
    finally:
        pod.kill()
    assert launcher.namespace_members(pod.proc.pid) == []


@pytest.mark.ray
def test_head_check_failure_run_script_exit_code_and_idle(tmp_path):
    """A head whose cluster never reaches the required size warns and proceeds; the run script's
    exit code is recorded, the container stays alive, and SIGTERM stops Ray (markers in order)."""
    base = free_port_block(size=128)
    args = ray_start_args(base + 64, head=True, gpus=0)
    pod = Pod(
        tmp_path,
        "j-header-0",
        "ray_head.sh",
        {
            "RLARK_NODE_RANK_START": "0",
            "RLARK_RAY_PORT": str(base),
            "RLARK_NODE_IP": "127.0.0.1",
            "RLARK_TOTAL_NODES": "2",
            "RLARK_RAY_CHECK_TIMEOUT": "4",
            "RLARK_RAY_CHECK_INTERVAL": "1",
            "RLARK_RUN_SCRIPT": "echo training on rank $RLINF_NODE_RANK\n(exit 3)\necho never",
            "RLARK_LOCAL_RAY_START_ARGS": json.dumps(args),
        },
    )
    with LoopbackWatch(lambda: set(launcher.namespace_members(pod.proc.pid))) as watch:
        try:
            pod.wait_log("Run script exited with code", 300)
            time.sleep(2)
            assert pod.proc.poll() is None, "the head must idle after the run script"
            log = pod.log
            assert (
                markers_in_order(
                    log,
                    [
                        "RLINF_NODE_RANK: 0",
                        "Waiting for 2 nodes to join the Ray cluster...",
                        "Starting Ray cluster status check...",
                        "Waiting for cluster to have at least 2 nodes.",
                        f"Ray Address: 127.0.0.1:{base}",
                        "Found 1 total nodes, 1 of which are alive.",
                        "Current node count: 1",
                        "Error: Cluster did not become ready within",
                        "Ray cluster check failed.",
                        "Warning: Ray cluster check failed, proceeding anyway.",
                        "Ray cluster is ready. Printing cluster information:\n" + "=" * 42 + "\n",
                        "=" * 42 + "\nExecuting run script...",
                        "training on rank 0",
                        "Run script exited with code 3",
                    ],
                )
                == []
            )
            assert "never" not in log
            assert "Local node IP" in log and "127.0.0.1" in log
        finally:
            os.killpg(pod.proc.pid, signal.SIGTERM)
            pod.wait_log("Stopping Ray cluster...", 90)
            members = launcher.namespace_members(pod.proc.pid)
            pod.kill()
    assert last_line(pod.log) == "Stopping Ray cluster..." or "Stopping Ray cluster..." in pod.log
    assert not any(pid_alive(p) for p in members if p != pod.proc.pid)
    assert watch.samples > 3 and watch.checked > 0
    assert watch.bad == set(), f"non-loopback connections: {watch.bad}"
