"""The SSH bastion on the whole console (``console_server``: runconsole starts the SSH bastion beside daphne, Celery and
the local supervisor with real Ray Workers), with Debian's real OpenSSH client (``/usr/bin/ssh``, ``scp``,
``sftp``) against the demo job of examples/demo/job.yaml:

- ``ssh -J admin@bastion <pod> hostname`` prints the Pod name, ``echo $RLINF_NODE_RANK`` its rank; a PTY session's
  ``exit 3`` gives 3 back;
- ``scp`` of 20 MB in and back out keeps the checksum; ``sftp ls`` lists the Worker's directory;
- ``ssh -L`` reaches an HTTP server started inside the Worker (``curl`` through the forward);
- Bob's key on the admin's job, a revoked key, an unknown Worker and a stopped job are refused with a message;
- every session leaves an audit row (user, key, job, Worker, start, end, exit code, bytes, forwarded ports);
- stopping the job closes an open session with a message.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from tests.conftest import ARTIFACTS, ROOT, free_port
from tests.e2e.test_e2e_local import Api, wait_for

pytestmark = [pytest.mark.e2e, pytest.mark.ray, pytest.mark.timeout(900)]

JOB = "h12-ssh"
HEADER = f"{JOB}-header-0"
ROLLOUT = f"{JOB}-rollout-1"


def budget(seconds: float) -> float:
    """``seconds`` scaled by the machine's load now (x1 to x4): Ray forms slowly on a busy 2-core CI box."""
    return seconds * min(4.0, max(1.0, os.getloadavg()[0] / (os.cpu_count() or 1)))


if not shutil.which("ssh"):
    pytest.skip("Debian openssh-client is not installed", allow_module_level=True)


class Client:
    """The real OpenSSH client with a key of its own and a config naming the bastion (what `rlark ssh-config`
    writes): ``-F`` reaches the ProxyJump child too, unlike ``-i``/``-o``."""

    def __init__(self, tmp: Path, user: str, port: int) -> None:
        self.tmp = tmp
        self.user = user
        self.port = port
        self.key = tmp / f"id_{user}"
        subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(self.key)], check=True)
        self.public = (tmp / f"id_{user}.pub").read_text().strip()
        self.config = tmp / f"config_{user}"
        self.config.write_text(
            "Host *\n"
            f"  IdentityFile {self.key}\n"
            "  IdentitiesOnly yes\n"
            f"  UserKnownHostsFile {tmp / 'known_hosts'}\n"
            "  StrictHostKeyChecking accept-new\n"
            "  BatchMode yes\n"
            "  ConnectTimeout 20\n"
            "  ServerAliveInterval 15\n"
        )

    @property
    def jump(self) -> str:
        return f"{self.user}@127.0.0.1:{self.port}"

    def ssh(self, *args: str, stdin: bytes | None = None, timeout: float = 90) -> subprocess.CompletedProcess:
        return subprocess.run(
            ["ssh", "-F", str(self.config), "-J", self.jump, *args],
            input=stdin,
            capture_output=True,
            timeout=timeout,
        )

    def tool(self, name: str, *args: str, timeout: float = 180) -> subprocess.CompletedProcess:
        return subprocess.run(
            [name, "-F", str(self.config), "-J", self.jump, *args], capture_output=True, timeout=timeout
        )


def _manage_py(server, code: str) -> str:
    return server.manage("shell", "-c", code).stdout


def _add_key(server, username: str, public: str, staff: bool = False) -> None:
    _manage_py(
        server,
        "from django.contrib.auth import get_user_model\n"
        "from sshkeys.services import add_key\n"
        f"u, _ = get_user_model().objects.get_or_create(username={username!r})\n"
        f"add_key(u, 'test', {public!r})\n",
    )


RAY_ATTEMPTS = 3  # job starts allowed for the Ray cluster to form (see wait_for_ray)


def wait_for_ray(api: Api) -> None:
    """Until the job is Running: every Worker Running and the Ray cluster formed (the run script started), so no
    Worker restarts under the tests. On a loaded 2-core machine a Ray worker's ``ray start`` can miss the head's
    registration in GCS ("No node info found for head node in GCS") and the job fails before it ever ran: that is
    Ray forming, not what these tests check, so the job is started again, at most ``RAY_ATTEMPTS`` times in all;
    any other end fails at once."""
    for attempt in range(1, RAY_ATTEMPTS + 1):

        def formed() -> str:
            code, body = api.call("GET", f"/jobs/{JOB}/")
            assert code == 200, body
            status = body["status"]
            if status["phase"] in ("Failed", "Succeeded"):
                assert status["phase"] == "Failed" and "Ray" in status["message"], f"job ended: {status}"
                return "failed: " + status["message"]
            pods = {w.get("pod"): w.get("phase") for w in status.get("workers") or []}
            ready = status["phase"] == "Running" and len(pods) == 3 and set(pods.values()) == {"Running"}
            return "formed" if ready else ""

        what = f"the job Running with every Worker Running (Ray formed), start {attempt} of {RAY_ATTEMPTS}"
        outcome = wait_for(formed, budget(150), what, interval=1)
        if outcome == "formed":
            return
        print(f"{JOB}: Ray did not form ({outcome[:300]}); starting the job again")
        code, body = api.call("POST", f"/jobs/{JOB}/start/")
        assert code in (200, 202), body
    raise AssertionError(f"Ray did not form in {RAY_ATTEMPTS} starts of {JOB}")


@pytest.fixture(scope="module")
def bastion(console_server, tmp_path_factory):
    out = console_server.manage(
        "shell",
        "-c",
        "from django.contrib.auth import get_user_model\n"
        "from accounts.authentication import issue_token\n"
        "u = get_user_model().objects.get(username='admin')\n"
        "print('KEY=' + issue_token(u, 'h12-ssh')[1])\n",
    )
    api = Api(console_server, next(line[4:] for line in out.stdout.splitlines() if line.startswith("KEY=")))
    tmp = tmp_path_factory.mktemp("h12-ssh")
    output = tmp / "output"
    output.mkdir()
    output.chmod(0o1777)
    document = yaml.safe_load((ROOT / "examples/demo/job.yaml").read_text())
    document["metadata"]["name"] = JOB
    header = document["spec"]["tasks"][0]
    header["kubernetes"]["workload"]["template"]["spec"]["volumes"][0]["hostPath"]["path"] = str(output)
    header["runScript"] = "sleep 100000"  # the Workers only need to run: no training load on a busy machine
    header["kubernetes"]["workload"]["template"]["spec"]["containers"][0].pop("resources", None)
    code, body = api.call("POST", "/jobs/", document)
    assert code == 201, body
    admin = Client(tmp, "admin", console_server.ssh_port)
    _add_key(console_server, "admin", admin.public)

    wait_for_ray(api)
    yield console_server, api, admin, tmp
    ARTIFACTS.mkdir(exist_ok=True)
    for pod in (HEADER, ROLLOUT):  # what the Workers said, for a failure's post-mortem
        code, text = api.call("GET", f"/jobs/{JOB}/logs/?tail=200&pod={pod}", raw=True)
        (ARTIFACTS / f"ssh-{pod}.log").write_text(f"{code}\n{text}")
    api.call("DELETE", f"/jobs/{JOB}/")


def _rows(server) -> list[dict]:
    out = _manage_py(
        server,
        "import json\nfrom sshgate.models import SSHSession\n"
        "print(json.dumps([dict(user=r.username, key=r.key_fingerprint, job=r.job, worker=r.worker,"
        " started=r.started_at.isoformat(), ended=r.ended_at.isoformat() if r.ended_at else None,"
        " exit_code=r.exit_code, bytes_in=r.bytes_in, bytes_out=r.bytes_out, ports=r.forwarded_ports,"
        " reason=r.end_reason) for r in SSHSession.objects.order_by('pk')]))\n",
    )
    return json.loads(out.strip().splitlines()[-1])


def _fingerprint(public: str) -> str:
    import base64

    blob = base64.b64decode(public.split()[1])
    return "SHA256:" + base64.b64encode(hashlib.sha256(blob).digest()).decode().rstrip("=")


def test_shell_and_exec_through_the_bastion(bastion):
    server, _api, admin, _tmp = bastion
    first = admin.ssh(ROLLOUT, "hostname; echo rank=$RLINF_NODE_RANK")
    assert first.returncode == 0, first.stderr.decode()
    assert first.stdout.decode().split() == [ROLLOUT, "rank=2"]  # Header rank 0, rollout-0 rank 1
    header = admin.ssh(HEADER, "echo rank=$RLINF_NODE_RANK; echo to-stderr >&2; exit 7")
    assert header.returncode == 7
    assert header.stdout == b"rank=0\n" and b"to-stderr" in header.stderr
    piped = admin.ssh(ROLLOUT, "sha256sum", stdin=b"x" * 300_000)  # stdin with end-of-file, no PTY
    assert piped.stdout.decode().split()[0] == hashlib.sha256(b"x" * 300_000).hexdigest()
    pty = admin.ssh("-tt", ROLLOUT, stdin=b"echo tty=$(tty | cut -c1-8) cols=$(tput cols)\nexit 3\n")
    assert pty.returncode == 3, pty.stderr.decode()
    assert b"tty=/dev/pts" in pty.stdout
    one = admin.ssh("-tt", HEADER, "exit 5")
    assert one.returncode == 5

    # Every session this test ran has its row closed with its exit code, the PTY session whose command exits at
    # once (`exit 5`, 0 bytes, over before its row was written) included.
    def ran_closed() -> bool:
        rows = _rows(server)
        done = {r["exit_code"] for r in rows if r["ended"]}
        return {0, 7, 3, 5} <= done and all(r["ended"] for r in rows)

    try:
        wait_for(ran_closed, budget(20), "the session rows closed")
    except AssertionError as exc:
        raise AssertionError(f"{exc}: open rows {[r for r in _rows(server) if not r['ended']]}") from None
    rows = _rows(server)
    assert len(rows) >= 5
    by_code = {r["exit_code"]: r for r in rows}
    assert {0, 7, 3, 5} <= set(by_code)
    assert by_code[5]["worker"] == HEADER and by_code[5]["started"] < by_code[5]["ended"]
    row = by_code[7]
    assert row["user"] == "admin" and row["job"] == JOB and row["worker"] == HEADER
    assert row["key"] == _fingerprint(admin.public)
    assert row["started"] < row["ended"] and row["bytes_out"] > 0
    assert by_code[0]["bytes_in"] >= 0
    assert all("sha256sum" not in json.dumps(r) for r in rows)  # commands are never recorded


def test_scp_and_sftp(bastion, tmp_path):
    _server, _api, admin, _tmp = bastion
    data = os.urandom(20 * 1024 * 1024)
    src = tmp_path / "big.bin"
    src.write_bytes(data)
    up = admin.tool("scp", "-q", str(src), f"{HEADER}:/tmp/h12-big.bin")
    assert up.returncode == 0, up.stderr.decode()
    back = tmp_path / "back.bin"
    down = admin.tool("scp", "-q", f"{HEADER}:/tmp/h12-big.bin", str(back))
    assert down.returncode == 0, down.stderr.decode()
    assert hashlib.sha256(back.read_bytes()).hexdigest() == hashlib.sha256(data).hexdigest()
    inside = admin.ssh(HEADER, "sha256sum /tmp/h12-big.bin")
    assert inside.stdout.decode().split()[0] == hashlib.sha256(data).hexdigest()
    legacy = admin.tool("scp", "-O", "-q", f"{HEADER}:/tmp/h12-big.bin", str(tmp_path / "legacy.bin"))
    assert legacy.returncode == 0, legacy.stderr.decode()
    assert (tmp_path / "legacy.bin").read_bytes() == data
    batch = tmp_path / "batch"
    batch.write_text("cd /tmp\nls -l h12-big.bin\npwd\n")
    listing = admin.tool("sftp", "-b", str(batch), HEADER)
    assert listing.returncode == 0, listing.stderr.decode()
    text = listing.stdout.decode()
    assert "h12-big.bin" in text and str(len(data)) in text and "/tmp" in text
    admin.ssh(HEADER, "rm -f /tmp/h12-big.bin")


def test_local_forward_to_a_server_in_the_worker(bastion, tmp_path):
    _server, _api, admin, _tmp = bastion
    inner = free_port()
    (tmp_path / "www").mkdir()
    start = admin.ssh(
        ROLLOUT,
        f"mkdir -p /tmp/h12-www && echo hello-from-$(hostname) > /tmp/h12-www/index.html && "
        f"cd /tmp/h12-www && (setsid python3 -m http.server {inner} --bind 127.0.0.1 >/dev/null 2>&1 &) ; sleep 1",
    )
    assert start.returncode == 0, start.stderr.decode()
    local = free_port()
    forward = subprocess.Popen(
        ["ssh", "-F", str(admin.config), "-J", admin.jump, "-N", "-L", f"{local}:localhost:{inner}", ROLLOUT],
        stderr=subprocess.PIPE,
    )
    try:

        def answer() -> str:
            got = subprocess.run(
                ["curl", "-s", "--max-time", "5", f"http://127.0.0.1:{local}/index.html"], capture_output=True
            )
            return got.stdout.decode()

        assert wait_for(answer, budget(30), "the forwarded HTTP answer").strip() == f"hello-from-{ROLLOUT}"
    finally:
        forward.terminate()
        forward.wait(timeout=10)
        admin.ssh(ROLLOUT, f"pkill -f 'http.server {inner}' || true")
    wait_for(lambda: any(inner in (r["ports"] or []) for r in _rows(_server)), budget(20), "the forwarded port audited")


def test_local_forward_reaches_only_the_workers_own_ports(bastion):
    """``ssh -L`` through a Worker reaches that Worker's own ports, never the host's loopback (the console's web
    tier listens there): the Worker has a network namespace of its own (docs/security.md)."""
    server, _api, admin, _tmp = bastion
    inner = free_port()
    start = admin.ssh(
        HEADER,
        f"mkdir -p /tmp/own-www && echo own-$(hostname) > /tmp/own-www/index.html && "
        f"cd /tmp/own-www && (setsid python3 -m http.server {inner} --bind 127.0.0.1 >/dev/null 2>&1 &) ; sleep 1",
    )
    assert start.returncode == 0, start.stderr.decode()
    own, console = free_port(), free_port()
    forward = subprocess.Popen(
        [
            "ssh", "-F", str(admin.config), "-J", admin.jump, "-N",
            "-L", f"{own}:localhost:{inner}", "-L", f"{console}:localhost:{server.port}", HEADER,
        ],
        stderr=subprocess.PIPE,
    )  # fmt: skip

    def get(port: int, path: str) -> str:
        got = subprocess.run(["curl", "-s", "--max-time", "5", f"http://127.0.0.1:{port}{path}"], capture_output=True)
        return got.stdout.decode()

    try:
        assert wait_for(lambda: get(own, "/index.html"), budget(30), "the Worker's own port").strip() == f"own-{HEADER}"
        for _ in range(3):  # the same forward, to the console's port on "localhost": the Worker's loopback has none
            assert "csrfmiddlewaretoken" not in get(console, "/login/")
    finally:
        forward.terminate()
        forward.wait(timeout=10)
        admin.ssh(HEADER, f"pkill -f 'http.server {inner}' || true")


def test_commands_are_never_logged(bastion):
    """The audit rows never record commands (README), and neither does the console's log: asyncssh's own INFO
    line ("Command: ...") is kept out, since a command line may carry a secret."""
    server, _api, admin, _tmp = bastion
    marker = "rlark-not-for-logs-$((6 * 7))"
    done = admin.ssh(HEADER, f"echo {marker}")
    assert done.returncode == 0 and b"rlark-not-for-logs-42" in done.stdout, done.stderr.decode()
    assert marker not in server.log_path.read_text(errors="replace")


def test_denials(bastion):
    server, _api, admin, tmp = bastion
    bob = Client(tmp, "bob", admin.port)
    _add_key(server, "bob", bob.public)
    refused = bob.ssh(HEADER, "true")
    assert refused.returncode == 255
    assert f"permission denied: no Worker {HEADER} that you may reach" in refused.stderr.decode()
    unknown = admin.ssh(f"{JOB}-rollout-9", "true")
    assert unknown.returncode == 255 and f"has no Worker {JOB}-rollout-9" in unknown.stderr.decode()
    nobody = admin.ssh("no-such-job-header-0", "true")
    assert "permission denied: no Worker no-such-job-header-0" in nobody.stderr.decode()
    # a revoked key: works, then is deleted on the SSH keys page and stops working at once
    carol = Client(tmp, "carol", admin.port)
    _add_key(server, "admin", carol.public)
    carol.user = "admin"
    assert carol.ssh(HEADER, "true").returncode == 0
    blob = carol.public.split()[1]
    delete = f"from sshkeys.models import SSHPublicKey as K\nK.objects.filter(key__contains={blob!r}).delete()"
    _manage_py(server, delete)
    revoked = carol.ssh(HEADER, "true")
    assert revoked.returncode == 255
    err = revoked.stderr.decode()
    assert "Permission denied (publickey)" in err and "not a registered SSH key of admin" in err


def _rlark(server, api, *args: str) -> subprocess.CompletedProcess:
    """The ``rlark`` CLI of this checkout, as a user with an API token runs it."""
    return subprocess.run(
        [sys.executable, "-c", "import sys; from rlark_cli.main import main; sys.exit(main())", *args],
        cwd=ROOT,
        env={**os.environ, "RLARK_URL": server.url, "RLARK_TOKEN": api.token},
        capture_output=True,
        timeout=120,
    )


def test_host_keys_come_from_the_console_on_a_fresh_setup(bastion, tmp_path):
    """A user with nothing but a registered key and an API token: ``rlark ssh-config`` writes the bastion's and the
    Workers' host keys into a known_hosts file and a config that checks them strictly on both hops, so plain
    ``ssh <pod>`` works in batch mode with no "yes" to a fingerprint; ``rlark ssh`` does the same by itself. The
    trap it avoids: ``ssh -o UserKnownHostsFile=...`` reaches only the last hop of ``-J``, never the jump."""
    server, api, admin, _tmp = bastion
    known = tmp_path / "fresh" / "known_hosts"
    config = _rlark(server, api, "ssh-config", "--job", JOB, "--known-hosts", str(known), "-i", str(admin.key))
    assert config.returncode == 0, config.stderr.decode()
    (tmp_path / "config").write_text(config.stdout.decode())
    lines = known.read_text().splitlines()
    assert lines[0].startswith(f"[127.0.0.1]:{admin.port} ssh-ed25519 ")
    assert {line.split()[0] for line in lines[1:]} == {HEADER, f"{JOB}-rollout-0", ROLLOUT}
    assert known.stat().st_mode & 0o777 == 0o600

    plain = ["ssh", "-F", str(tmp_path / "config"), "-o", "BatchMode=yes"]
    ran = subprocess.run([*plain, ROLLOUT, "hostname"], capture_output=True, timeout=90)
    assert ran.returncode == 0 and ran.stdout.decode().strip() == ROLLOUT, ran.stderr.decode()
    assert b"Permanently added" not in ran.stderr  # nothing trusted on first use: both keys were known
    assert known.read_text().splitlines() == lines

    # a Worker key that is not the one the console published is refused (strict checking on the inner hop)
    known.write_text(f"{lines[0]}\n{ROLLOUT} {' '.join(admin.public.split()[:2])}\n")
    forged = subprocess.run([*plain, ROLLOUT, "true"], capture_output=True, timeout=90)
    assert forged.returncode == 255 and b"REMOTE HOST IDENTIFICATION HAS CHANGED" in forged.stderr

    # the trap: -o options reach only the last hop of -J; the jump hop asks about its unknown key (no terminal here)
    known.write_text("\n".join(lines) + "\n")  # both hops' right keys: only the jump hop's lookup can fail
    only_o = ["-o", f"UserKnownHostsFile={known}", "-o", "StrictHostKeyChecking=yes", "-o", "BatchMode=yes"]
    trap = subprocess.run(
        ["ssh", "-F", "/dev/null", *only_o, "-i", str(admin.key), "-J", admin.jump, ROLLOUT, "true"],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        timeout=90,
        start_new_session=True,  # no controlling terminal: the jump hop cannot prompt
    )
    assert trap.returncode == 255 and b"Host key verification failed" in trap.stderr

    # rlark ssh: writes the keys itself and names the bastion hop with a ProxyCommand carrying its options
    known.unlink()
    via_cli = _rlark(
        server,
        api,
        "ssh",
        "--known-hosts",
        str(known),
        "-i",
        str(admin.key),
        "--ssh-arg=-oBatchMode=yes",
        JOB,
        "rollout-1",
        "hostname",
    )
    assert via_cli.returncode == 0, via_cli.stderr.decode()
    assert via_cli.stdout.decode().strip() == ROLLOUT and b"Permanently added" not in via_cli.stderr


def test_stopping_the_job_closes_sessions_with_a_message(bastion):
    server, api, admin, _tmp = bastion
    session = subprocess.Popen(
        ["ssh", "-F", str(admin.config), "-J", admin.jump, ROLLOUT, "echo started; sleep 600"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert session.stdout.readline() == b"started\n"
    code, body = api.call("POST", f"/jobs/{JOB}/stop/")
    assert code in (200, 202), body
    _out, err = session.communicate(timeout=60)
    assert session.returncode != 0
    assert f"job {JOB} was stopped" in err.decode() or f"Worker {ROLLOUT} is" in err.decode()
    later = admin.ssh(ROLLOUT, "true")
    assert later.returncode == 255 and f"job {JOB} is stopped" in later.stderr.decode()
    row = _rows(server)[-1]
    assert row["ended"] and ("stopped" in row["reason"] or "gone" in row["reason"])


def test_bastion_itself_explains_ssh_j(bastion):
    _server, _api, admin, _tmp = bastion
    direct = subprocess.run(
        ["ssh", "-F", str(admin.config), "-p", str(admin.port), "admin@127.0.0.1", "true"],
        capture_output=True,
        timeout=60,
    )
    assert direct.returncode == 1 and b"ssh -J admin@127.0.0.1" in direct.stderr
    with socket.create_connection(("127.0.0.1", admin.port), timeout=5) as s:
        assert s.recv(64).startswith(b"SSH-2.0-")
    time.sleep(0)


@pytest.mark.browser
def test_workers_tab_and_ssh_keys_page_in_the_browser(bastion, page):
    """The Workers tab's ready-to-copy command runs as shown; the SSH keys page's fingerprint is the one the
    client recorded in known_hosts. Screenshots in zh and en (test-artifacts/ssh-*.png)."""
    from playwright.sync_api import expect

    from tests.conftest import E2E_ADMIN_PASSWORD

    server, api, admin, tmp = bastion
    if api.call("GET", f"/jobs/{JOB}/")[1]["stopped"]:  # the stop test ran before (browser tests run last)
        code, body = api.call("POST", f"/jobs/{JOB}/start/")
        assert code in (200, 202), body
    wait_for_ray(api)
    ARTIFACTS.mkdir(exist_ok=True)
    for lang in ("zh-hans", "en"):
        page.context.clear_cookies()
        page.context.add_cookies([{"name": "django_language", "value": lang, "url": server.url}])
        page.goto(server.url + "/login/")
        page.fill("input[name=username]", "admin")
        page.fill("input[name=password]", E2E_ADMIN_PASSWORD)
        page.click("button[type=submit]")
        page.wait_for_load_state()
        page.goto(f"{server.url}/jobs/{JOB}/?tab=workers")
        command = page.locator(f'[data-testid="ssh-command-{ROLLOUT}"] code')
        expect(command).to_have_text(f"ssh -J admin@127.0.0.1:{admin.port} {ROLLOUT}")
        shown = command.inner_text().split()  # read here: the page moves on to the SSH keys page below
        page.screenshot(path=str(ARTIFACTS / f"ssh-workers-tab-{lang}.png"), full_page=True)
        page.goto(f"{server.url}/ssh-keys/")
        fingerprint = page.locator('[data-testid="ssh-bastion-fingerprint"]').inner_text()
        page.locator('[data-testid="ssh-bastion-card"]').scroll_into_view_if_needed()
        page.screenshot(path=str(ARTIFACTS / f"ssh-keys-page-{lang}.png"), full_page=True)
    ran = subprocess.run([*shown[:1], "-F", str(admin.config), *shown[1:], "hostname"], capture_output=True, timeout=90)
    assert ran.stdout.decode().strip() == ROLLOUT, ran.stderr.decode()
    scan = subprocess.run(
        ["ssh-keygen", "-l", "-F", f"[127.0.0.1]:{admin.port}", "-f", str(tmp / "known_hosts")],
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert fingerprint in scan.stdout
