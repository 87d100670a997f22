"""The SSH bastion and a hostPath volume on a real container, through the console.

- ``ssh -J`` through the bastion into a real container (the real kubelet's ``pods/exec``): a command's output with
  CJK text and its exit code, a PTY whose size follows the client's terminal, ``scp`` both ways with a checksum
  (also checked inside the container), ``sftp``, and ``ssh -L`` to a port the Worker listens on.
- Volumes: the Header's run script writes a checkpoint into a hostPath mount on the real node; the file is on the
  node's filesystem, and the Run check reads it back from inside the running Worker: seed 02 check 5, "output
  persisted and readable", met, with the file's size and sha256.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess

import pytest
from rest_framework.test import APIClient

from sshgate.server import serve_in_thread
from terminal.services.runtimes import use_runtime_factory
from tests.k8s_nodes.jobs import demo_job, pod_logs
from tests.k8s_real.conftest import wait_for
from tests.k8s_real.jobs import running, synced
from tests.k8s_real.test_ssh_bastion_real import _client, _read_until, _window_changes_follow

pytestmark = [pytest.mark.k8s_nodes, pytest.mark.django_db(transaction=True), pytest.mark.timeout(600)]

JOB = "sv"
POD = f"{JOB}-header-0"
# A checkpoint of 3 MiB of known bytes under the hostPath mount, a progress line, then the Worker keeps running.
RUN_SCRIPT = """python - <<'PY'
import hashlib, os
os.makedirs("/data/out", exist_ok=True)
data = hashlib.sha256(b"rlark").digest() * (3 * 2**20 // 32)
with open("/data/out/ckpt-1.bin", "wb") as f:
    f.write(data)
print("checkpoint written", flush=True)
PY
echo "Global Step 1/1"
exec sleep infinity"""
CKPT = hashlib.sha256(b"rlark").digest() * (3 * 2**20 // 32)

if not shutil.which("ssh") or not shutil.which("scp") or not shutil.which("sftp"):
    pytest.skip("Debian openssh-client is not installed", allow_module_level=True)


@pytest.fixture
def volume_job(real_nodes, real_cluster, real_namespace, alice, tmp_path_factory):
    """Header x1 on ``real-0`` with ``/data`` a hostPath directory on the real node (allowed by the cluster)."""
    root = tmp_path_factory.mktemp("node-volumes")
    host = root / real_namespace.name
    real_cluster.allow_host_path = True
    real_cluster.host_path_roots = str(root)
    real_cluster.save(update_fields=["allow_host_path", "host_path_roots"])
    use_runtime_factory(None)  # the real registry: KubernetesRuntime for this cluster
    doc = demo_job(JOB, real_nodes.worker, rollouts=0)
    doc["spec"]["tasks"] = doc["spec"]["tasks"][:1]
    header = doc["spec"]["tasks"][0]
    header["runScript"] = RUN_SCRIPT
    pod_spec = header["kubernetes"]["workload"]["template"]["spec"]
    pod_spec["containers"][0]["volumeMounts"] = [{"name": "data", "mountPath": "/data"}]
    pod_spec["volumes"] = [{"name": "data", "hostPath": {"path": str(host), "type": "DirectoryOrCreate"}}]
    api = APIClient()
    api.force_authenticate(alice)
    resp = api.post("/api/v1/jobs/", doc, format="json")
    assert resp.status_code == 201, resp.content
    wait_for(lambda: running(real_namespace, 1), 120, "the Header Running")
    try:
        wait_for(lambda: "Global Step 1/1" in real_namespace.kubectl("logs", POD, "-c", "main"), 150, "the run script")
    except pytest.fail.Exception as exc:
        raise AssertionError(f"{exc}\n{pod_logs(real_namespace)}") from None
    synced(JOB, lambda j: j.phase == "Running", 60, "job Running")
    yield api, host
    api.delete(f"/api/v1/jobs/{JOB}/")
    wait_for(lambda: not real_namespace.pods(), 90, "the Header gone")
    shutil.rmtree(host, ignore_errors=True)


def test_run_check_reads_the_checkpoint_back_from_the_hostpath_on_the_real_node(volume_job):
    api, host = volume_job
    on_node = host / "out" / "ckpt-1.bin"
    assert on_node.read_bytes() == CKPT  # the container wrote through the mount onto the node's filesystem
    resp = api.put(f"/api/v1/jobs/{JOB}/run-check/", {"output_path": "/data/out"}, format="json")
    assert resp.status_code == 200, resp.content
    sha = hashlib.sha256(CKPT).hexdigest()
    for lang, words in (("en", "readable"), ("zh-hans", "可重新读取")):
        checks = api.get(f"/api/v1/jobs/{JOB}/run-check/", HTTP_ACCEPT_LANGUAGE=lang).json()["checks"]
        five = next(c for c in checks if c["number"] == 5)
        evidence = " ".join(five["evidence"])
        assert five["status"] == "met", five
        assert words in evidence and "/data/out/ckpt-1.bin" in evidence, evidence
        assert str(len(CKPT)) in evidence and sha[:16] in evidence, evidence
    # a path no mount covers is not claimed
    api.put(f"/api/v1/jobs/{JOB}/run-check/", {"output_path": "/tmp/elsewhere"}, format="json")
    checks = api.get(f"/api/v1/jobs/{JOB}/run-check/", HTTP_ACCEPT_LANGUAGE="en").json()["checks"]
    five = next(c for c in checks if c["number"] == 5)
    assert five["status"] != "met" and "no hostPath or PVC mount covers it" in " ".join(five["evidence"]), five


@pytest.fixture
def bastion(settings, tmp_path):
    settings.VAR_DIR = tmp_path / "var"
    gate, stop = serve_in_thread()
    yield gate
    stop()


def test_ssh_scp_sftp_and_forward_into_a_real_container(volume_job, bastion, alice, tmp_path):
    ssh, name = _client(tmp_path, alice)
    jump = ["-J", f"{name}@127.0.0.1:{bastion.port}"]

    def run(*args: str, stdin: bytes | None = None, tool: str = "") -> subprocess.CompletedProcess:
        argv = [tool, *ssh[1:]] if tool else ssh
        return subprocess.run([*argv, *jump, *args], input=stdin, capture_output=True, timeout=120)

    cmd = run(POD, "echo 你好 nodes=$RLARK_TOTAL_NODES host=$(hostname); echo to-stderr >&2; exit 7")
    assert cmd.returncode == 7, cmd.stderr.decode()
    assert cmd.stdout.decode().split() == ["你好", "nodes=1", f"host={POD}"]
    assert b"to-stderr" in cmd.stderr

    data = os.urandom(4 * 2**20)
    src = tmp_path / "up.bin"
    src.write_bytes(data)
    digest = hashlib.sha256(data).hexdigest()
    up = run("-q", str(src), f"{POD}:/tmp/up.bin", tool="scp")
    assert up.returncode == 0, up.stderr.decode()
    inside = run(POD, "sha256sum /tmp/up.bin")
    assert inside.stdout.decode().split()[0] == digest, inside
    back = tmp_path / "back.bin"
    down = run("-q", f"{POD}:/tmp/up.bin", str(back), tool="scp")
    assert down.returncode == 0, down.stderr.decode()
    assert hashlib.sha256(back.read_bytes()).hexdigest() == digest
    batch = tmp_path / "batch"
    batch.write_text(f"cd /data/out\nls -l\nget ckpt-1.bin {tmp_path / 'ckpt.bin'}\n")
    listing = run("-b", str(batch), POD, tool="sftp")
    assert listing.returncode == 0, listing.stderr.decode()
    assert "ckpt-1.bin" in listing.stdout.decode() and str(len(CKPT)) in listing.stdout.decode()
    assert (tmp_path / "ckpt.bin").read_bytes() == CKPT

    # ssh -L to a port the Worker listens on (its own loopback)
    start = run(
        POD,
        "mkdir -p /tmp/www && echo hello-from-$(hostname) > /tmp/www/index.html && cd /tmp/www && "
        "(setsid python3 -m http.server 18765 --bind 127.0.0.1 >/dev/null 2>&1 &) ; sleep 1",
    )
    assert start.returncode == 0, start.stderr.decode()
    local = _free_port()
    forward = subprocess.Popen([*ssh, *jump, "-N", "-L", f"{local}:localhost:18765", POD], stderr=subprocess.PIPE)
    try:

        def answer() -> str | None:
            got = subprocess.run(
                ["curl", "-s", "--max-time", "5", f"http://127.0.0.1:{local}/index.html"], capture_output=True
            )
            return got.stdout.decode().strip() or None

        assert wait_for(answer, 60, "the forwarded HTTP answer") == f"hello-from-{POD}"
    finally:
        forward.terminate()
        forward.wait(timeout=10)

    # an interactive shell: typed CJK text comes back, and the PTY's size follows the client's terminal
    tty = subprocess.Popen([*ssh, *jump, "-tt", POD], stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    try:
        tty.stdin.write("echo 训练=$((6*7))\n".encode())
        tty.stdin.flush()
        assert "训练=42".encode() in _read_until(tty.stdout, "训练=42".encode(), 60)
        tty.stdin.write(b"exit 4\n")
        tty.stdin.close()
        assert tty.wait(timeout=60) == 4
    finally:
        tty.kill()
    _window_changes_follow([*ssh, *jump, "-tt", POD])


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]
