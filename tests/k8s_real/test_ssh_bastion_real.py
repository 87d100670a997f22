"""Issue 12 against the REAL Kubernetes control plane: ``ssh -J`` (Debian's OpenSSH client) through the console's
bastion reaches a Worker Pod through the API server's ``pods/exec`` (kwok's ``Exec`` runs the commands in a scratch
directory on this machine), with the ``rlark-console`` ServiceAccount's RBAC. Commands without a PTY (the agent
path: stdin, stdout, stderr) and with a PTY (window size) both work; another user's key is refused.

Known kwok limits: its exec server reports no exit code, so exit codes are asserted on the local runtime
(tests/sshgate/test_ssh_bastion_local.py); it closes the exec's PTY without draining it when the process ends, so
output written just before that end can be lost (the agent waits for the bastion's ``y`` after its exit frame for
this; the PTY check reads its answer before typing ``exit``)."""

from __future__ import annotations

import os
import selectors
import shutil
import subprocess
import time

import asyncssh
import pytest
from rest_framework.test import APIClient

from sshgate.server import serve_in_thread
from sshkeys.services import add_key
from terminal.services.runtimes import use_runtime_factory
from tests.k8s_real.conftest import wait_for
from tests.k8s_real.jobs import document, running, synced, task

pytestmark = [pytest.mark.k8s_real, pytest.mark.django_db(transaction=True), pytest.mark.timeout(240)]
POD = "ssh-a-header-0"

if not shutil.which("ssh"):
    pytest.skip("Debian openssh-client is not installed", allow_module_level=True)


@pytest.fixture
def bastion(settings, tmp_path):
    """The bastion in a thread of its own (its own event loop), on a free loopback port."""
    settings.VAR_DIR = tmp_path / "var"
    gate, stop = serve_in_thread()
    yield gate
    stop()


def _client(tmp_path, user) -> tuple[list[str], str]:
    key = asyncssh.generate_private_key("ssh-ed25519")
    path = tmp_path / f"id_{user.username}"
    path.write_bytes(key.export_private_key())
    path.chmod(0o600)
    config = tmp_path / f"config_{user.username}"
    config.write_text(
        f"Host *\n  IdentityFile {path}\n  IdentitiesOnly yes\n  UserKnownHostsFile {tmp_path / 'known_hosts'}\n"
        "  StrictHostKeyChecking accept-new\n  BatchMode yes\n  ConnectTimeout 20\n"
    )
    add_key(user, "test", key.export_public_key().decode())
    return ["ssh", "-F", str(config)], user.username


def _read_until(pipe, marker: bytes, timeout: float) -> bytes:
    """What ``pipe`` gave until ``marker`` appeared (AssertionError with the output after ``timeout`` s)."""
    out = b""
    deadline = time.monotonic() + timeout
    with selectors.DefaultSelector() as sel:
        sel.register(pipe, selectors.EVENT_READ)
        while marker not in out:
            left = deadline - time.monotonic()
            assert left > 0, f"no {marker!r} within {timeout} s: {out[-500:]!r}"
            if sel.select(left):
                data = os.read(pipe.fileno(), 65536)
                assert data, f"the session ended before {marker!r}: {out[-500:]!r}"
                out += data
    return out


def test_ssh_j_through_pods_exec(k8s_cluster, k8s_namespace, alice, bob, tmp_path, bastion):
    use_runtime_factory(None)  # the real registry: KubernetesRuntime for this cluster
    api = APIClient()
    api.force_authenticate(alice)
    doc = document("ssh-a", task("header", head=True, replicas=1, selector={"kubernetes.io/hostname": "cpu-0"}))
    assert api.post("/api/v1/jobs/", doc, format="json").status_code == 201
    wait_for(lambda: running(k8s_namespace, 1), 60, "header Running")
    workdir = tmp_path / "worker-root"
    k8s_namespace.allow_exec(POD, workdir)
    synced("ssh-a", lambda j: any(p.phase == "Running" for p in j.tasks.first().pods.all()), 30, "Pod synced")
    ssh, name = _client(tmp_path, alice)
    jump = ["-J", f"{name}@127.0.0.1:{bastion.port}"]

    def run(*args: str, stdin: bytes | None = None) -> subprocess.CompletedProcess:
        return subprocess.run([*ssh, *jump, *args], input=stdin, capture_output=True, timeout=90)

    piped = run(POD, "echo rlark-$((6*7)); pwd; echo err >&2; cat", stdin=b"from-stdin\n")
    assert piped.returncode == 0, piped.stderr.decode()
    assert piped.stdout.decode().splitlines() == ["rlark-42", str(workdir), "from-stdin"]
    assert b"err" in piped.stderr
    # an interactive shell on the exec TTY, typed into like a user does: the answer is read before `exit`
    # (kwok's exec closes its PTY without draining it when the process ends, tests/README.md)
    pty = subprocess.Popen([*ssh, *jump, "-tt", POD], stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    try:
        pty.stdin.write(b"echo tty=$(tty | cut -c1-8)\n")
        pty.stdin.flush()
        assert b"tty=/dev/pts" in _read_until(pty.stdout, b"tty=/dev/pts", 60)
        pty.stdin.write(b"exit\n")
        pty.stdin.close()
        assert pty.wait(timeout=60) == 0
    finally:
        pty.kill()
    other, bob_name = _client(tmp_path, bob)
    refused = subprocess.run(
        [*other, "-J", f"{bob_name}@127.0.0.1:{bastion.port}", POD, "true"], capture_output=True, timeout=90
    )
    assert refused.returncode == 255 and f"permission denied: no Worker {POD}" in refused.stderr.decode()
