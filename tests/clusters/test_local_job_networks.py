"""Every local job in a network of its own (docs/security.md, "Local runtime"), on real Ray with a root supervisor.

Job A (a Header and a rollout Worker) forms its Ray cluster across its two network namespaces; from A's run script,
job B's GCS and dashboard agent, the host's loopback listeners, and a host service listening on every address are
out of reach, and so is another job's TensorBoard as the console runs it, while the console's published port (the
network-domain relay) answers. The console itself still
reaches A's Workers (a TCP connection to the Header's GCS, an exec). No namespace, veth or guard chain is left.
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import subprocess
import threading
from pathlib import Path

import pytest

from clusters.runtime.local import netns
from tests.clusters.test_local_runtime_support import SupervisorProcess, manifest, nodes_spec, wait_for

pytestmark = [
    pytest.mark.ray,
    pytest.mark.timeout(900),
    pytest.mark.skipif(os.geteuid() != 0, reason="job networks are what a root supervisor makes"),
]

NODES = nodes_spec(("n1", {}, {"cpu": 16, "memory": "64Gi"}))

PROBE = r"""
python -u - <<'EOF'
import json, os, socket
def reach(host, port):
    try:
        with socket.create_connection((host, int(port)), timeout=3):
            return "open"
    except OSError as exc:
        return type(exc).__name__
e = os.environ
result = {
    "b_gcs": reach(e["B_IP"], 6379),
    "b_agent": reach(e["B_IP"], e["B_AGENT_PORT"]),
    "host_loopback": reach("127.0.0.1", e["HOST_LOOPBACK_PORT"]),
    "host_any": reach(e["CONSOLE_ADDRESS"], e["HOST_ANY_PORT"]),
    "relay": reach(e["CONSOLE_ADDRESS"], e["RELAY_PORT"]),
    "tensorboard": reach("127.0.0.1", e["TB_PORT"]),
    "tensorboard_console": reach(e["CONSOLE_ADDRESS"], e["TB_PORT"]),
}
print("NET-RESULT " + json.dumps(result), flush=True)
EOF
python -u -c 'import ray
ray.init(address="auto", logging_level="ERROR")
print("A-NODES", len([n for n in ray.nodes() if n["Alive"]]), flush=True)'
"""


class Listener:
    """A TCP listener on ``host`` that accepts and closes connections until stopped."""

    def __init__(self, host: str) -> None:
        self.sock = socket.socket()
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind((host, 0))
        self.sock.listen(16)
        self.sock.settimeout(0.5)
        self.port = self.sock.getsockname()[1]
        self.stopped = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        while not self.stopped.is_set():
            with contextlib.suppress(OSError):
                conn, _ = self.sock.accept()
                conn.close()

    def stop(self) -> None:
        self.stopped.set()
        self.thread.join(timeout=5)
        self.sock.close()


def log_of(root: Path, pod: str) -> str:
    path = root / "pods" / "c1" / pod / "main.log"
    return path.read_text(errors="replace") if path.exists() else ""


@pytest.mark.django_db
def test_a_job_reaches_its_own_workers_and_the_relay_only(tmp_path, settings):
    from jobs.explain import tensorboard_server

    settings.VAR_DIR = tmp_path / "var"
    (tmp_path / "tb").mkdir()
    tensorboard = tensorboard_server._start(
        "another-job", str(tmp_path / "tb")
    )  # a job's TensorBoard, as the console runs it
    loopback, anywhere, relay = Listener("127.0.0.1"), Listener("0.0.0.0"), Listener("0.0.0.0")
    root = tmp_path / "root"
    sup = SupervisorProcess(root, RLARK_DOMAIN_RELAY_PORT=str(relay.port), RLARK_LOCAL_JOB_NETWORKS="1").start()
    rt = sup.runtime(NODES)
    try:
        rt.apply_task(manifest("jobb", "header", head=True, run="sleep 600"))
        wait_for(lambda: "Executing run script" in log_of(root, "jobb-header-0"), 300, 1, what="job B's Ray head")
        state = json.loads((root / "state.json").read_text())
        b_pod = state["pods"]["c1/jobb-header-0"]
        env = [
            {"name": "B_IP", "value": b_pod["ip"]},
            {"name": "B_AGENT_PORT", "value": str(b_pod["port_base"] + 3)},
            {"name": "HOST_LOOPBACK_PORT", "value": str(loopback.port)},
            {"name": "HOST_ANY_PORT", "value": str(anywhere.port)},
            {"name": "RELAY_PORT", "value": str(relay.port)},
            {"name": "CONSOLE_ADDRESS", "value": netns.CONSOLE_ADDRESS},
            {"name": "TB_PORT", "value": str(tensorboard.port)},
        ]
        rt.apply_task(manifest("joba", "header", head=True, total=2, run=PROBE, env=env))
        rt.apply_task(manifest("joba", "rollout", head=False, rank_start=1, total=2))
        wait_for(lambda: "Run script exited" in log_of(root, "joba-header-0"), 420, 1, what="job A's run script")
        a_log = log_of(root, "joba-header-0")
        assert "Run script exited with code 0" in a_log and "A-NODES 2" in a_log, a_log[-3000:]
        result = json.loads(a_log.split("NET-RESULT ", 1)[1].splitlines()[0])
        assert result["relay"] == "open", result
        for target in ("b_gcs", "b_agent", "host_loopback", "host_any", "tensorboard", "tensorboard_console"):
            assert result[target] != "open", (target, result)

        state = json.loads((root / "state.json").read_text())
        a_ip, b_ip = state["pods"]["c1/joba-header-0"]["ip"], b_pod["ip"]
        assert a_ip.startswith("100.64.") and b_ip.startswith("100.64.")
        assert a_ip.rsplit(".", 1)[0] != b_ip.rsplit(".", 1)[0]  # two networks, not one shared bridge
        with socket.create_connection((b_ip, 6379), timeout=5):
            pass  # the console (the host) reaches a Worker's ports
        stream = rt.exec("rlark-system", "joba-header-0", ["bash", "-c", "echo EXEC-IN-$(hostname)"])
        out = b""
        while (chunk := stream.read(2.0)) != b"":
            out += chunk or b""
        stream.close()
        assert b"EXEC-IN-joba-header-0" in out, out
    finally:
        for task in ("joba-header", "joba-rollout", "jobb-header"):
            with contextlib.suppress(Exception):
                rt.delete_task("rlark-system", task)
        with contextlib.suppress(AssertionError):
            wait_for(lambda: not json.loads((root / "state.json").read_text())["pods"], 60, what="Workers gone")
        sup.stop()
        tensorboard.stop()
        for listener in (loopback, anywhere, relay):
            listener.stop()
    assert not [n for n in netns.list_ours() if "+joba" in n or "+jobb" in n], netns.list_ours()
    if not netns.list_ours():  # the guard goes with the host's last Worker network (of any supervisor)
        chains = subprocess.run(["iptables", "-S"], capture_output=True, text=True, timeout=30).stdout
        assert netns.GUARD_CHAIN not in chains, chains
