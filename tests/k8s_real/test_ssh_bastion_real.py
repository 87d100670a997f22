"""The SSH bastion against the REAL Kubernetes control plane: ``ssh -J`` (Debian's OpenSSH client) through the console's
bastion reaches a Worker Pod through the API server's ``pods/exec`` (kwok's ``Exec`` runs the commands in a scratch
directory on this machine), with the ``rlark-console`` ServiceAccount's RBAC. Commands without a PTY (the agent
path: stdin, stdout, stderr) and with a PTY (its size, and a resize that follows the client's terminal) both work;
another user's key is refused; an idle session gets keepalives; stopping the bastion closes an open session with a
message and ends its audit row.

Known kwok limits: its exec server reports no exit code, so exit codes are asserted on the local runtime
(tests/sshgate/test_ssh_bastion_local.py); it closes the exec's PTY without draining it when the process ends, so
output written just before that end can be lost (the agent waits for the bastion's ``y`` after its exit frame for
this; the PTY check reads its answer before typing ``exit``)."""

from __future__ import annotations

import fcntl
import os
import pty
import selectors
import shutil
import signal
import struct
import subprocess
import termios
import time

import asyncssh
import pytest
from rest_framework.test import APIClient

from sshgate.models import SSHSession
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
    yield gate, stop
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


def test_ssh_j_through_pods_exec(k8s_cluster, k8s_namespace, alice, bob, tmp_path, bastion, monkeypatch):
    bastion, stop_console = bastion
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
    _window_changes_follow([*ssh, *jump, "-tt", POD])
    monkeypatch.setenv("RLARK_SSH_KEEPALIVE", "1")  # read at each connection
    idle = run("-v", POD, "sleep 4")
    assert idle.returncode == 0 and b"rtype keepalive@openssh.com" in idle.stderr  # the bastion's keepalive

    # stopping the console closes an open session with a message, and its audit row
    session = subprocess.Popen(
        [*ssh, *jump, POD, "echo started; sleep 600"], stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    try:
        assert _read_until(session.stdout, b"started\n", 60)
        stop_console()
        _out, err = session.communicate(timeout=60)
    finally:
        session.kill()
    assert session.returncode == 255 and b"rlark: the console is stopping; closing the session" in err
    row = SSHSession.objects.order_by("pk").last()
    assert row.ended_at is not None and row.end_reason == "the console is stopping" and row.worker == POD


def _window_changes_follow(argv: list[str]) -> None:
    """``ssh -tt`` on a terminal of 30x100: the Worker's PTY has that size, and a resize of the client's terminal
    (SIGWINCH) reaches it (``stty size`` answers ``rows cols``; the typed line never contains the answer)."""
    pid, fd = pty.fork()
    if pid == 0:  # pragma: no cover (child)
        fcntl.ioctl(0, termios.TIOCSWINSZ, struct.pack("HHHH", 30, 100, 0, 0))
        os.execvp(argv[0], argv)
    try:
        with os.fdopen(os.dup(fd), "rb", buffering=0) as out:
            os.write(fd, b"stty size | tr ' ' x\n")
            assert b"30x100" in _read_until(out, b"30x100", 60)
            fcntl.ioctl(fd, termios.TIOCSWINSZ, struct.pack("HHHH", 40, 120, 0, 0))
            os.kill(pid, signal.SIGWINCH)
            deadline = time.monotonic() + 60
            while True:  # the window-change message races the next line: ask until the new size shows
                os.write(fd, b"stty size | tr ' ' x\n")
                try:
                    assert b"40x120" in _read_until(out, b"40x120", 3)
                    break
                except AssertionError:
                    assert time.monotonic() < deadline, "the new window size did not reach the Worker in 60 s"
            os.write(fd, b"exit\n")
    finally:
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
        os.close(fd)
