"""Users, their keys and tokens in the back office: staff add keys for others (403 for
the rest, 400 for an unknown user, nothing stored), whole authorized_keys pastes all-or-nothing with the failing
lines named, deactivation revokes tokens, ends login sessions and closes open WebTerminal sessions at once."""

from __future__ import annotations

import asyncio
import json

import pytest
from asgiref.sync import sync_to_async
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ed25519

from accounts import services as token_services
from accounts import users
from accounts.models import APIToken, AuditEvent
from accounts.signals import user_deactivated
from sshkeys.models import SSHPublicKey


def _pub(comment: str = "") -> str:
    raw = (
        ed25519.Ed25519PrivateKey.generate()
        .public_key()
        .public_bytes(serialization.Encoding.OpenSSH, serialization.PublicFormat.OpenSSH)
        .decode()
    )
    return f"{raw} {comment}".strip()


def _post(client, body):
    return client.post("/api/v1/ssh-keys/", json.dumps(body), content_type="application/json")


@pytest.mark.django_db
def test_staff_add_a_key_for_another_user(client, admin_user, alice):
    client.force_login(admin_user)
    resp = _post(client, {"name": "alice-laptop", "key": _pub(), "user": "alice"})
    assert resp.status_code == 201, resp.content
    assert resp.json()["owner"] == "alice"
    key = SSHPublicKey.objects.get(name="alice-laptop")
    assert key.owner == alice
    event = AuditEvent.objects.get(action="ssh_key.create")
    assert event.actor == admin_user and event.detail["owner"] == "alice"


@pytest.mark.django_db
def test_non_staff_naming_another_user_is_refused_not_ignored(client, alice, bob):
    client.force_login(alice)
    resp = _post(client, {"name": "sneaky", "key": _pub(), "user": "bob"})
    assert resp.status_code == 403
    assert not SSHPublicKey.objects.exists()  # neither bob's nor (silently) alice's
    assert _post(client, {"name": "mine", "key": _pub(), "user": "alice"}).status_code == 201  # own name is fine


@pytest.mark.django_db
def test_unknown_or_inactive_user_is_400_and_nothing_stored(client, admin_user, bob):
    client.force_login(admin_user)
    resp = _post(client, {"name": "x", "key": _pub(), "user": "nobody"})
    assert resp.status_code == 400 and resp.json()["code"] == "user_invalid"
    bob.is_active = False
    bob.save()
    assert _post(client, {"name": "x", "key": _pub(), "user": "bob"}).status_code == 400
    assert not SSHPublicKey.objects.exists()


@pytest.mark.django_db
def test_authorized_keys_file_adds_every_key(client, alice):
    client.force_login(alice)
    text = f"# my keys\n{_pub('laptop')}\n\n{_pub('desktop')}\n{_pub()}\n"
    resp = _post(client, {"key": text})
    assert resp.status_code == 201, resp.content
    assert resp.json()["count"] == 3
    assert sorted(SSHPublicKey.objects.values_list("name", flat=True)) == ["desktop", "ed25519-3", "laptop"]


@pytest.mark.django_db
def test_authorized_keys_file_with_bad_lines_names_them_and_stores_nothing(client, alice):
    client.force_login(alice)
    good = _pub("good")
    text = "\n".join([good, "ssh-ed25519 not*base64", _pub("other"), good, "ssh-dss AAAAB3NzaC1kc3MAAACBAP"])
    resp = _post(client, {"key": text})
    assert resp.status_code == 400
    body = resp.json()
    assert body["code"] == "ssh_key_lines_invalid"
    assert [(e["line"], e["code"]) for e in body["errors"]] == [
        (2, "ssh_key_malformed"),
        (4, "ssh_key_duplicate"),
        (5, "ssh_key_type"),
    ]
    assert "1" in body["errors"][1]["detail"]  # "same key as line 1"
    assert not SSHPublicKey.objects.exists()  # never some stored and others dropped


@pytest.mark.django_db
def test_private_key_paste_still_says_private(client, alice):
    client.force_login(alice)
    text = "-----BEGIN OPENSSH PRIVATE KEY-----\nb3Blbn\n-----END OPENSSH PRIVATE KEY-----"
    assert _post(client, {"key": text}).json()["code"] == "ssh_key_private"


# ---------------------------------------------------------------- users


@pytest.mark.django_db
def test_deactivate_revokes_tokens_ends_sessions_and_sends_the_signal(client, admin_user, alice):
    _token, key = token_services.create_token(alice, "ci")
    alice_client = type(client)()
    alice_client.force_login(alice)
    assert alice_client.get("/api/v1/ssh-keys/").status_code == 200
    assert type(client)().get("/api/v1/ssh-keys/", HTTP_AUTHORIZATION=f"Bearer {key}").status_code == 200
    heard = []

    def listener(sender, user, actor=None, **kwargs):
        heard.append((user.username, actor.username))

    user_deactivated.connect(listener)
    try:
        client.force_login(admin_user)
        resp = client.post("/admin/auth/user/", {"action": "deactivate", "_selected_action": [alice.pk]}, follow=True)
        assert resp.status_code == 200
    finally:
        user_deactivated.disconnect(listener)
    alice.refresh_from_db()
    assert not alice.is_active
    assert APIToken.objects.get(user=alice).revoked
    assert heard == [("alice", admin_user.username)]
    assert alice_client.get("/api/v1/ssh-keys/").status_code in (401, 403)  # her browser session is gone
    anonymous = type(client)()
    assert anonymous.get("/api/v1/ssh-keys/", HTTP_AUTHORIZATION=f"Bearer {key}").status_code in (401, 403)
    event = AuditEvent.objects.get(action="user.deactivate")
    assert event.detail["tokens"] == 1 and event.detail["sessions"] >= 1


@pytest.mark.django_db
def test_reset_password_and_user_page_shows_jobs_keys_tokens(client, admin_user, alice):
    from jobs.models import Job

    Job.objects.create(name="alice-run", owner=alice, spec={})
    SSHPublicKey.objects.create(owner=alice, name="alice-key", key="k", fingerprint="SHA256:abc")
    token_services.create_token(alice, "alice-token")
    client.force_login(admin_user)
    page = client.get(f"/admin/auth/user/{alice.pk}/change/").content.decode()
    assert "alice-run" in page and "alice-key" in page and "alice-token" in page
    client.cookies["django_language"] = "en"
    resp = client.post("/admin/auth/user/", {"action": "reset_passwords", "_selected_action": [alice.pk]}, follow=True)
    text = resp.content.decode()
    marker = "alice: "
    assert marker in text
    password = text.split(marker, 1)[1].split(" ", 1)[0]
    alice.refresh_from_db()
    assert alice.check_password(password)
    assert "password" not in json.dumps(AuditEvent.objects.get(action="user.password_reset").detail)


@pytest.mark.django_db
def test_create_user_validates_the_password(admin_user):
    from django.core.exceptions import ValidationError

    with pytest.raises(ValidationError):
        users.create_user("carol", "123", actor=admin_user)
    user = users.create_user("carol", "a-long-enough-Passw0rd", actor=admin_user)
    assert user.check_password("a-long-enough-Passw0rd")


@pytest.mark.django_db(transaction=True)
@pytest.mark.asyncio
@pytest.mark.timeout(60)
async def test_deactivation_closes_open_terminal_sessions_at_once(tmp_path, alice, admin_user, monkeypatch, settings):
    # the consumer runs in this process (Channels' communicator); with REDIS_URL (CI) the Redis layer's
    # connections outlive the test's event loop and time out, which is not what this test is about
    settings.CHANNEL_LAYERS = {"default": {"BACKEND": "channels.layers.InMemoryChannelLayer"}}
    from terminal.consumers import TerminalConsumer
    from terminal.demo_runtime import DirRuntime, seed_job
    from terminal.services import sessions
    from terminal.services.runtimes import use_runtime_factory
    from tests.terminal_support import session_cookie, ws_communicator

    monkeypatch.setattr(TerminalConsumer, "grace_period", 0)
    rt = DirRuntime(tmp_path / "rt")
    use_runtime_factory(lambda cluster: rt)
    try:
        await sync_to_async(seed_job)(rt, alice)
        comm = ws_communicator("/ws/terminal/jobs/demo/pods/demo-actor-1/", await sync_to_async(session_cookie)(alice))
        connected, _ = await comm.connect()
        assert connected
        texts = []
        while not any(t.get("type") == "session" for t in texts):
            msg = await asyncio.wait_for(comm.output_queue.get(), 20)
            if msg.get("text"):
                texts.append(json.loads(msg["text"]))
        await sync_to_async(users.deactivate_user)(alice, actor=admin_user)
        closed = None
        while closed is None:  # well before the 30 s periodic re-check
            msg = await asyncio.wait_for(comm.output_queue.get(), 5)
            if msg["type"] == "websocket.close":
                closed = msg
            elif msg.get("text"):
                texts.append(json.loads(msg["text"]))
        assert closed["code"] == 4401
        assert any(t.get("type") == "closing" and "account disabled" in t.get("reason", "") for t in texts)
        await comm.wait(10)  # the consumer ends: the shell and its session record are gone, none left parked
        assert not [s for s in sessions.active_sessions() if s.job == "demo"]
    finally:
        for stream in rt.execs:
            stream.close()
        use_runtime_factory(None)
