"""The console side of the SSH bastion: the Workers tab's ``ssh -J`` command, who is connected now, the SSH
keys page's flow and host key fingerprint (zh and en), ``GET /api/v1/ssh/`` with the job policy, ``rlark ssh-config``
and the Worker choice of ``rlark ssh``, and the access decisions (registered keys only, a deleted key at once)."""

from __future__ import annotations

import asyncssh
import pytest
from rest_framework.test import APIClient

from accounts.authentication import issue_token
from rlark_cli.ssh import pick_worker, proxy_command, ssh_config_text, write_known_hosts
from sshgate import access, hostkeys, sessions
from sshkeys.services import add_key
from tests.jobs.test_job_pages import fake, running, submit  # noqa: F401  (fixture)

pytestmark = pytest.mark.django_db


def _public(key: asyncssh.SSHKey) -> str:
    return " ".join(key.export_public_key().decode().split()[:2])


def _public_key() -> str:
    return asyncssh.generate_private_key("ssh-ed25519").export_public_key().decode().strip()


def test_workers_tab_shows_the_ssh_command_and_who_is_connected(client, fake, alice, monkeypatch):  # noqa: F811
    monkeypatch.setenv("RLARK_SSH_PORT", "2299")
    job = running(fake, submit(alice))
    client.force_login(alice)
    html = client.get(f"/jobs/{job.name}/?tab=workers", HTTP_ACCEPT_LANGUAGE="en").content.decode()
    assert "ssh -J alice@testserver:2299 demo-rollout-1" in html
    assert "Copy SSH command" in html and "No SSH sessions now." in html
    key = add_key(alice, "laptop", _public_key())
    identity = access.authenticate("alice", key.fingerprint)
    target = access.WorkerTarget(job.name, "demo-header-0", "ns", None, 0)
    row = sessions.open_row(identity, target, "127.0.0.1:5000")
    html = client.get(f"/jobs/{job.name}/?tab=workers", HTTP_ACCEPT_LANGUAGE="zh-hans").content.decode()
    assert "当前 SSH 连接" in html and "alice → demo-header-0" in html and "复制 SSH 命令" in html
    sessions.close_row(row, 0, 10, 20, [8265, 8265], ["forward"], "client disconnected")
    html = client.get(f"/jobs/{job.name}/?tab=workers", HTTP_ACCEPT_LANGUAGE="zh-hans").content.decode()
    assert "当前没有 SSH 会话。" in html


def test_ssh_keys_page_explains_the_flow_with_the_host_key_fingerprint(client, alice, settings, tmp_path):
    settings.VAR_DIR = tmp_path
    client.force_login(alice)
    fingerprint = hostkeys.bastion_fingerprint()
    assert (tmp_path / "ssh" / "bastion_ed25519").stat().st_mode & 0o777 == 0o600
    assert hostkeys.bastion_fingerprint() == fingerprint  # generated once, then kept
    zh = client.get("/ssh-keys/", HTTP_ACCEPT_LANGUAGE="zh-hans").content.decode()
    assert "连接到 Worker" in zh and fingerprint in zh and "ssh -J alice@testserver:2222 &lt;job&gt;-header-0" in zh
    en = client.get("/ssh-keys/", HTTP_ACCEPT_LANGUAGE="en").content.decode()
    assert "Connecting to Workers" in en and "a key deleted here stops working at once" in en and fingerprint in en


def test_api_lists_only_reachable_workers_and_feeds_the_cli(fake, alice, bob, settings, tmp_path):  # noqa: F811
    settings.VAR_DIR = tmp_path / "var"
    job = running(fake, submit(alice))
    api = APIClient()
    api.credentials(HTTP_AUTHORIZATION=f"Token {issue_token(alice, 'cli')[1]}")
    body = api.get("/api/v1/ssh/").json()
    assert body["jump"] == "alice@testserver:2222" and body["host_key_fingerprint"].startswith("SHA256:")
    pods = [w["pod"] for w in body["workers"]]
    assert pods == ["demo-header-0", "demo-rollout-0", "demo-rollout-1"]
    assert pick_worker(body["workers"], job.name, "")["pod"] == "demo-header-0"
    assert pick_worker(body["workers"], job.name, "rollout-1")["pod"] == "demo-rollout-1"
    assert pick_worker(body["workers"], job.name, "rollout-7") is None
    config = ssh_config_text(body, "http://testserver")
    assert "Host rlark-bastion\n    HostName testserver\n    Port 2222\n    User alice" in config
    assert "Host demo-rollout-1\n    ProxyJump rlark-bastion" in config
    # the host keys the bastion presents, as known_hosts lines: the bastion at its port, each Worker on 22
    bastion_line, *worker_lines = body["known_hosts"]
    assert bastion_line == f"[testserver]:2222 {_public(hostkeys.bastion_key())}"
    assert worker_lines == [f"{pod} {_public(hostkeys.worker_key(pod))}" for pod in pods]
    known = tmp_path / "home" / ".ssh" / "rlark_known_hosts"
    known.parent.mkdir(parents=True)
    known.write_text("# mine\nother.example ssh-ed25519 AAAAkeep\ndemo-header-0 ssh-ed25519 AAAAstale\n")
    write_known_hosts(known, body["known_hosts"])
    merged = known.read_text().splitlines()
    assert merged[:2] == ["# mine", "other.example ssh-ed25519 AAAAkeep"] and merged[2:] == body["known_hosts"]
    assert known.stat().st_mode & 0o777 == 0o600
    strict = ssh_config_text(body, "http://testserver", known, "~/.ssh/id_work")
    entry = f"Host demo-rollout-1\n    ProxyJump rlark-bastion\n    User root\n    UserKnownHostsFile {known}\n"
    assert entry in strict
    assert strict.count("StrictHostKeyChecking yes") == 4 and "IdentitiesOnly yes" in strict
    hop = proxy_command("/usr/bin/ssh", body, known, "")
    checked = f"-o UserKnownHostsFile={known} -o StrictHostKeyChecking=yes"
    assert hop == f"/usr/bin/ssh {checked} -p 2222 alice@testserver -W %h:%p"
    other = APIClient()
    other.credentials(HTTP_AUTHORIZATION=f"Token {issue_token(bob, 'cli')[1]}")
    assert other.get(f"/api/v1/ssh/?job={job.name}").status_code == 404
    assert other.get("/api/v1/ssh/").json()["workers"] == []
    assert APIClient().get("/api/v1/ssh/").status_code in (401, 403)


@pytest.fixture
def terminal_runtime(fake):  # noqa: F811
    """The bastion resolves Workers as the WebTerminal does (terminal.services.runtimes): the same fake runtime."""
    from terminal.services.runtimes import use_runtime_factory

    use_runtime_factory(lambda cluster: fake)
    yield fake
    use_runtime_factory(None)


def test_access_uses_registered_keys_and_the_job_policy(terminal_runtime, alice, bob, admin_user):
    job = running(terminal_runtime, submit(alice))
    key = add_key(alice, "laptop", _public_key())
    assert access.authenticate("alice", key.fingerprint) is not None
    assert access.authenticate("bob", key.fingerprint) is None  # Alice's key does not log in as Bob
    bob_key = add_key(bob, "bob", _public_key())
    bob_id = access.authenticate("bob", bob_key.fingerprint)
    with pytest.raises(access.Denied, match="permission denied: no Worker demo-header-0"):
        access.resolve_worker(bob_id, "demo-header-0", 22)
    staff_key = add_key(admin_user, "root", _public_key())
    staff = access.authenticate("root", staff_key.fingerprint)
    assert access.resolve_worker(staff, "demo-header-0", 22).rank == 0  # staff reach every job
    alice_id = access.authenticate("alice", key.fingerprint)
    assert access.resolve_worker(alice_id, "demo-rollout-1", 22).pod == "demo-rollout-1"
    with pytest.raises(access.Denied, match="only port 22"):
        access.resolve_worker(alice_id, "demo-rollout-1", 8265)
    with pytest.raises(access.Denied, match="has no Worker demo-rollout-9"):
        access.resolve_worker(alice_id, "demo-rollout-9", 22)
    job.stopped = True
    job.save()
    with pytest.raises(access.Denied, match="job demo is stopped"):
        access.resolve_worker(alice_id, "demo-header-0", 22)
    key.delete()
    assert access.authenticate("alice", key.fingerprint) is None  # a deleted key stops working at once
    assert not access.still_valid(alice_id)
