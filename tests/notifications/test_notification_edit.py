"""Editing channels and rules (API PATCH and the page's edit forms): owner-only (404), the same checks and SSRF
guard as creating one, nothing half-written on error, a blank secret or URL keeps the stored one, the stored
secret and URL never sent back, an audit entry without secrets."""

from __future__ import annotations

import hashlib
import hmac
import json

import pytest
from django.utils import timezone

from accounts.models import AuditEvent
from jobs.models import Job
from notifications import dispatch, edit, services, tasks
from notifications.models import Channel
from tests.fake_runtime import job_document
from tests.notifications.receiver import Receiver

pytestmark = pytest.mark.django_db

SECRET = "keep-me-secret-42"


@pytest.fixture
def allow_loopback(settings):
    settings.RLARK_NOTIFY_ALLOWED_HOSTS = ["127.0.0.1"]
    settings.CELERY_TASK_ALWAYS_EAGER = True
    settings.RLARK_NOTIFY_TIMEOUT = 2.0


def hook(user, url="http://127.0.0.1:9/h?token=tok123", name="hook") -> Channel:
    return services.create_channel(user, {"name": name, "kind": "webhook", "url": url, "secret": SECRET})


def patch(client, path, data, **extra):
    return client.patch(path, json.dumps(data), content_type="application/json", **extra)


def test_patch_channel_keeps_a_blank_secret_and_never_echoes_it(client, alice, allow_loopback):
    c = hook(alice)
    client.force_login(alice)
    answer = patch(client, f"/api/v1/notifications/channels/{c.pk}/", {"name": "renamed", "secret": "", "url": ""})
    assert answer.status_code == 200, answer.content
    text = answer.content.decode()
    assert SECRET not in text and "tok123" not in text
    assert answer.json()["name"] == "renamed" and answer.json()["has_secret"] is True
    assert answer.json()["url"] == "http://127.0.0.1:9/…"
    c.refresh_from_db()
    assert (c.name, c.secret, c.url) == ("renamed", SECRET, "http://127.0.0.1:9/h?token=tok123")
    answer = patch(client, f"/api/v1/notifications/channels/{c.pk}/", {"secret": "new-secret", "language": "en"})
    assert answer.status_code == 200 and "new-secret" not in answer.content.decode()
    c.refresh_from_db()
    assert (c.secret, c.language) == ("new-secret", "en")
    answer = patch(client, f"/api/v1/notifications/channels/{c.pk}/", {"clear_secret": True})
    assert answer.json()["has_secret"] is False
    event = AuditEvent.objects.filter(action="notify.channel.update").order_by("pk").first()
    assert event.detail["changed"] == ["name"]
    details = json.dumps(list(AuditEvent.objects.values_list("detail", flat=True)))
    assert SECRET not in details and "new-secret" not in details and "tok123" not in details


def test_patch_channel_refuses_the_metadata_address_and_saves_nothing(client, alice, allow_loopback):
    c = hook(alice)
    client.force_login(alice)
    data = {"name": "moved", "url": "https://169.254.169.254/latest/meta-data/"}
    answer = patch(client, f"/api/v1/notifications/channels/{c.pk}/", data)
    assert answer.status_code == 400
    assert answer.json()["code"] == "url_refused" and "169.254.169.254" in answer.json()["detail"]
    answer = patch(client, f"/api/v1/notifications/channels/{c.pk}/", data, HTTP_ACCEPT_LANGUAGE="zh-hans")
    assert "已拒绝" in answer.json()["detail"]
    c.refresh_from_db()
    assert (c.name, c.url) == ("hook", "http://127.0.0.1:9/h?token=tok123")
    other = hook(alice, name="other")
    answer = patch(client, f"/api/v1/notifications/channels/{c.pk}/", {"name": other.name})
    assert answer.status_code == 400 and answer.json()["code"] == "duplicate"
    answer = patch(client, f"/api/v1/notifications/channels/{c.pk}/", {"name": "x" * 65})
    assert answer.status_code == 400 and answer.json()["code"] == "too_long"
    assert not AuditEvent.objects.filter(action="notify.channel.update").exists()


def test_another_users_channel_and_rule_are_404_and_unchanged(client, alice, bob, allow_loopback):
    c = hook(alice)
    rule = services.create_rule(alice, {"channel": c.pk, "events": ["Failed"]})
    client.force_login(bob)
    assert patch(client, f"/api/v1/notifications/channels/{c.pk}/", {"name": "mine"}).status_code == 404
    assert patch(client, f"/api/v1/notifications/rules/{rule.pk}/", {"events": ["Running"]}).status_code == 404
    assert client.get(f"/account/notifications/channel/{c.pk}/edit/").status_code == 404
    assert client.post(f"/account/notifications/rule/{rule.pk}/edit/", {"events": ["Running"]}).status_code == 404
    c.refresh_from_db()
    rule.refresh_from_db()
    assert c.name == "hook" and rule.events == ["Failed"]
    client.logout()
    assert patch(client, f"/api/v1/notifications/rules/{rule.pk}/", {"events": ["Running"]}).status_code in (401, 403)


def test_patch_rule_same_checks_as_create(client, alice, bob, allow_loopback):
    c = hook(alice)
    mail = services.create_channel(alice, {"name": "mail", "kind": "email", "email": "a@example.com"})
    bobs = hook(bob, name="bobs")
    rule = services.create_rule(alice, {"channel": c.pk, "events": ["Failed"]})
    client.force_login(alice)
    url = f"/api/v1/notifications/rules/{rule.pk}/"
    answer = patch(client, url, {"events": ["Running", "pending_long"], "pending_minutes": 30, "channel": mail.pk})
    assert answer.status_code == 200, answer.content
    body = answer.json()
    assert body["events"] == ["Running", "pending_long"] and body["pending_minutes"] == 30
    assert body["channel_name"] == "mail"
    for data, field in (
        ({"events": []}, "events"),
        ({"pending_minutes": 0}, "pending_minutes"),
        ({"pending_minutes": 10081}, "pending_minutes"),
        ({"events": ["log_match"], "log_pattern": ""}, "log_pattern"),
        ({"events": ["log_match"], "log_pattern": "(unclosed"}, "log_pattern"),
        ({"log_pattern": "a" * 501}, "log_pattern"),
        ({"channel": bobs.pk}, "channel"),
    ):
        answer = patch(client, url, data)
        assert answer.status_code == 400 and answer.json()["field"] == field, (data, answer.content)
    rule.refresh_from_db()
    assert (rule.events, rule.pending_minutes, rule.channel_id) == (["Running", "pending_long"], 30, mail.pk)
    answer = patch(client, url, {"enabled": False})
    assert answer.json()["enabled"] is False and answer.json()["events"] == ["Running", "pending_long"]
    event = AuditEvent.objects.filter(action="notify.rule.update").order_by("-pk").first()
    assert event.detail["changed"] == ["enabled"]


def test_a_disabled_rule_sends_nothing_and_a_re_enabled_one_does(alice, allow_loopback):
    job = Job.objects.create(name="demo", owner=alice, spec=job_document("demo"))
    with Receiver() as receiver:
        c = hook(alice, url=receiver.url)
        rule = services.create_rule(alice, {"channel": c.pk, "events": ["Failed"]})
        edit.update_rule(alice, rule, {"enabled": "off"})
        assert dispatch.record([{"job": job.pk, "kind": "phase", "phase": "Failed", "attempt": 1}]) == []
        edit.update_rule(alice, rule, {"enabled": True})
        for pk in dispatch.record([{"job": job.pk, "kind": "phase", "phase": "Failed", "attempt": 2}]):
            tasks.deliver.delay(pk)
    assert len(receiver.requests) == 1 and b"demo" in receiver.requests[0]["body"]


def test_edit_pages_change_a_channel_and_a_job_rule(client, alice, allow_loopback):
    job = Job.objects.create(name="demo", owner=alice, spec=job_document("demo"))
    c = hook(alice)
    rule = services.create_rule(alice, {"channel": c.pk, "events": ["Failed"]}, job=job)
    client.force_login(alice)
    page = client.get(f"/account/notifications/channel/{c.pk}/edit/", HTTP_ACCEPT_LANGUAGE="en").content.decode()
    assert "Edit channel" in page and "http://127.0.0.1:9/…" in page
    assert SECRET not in page and "tok123" not in page
    answer = client.post(
        f"/account/notifications/channel/{c.pk}/edit/",
        {"name": "edited", "url": "https://10.0.0.1/x", "secret": "", "language": "en"},
        HTTP_ACCEPT_LANGUAGE="zh-hans",
    )
    assert answer.status_code == 400 and "已拒绝" in answer.content.decode()
    assert SECRET not in answer.content.decode() and "10.0.0.1/x" not in answer.content.decode()
    c.refresh_from_db()
    assert c.name == "hook"
    answer = client.post(
        f"/account/notifications/channel/{c.pk}/edit/", {"name": "edited", "url": "", "secret": "", "language": "en"}
    )
    assert answer.status_code == 302
    c.refresh_from_db()
    assert (c.name, c.secret, c.language) == ("edited", SECRET, "en")
    listing = client.get("/account/notifications/").content.decode()
    assert "tok123" not in listing and "http://127.0.0.1:9/…" in listing

    tab = client.get("/jobs/demo/notifications/", HTTP_ACCEPT_LANGUAGE="en").content.decode()
    assert f"/account/notifications/rule/{rule.pk}/edit/" in tab
    page = client.get(f"/account/notifications/rule/{rule.pk}/edit/", HTTP_ACCEPT_LANGUAGE="zh-hans")
    assert "编辑规则" in page.content.decode()
    answer = client.post(
        f"/account/notifications/rule/{rule.pk}/edit/",
        {"channel": c.pk, "events": ["log_match"], "pending_minutes": "10", "log_pattern": ""},
        HTTP_ACCEPT_LANGUAGE="en",
    )
    assert answer.status_code == 400 and "Give the log pattern to look for." in answer.content.decode()
    answer = client.post(
        f"/account/notifications/rule/{rule.pk}/edit/",
        {"channel": c.pk, "events": ["log_match", "Succeeded"], "pending_minutes": "10", "log_pattern": "loss=nan"},
    )
    assert answer.status_code == 302 and answer["Location"] == "/jobs/demo/notifications/"
    rule.refresh_from_db()
    assert (rule.events, rule.log_pattern, rule.enabled) == (["log_match", "Succeeded"], "loss=nan", False)
    tab = client.get("/jobs/demo/notifications/", HTTP_ACCEPT_LANGUAGE="en").content.decode()
    assert 'data-testid="notify-rule-off"' in tab


def test_send_a_test_goes_through_the_delivery_path_and_shows_its_status(client, alice, bob, allow_loopback):
    with Receiver() as ok, Receiver([503] * 4) as failing:
        good = hook(alice, url=ok.url, name="good")
        bad = hook(alice, url=failing.url, name="bad")
        client.force_login(bob)
        assert client.post(f"/api/v1/notifications/channels/{good.pk}/test/").status_code == 404
        assert client.post(f"/account/notifications/channel/{good.pk}/test/").status_code == 404
        client.force_login(alice)
        answer = client.post(f"/api/v1/notifications/channels/{good.pk}/test/")
        assert answer.status_code == 202 and answer.json()["test_status"] == "sent", answer.content
        assert SECRET not in answer.content.decode() and ok.url not in answer.content.decode()
        answer = client.post(f"/account/notifications/channel/{bad.pk}/test/", HTTP_ACCEPT_LANGUAGE="en")
        assert answer.status_code == 302
    body = ok.requests[0]["body"]
    ts = ok.requests[0]["headers"]["X-RLark-Timestamp"]
    want = hmac.new(SECRET.encode(), ts.encode() + b"." + body, hashlib.sha256).hexdigest()
    assert ok.requests[0]["headers"]["X-RLark-Signature"] == f"sha256={want}"
    assert "RLark：渠道 good 的测试消息。" in body.decode()  # the channel's language (zh by default)
    assert len(failing.requests) == 4  # the first attempt and 3 retries, as a job's deliveries
    bad.refresh_from_db()
    assert bad.test_status == "failed"
    page = client.get("/account/notifications/", HTTP_ACCEPT_LANGUAGE="en").content.decode()
    assert "the receiver answered HTTP 503" in page and "Send a test" in page
    page = client.get("/account/notifications/", HTTP_ACCEPT_LANGUAGE="zh-hans").content.decode()
    assert "发送测试" in page and "投递失败" in page
    assert AuditEvent.objects.filter(action="notify.channel.test").count() == 2


def test_one_test_at_a_time_per_channel(client, alice, allow_loopback):
    c = hook(alice)
    Channel.objects.filter(pk=c.pk).update(test_status="retrying", test_at=timezone.now())
    client.force_login(alice)
    answer = client.post(f"/api/v1/notifications/channels/{c.pk}/test/", HTTP_ACCEPT_LANGUAGE="en")
    assert answer.status_code == 400 and answer.json()["code"] == "busy"
    assert "already under way" in answer.json()["detail"]
