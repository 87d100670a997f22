"""Notifications: the SSRF guard at save and send time, the four channels' formats on a real receiver on
127.0.0.1, retries after two 500s, e-mail through Django's locmem backend, and events from the real status sync."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import time

import pytest
from django.core import mail
from django.utils import translation

from jobs.control import controller
from jobs.models import Job, Phase
from jobs.observe.sync import sync_job
from notifications import dispatch, errors, scan, services
from notifications.models import Channel, Delivery, Rule
from tests.fake_runtime import fake_clusters, job_document
from tests.notifications.receiver import Receiver

pytestmark = pytest.mark.django_db

HEAD_READY = [
    "RLINF_NODE_RANK: 0",
    "Waiting for 3 nodes to join the Ray cluster...",
    "Ray cluster is ready. Printing cluster information:",
    "==========================================",
    "Executing run script...",
]


@pytest.fixture
def loopback(settings):
    """The test's settings allow the receiver's host (as an admin would with RLARK_NOTIFY_ALLOWED_HOSTS)."""
    settings.RLARK_NOTIFY_ALLOWED_HOSTS = ["127.0.0.1"]
    settings.CELERY_TASK_ALWAYS_EAGER = True
    settings.RLARK_NOTIFY_TIMEOUT = 2.0


@pytest.fixture
def runtimes(monkeypatch, settings, tmp_path):
    return fake_clusters(monkeypatch, settings, tmp_path, {"alpha": "ns-alpha"})


def submit(owner, name="demo") -> Job:
    job = Job.objects.create(name=name, owner=owner, spec=job_document(name))
    controller.request_reconcile(job)
    job.refresh_from_db()
    return job


def channel(user, url, kind="webhook", secret="s3cret-key", name="hook") -> Channel:
    return services.create_channel(user, {"name": name, "kind": kind, "url": url, "secret": secret, "language": "en"})


@pytest.mark.parametrize(
    "url",
    [
        "http://127.0.0.1:8000/hook",
        "https://127.0.0.1/hook",
        "http://169.254.169.254/latest/meta-data/",
        "https://169.254.169.254/",
        "https://localhost/x",
        "https://10.1.2.3/x",
        "https://[::1]/x",
    ],
)
def test_loopback_link_local_and_private_urls_are_refused_by_default(alice, url):
    with pytest.raises(services.NotifyError) as err:
        channel(alice, url)
    assert err.value.field == "url"
    assert not Channel.objects.exists()


def test_plain_http_needs_an_allowed_host_and_credentials_in_urls_are_refused(alice, settings):
    with pytest.raises(services.NotifyError, match="https"):
        channel(alice, "http://example.com/hook")
    settings.RLARK_NOTIFY_ALLOWED_HOSTS = ["127.0.0.1"]
    with translation.override("en"), pytest.raises(services.NotifyError, match="user name"):
        channel(alice, "https://user:pw@127.0.0.1/hook")
    assert channel(alice, "http://127.0.0.1:9/hook").url == "http://127.0.0.1:9/hook"


def test_url_and_secret_are_encrypted_at_rest(alice, loopback):
    from django.db import connection

    c = channel(alice, "http://127.0.0.1:9/hook?token=abc")
    with connection.cursor() as cur:
        cur.execute("SELECT url, secret FROM notifications_channel WHERE id = %s", [c.pk])
        url, secret = cur.fetchone()
    assert url.startswith("fernet:") and "abc" not in url
    assert secret.startswith("fernet:") and "s3cret" not in secret


def _deliver(user, job, rule_events, event) -> list[Delivery]:
    ids = dispatch.record([event])
    from notifications import tasks

    for i in ids:
        tasks.deliver.delay(i)
    return list(Delivery.objects.filter(pk__in=ids))


def test_webhook_is_signed_and_retried_after_two_500s(alice, loopback):
    job = Job.objects.create(name="demo", owner=alice, spec=job_document("demo"))
    with Receiver([500, 500]) as r:
        c = channel(alice, r.url)
        services.create_rule(alice, {"channel": c.pk, "events": ["Failed"]})
        _deliver(alice, job, ["Failed"], {"job": job.pk, "kind": "phase", "phase": "Failed", "attempt": 1})
    assert len(r.requests) == 3  # two 500s, then 200
    last = r.requests[-1]
    ts, sig = last["headers"]["X-RLark-Timestamp"], last["headers"]["X-RLark-Signature"]
    want = hmac.new(b"s3cret-key", ts.encode() + b"." + last["body"], hashlib.sha256).hexdigest()
    assert sig == f"sha256={want}"
    body = json.loads(last["body"])
    assert body["job"] == "demo" and body["text"] == "RLark: job demo is Failed."
    assert "s3cret" not in last["body"].decode()
    delivery = Delivery.objects.get()
    assert (delivery.status, delivery.attempts, delivery.error_text) == ("sent", 3, "")
    rule = Rule.objects.get()
    assert rule.last_status == "sent" and rule.last_error == ""


def test_a_receiver_that_always_fails_shows_failed_with_the_last_error(alice, loopback):
    job = Job.objects.create(name="demo", owner=alice, spec=job_document("demo"))
    with Receiver([503] * 10) as r:
        c = channel(alice, r.url)
        services.create_rule(alice, {"channel": c.pk, "events": ["Running"]})
        _deliver(alice, job, ["Running"], {"job": job.pk, "kind": "phase", "phase": "Running", "attempt": 1})
    assert len(r.requests) == dispatch.MAX_ATTEMPTS == 4  # 3 retries
    rule = Rule.objects.get()
    with translation.override("en"):
        assert rule.last_status == "failed" and rule.error_text == "the receiver answered HTTP 503"
    assert rule.error_text == "接收端返回 HTTP 503"
    assert Delivery.objects.get().status == "failed"


def test_a_hanging_receiver_times_out(alice, loopback, settings):
    settings.RLARK_NOTIFY_TIMEOUT = 0.5
    job = Job.objects.create(name="demo", owner=alice, spec=job_document("demo"))
    with Receiver(hang=3) as r:
        c = channel(alice, r.url)
        services.create_rule(alice, {"channel": c.pk, "events": ["Running"]})
        ids = dispatch.record([{"job": job.pk, "kind": "phase", "phase": "Running", "attempt": 1}])
        outcome = dispatch.attempt(ids[0])
    assert outcome.status == "pending" and outcome.retry_in == 2
    with translation.override("en"):
        assert errors.render(outcome.error) == "no answer within 0.5 s"
    # for a while the hanging receiver is not tried again: its next message fails at once, holding no worker
    with Receiver(hang=3) as r2:
        Channel.objects.filter(pk=c.pk).update(url=r2.url)
        other = Job.objects.create(name="other", owner=alice, spec=job_document("other"))
        ids = dispatch.record([{"job": other.pk, "kind": "phase", "phase": "Running", "attempt": 1}])
        started = time.monotonic()
        outcome = dispatch.attempt(ids[0])
        assert time.monotonic() - started < 0.4 and r2.requests == []
    with translation.override("en"):
        assert errors.render(outcome.error) == "not tried: the receiver did not answer a moment ago"


def test_the_url_is_checked_again_at_send_time(alice, loopback, settings):
    job = Job.objects.create(name="demo", owner=alice, spec=job_document("demo"))
    with Receiver() as r:
        c = channel(alice, r.url)
        services.create_rule(alice, {"channel": c.pk, "events": ["Running"]})
        settings.RLARK_NOTIFY_ALLOWED_HOSTS = []  # the admin withdrew the host
        _deliver(alice, job, ["Running"], {"job": job.pk, "kind": "phase", "phase": "Running", "attempt": 1})
    assert r.requests == []
    rule = Rule.objects.get()
    with translation.override("en"):
        assert rule.last_status == "failed" and rule.error_text.startswith("Only https URLs are allowed")


def test_feishu_and_slack_bodies(alice, loopback):
    job = Job.objects.create(name="demo", owner=alice, spec=job_document("demo"))
    with Receiver() as feishu, Receiver() as slack:
        f = channel(alice, feishu.url, kind="feishu", secret="bot-secret", name="feishu")
        s = channel(alice, slack.url, kind="slack", secret="", name="slack")
        for c in (f, s):
            services.create_rule(alice, {"channel": c.pk, "events": ["Succeeded"]})
        _deliver(alice, job, [], {"job": job.pk, "kind": "phase", "phase": "Succeeded", "attempt": 1})
    doc = json.loads(feishu.requests[0]["body"])
    assert doc["msg_type"] == "text" and doc["content"] == {"text": "RLark: job demo is Succeeded."}
    key = f"{doc['timestamp']}\nbot-secret".encode()
    assert doc["sign"] == base64.b64encode(hmac.new(key, b"", hashlib.sha256).digest()).decode()
    assert set(doc) == {"timestamp", "sign", "msg_type", "content"}
    assert json.loads(slack.requests[0]["body"]) == {"text": "RLark: job demo is Succeeded."}


def test_email_channel_in_chinese(alice, loopback):
    job = Job.objects.create(name="demo", owner=alice, spec=job_document("demo"))
    c = services.create_channel(alice, {"name": "mail", "kind": "email", "email": "alice@example.com"})
    services.create_rule(alice, {"channel": c.pk, "events": ["Failed"]})
    _deliver(alice, job, [], {"job": job.pk, "kind": "phase", "phase": "Failed", "attempt": 1})
    assert len(mail.outbox) == 1
    assert mail.outbox[0].to == ["alice@example.com"]
    assert "demo" in mail.outbox[0].subject and "失败" in mail.outbox[0].body
    with pytest.raises(services.NotifyError):
        services.create_channel(alice, {"name": "bad", "kind": "email", "email": "not an address"})


def test_rule_input_is_bounded_like_the_run_check(alice, loopback):
    c = services.create_channel(alice, {"name": "mail", "kind": "email", "email": "alice@example.com"})
    with pytest.raises(services.NotifyError, match="too long"):
        services.create_rule(alice, {"channel": c.pk, "events": ["log_match"], "log_pattern": "x" * 501})
    with pytest.raises(services.NotifyError, match="regular expression"):
        services.create_rule(alice, {"channel": c.pk, "events": ["log_match"], "log_pattern": "(unclosed"})
    with pytest.raises(services.NotifyError):
        services.create_rule(alice, {"channel": c.pk, "events": ["pending_long"], "pending_minutes": 0})
    with pytest.raises(services.NotifyError):
        services.create_rule(alice, {"channel": c.pk, "events": []})


def test_sync_phase_changes_and_worker_restart_are_delivered_once(
    alice, bob, loopback, runtimes, django_capture_on_commit_callbacks
):
    fake = runtimes["alpha"]

    def sync(job):
        with django_capture_on_commit_callbacks(execute=True):  # the sync announces once its writes commit
            sync_job(job)

    with Receiver() as r:
        c = channel(alice, r.url)
        services.create_rule(alice, {"channel": c.pk, "events": ["Running", "Failed", "restart"]})
        job = submit(alice)
        other = submit(bob, name="bobs")
        fake.set_running()
        fake.log("demo-header-0", *HEAD_READY)
        fake.log("bobs-header-0", *HEAD_READY)
        sync(job)
        sync(other)
        sync(job)  # nothing new: no second message
        texts = [json.loads(q["body"])["text"] for q in r.requests]
        assert texts == ["RLark: job demo is Running."]  # bob's job does not reach alice's default rule
        fake.terminate("demo-rollout-0", 1, restart=True)
        sync(job)
        texts = [json.loads(q["body"])["text"] for q in r.requests]
    assert "RLark: Worker demo-rollout-0 of job demo restarted (1 restarts)." in texts


def test_pending_too_long_and_log_match_come_from_the_scan(alice, loopback, runtimes):
    from datetime import timedelta

    from django.utils import timezone

    fake = runtimes["alpha"]
    with Receiver() as r:
        c = channel(alice, r.url)
        job = submit(alice)
        services.create_rule(alice, {"channel": c.pk, "events": ["pending_long"], "pending_minutes": 5}, job=job)
        services.create_rule(alice, {"channel": c.pk, "events": ["log_match"], "log_pattern": r"loss=nan"})
        from notifications import tasks

        tasks.scan()
        assert r.requests == []  # Pending for less than 5 minutes
        Job.objects.filter(pk=job.pk).update(created_at=timezone.now() - timedelta(minutes=6))
        tasks.scan()
        tasks.scan()
        assert [json.loads(q["body"])["text"] for q in r.requests] == [
            "RLark: job demo has been Pending for more than 5 minutes."
        ]
        fake.set_running()
        fake.log("demo-header-0", *HEAD_READY, "step 3 loss=nan")
        sync_job(job)
        job.refresh_from_db()
        assert job.phase == Phase.RUNNING
        assert scan.log_events()
        tasks.scan()
        texts = [json.loads(q["body"])["text"] for q in r.requests]
    assert texts[-1] == "RLark: a log line of job demo matches the pattern loss=nan: step 3 loss=nan"
