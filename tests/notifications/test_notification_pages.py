"""The Notifications pages and API: owner-only, bilingual, the SSRF refusal as a localized error, secrets never
shown, a job's tab with its rules' delivery status and last error."""

from __future__ import annotations

import pytest

from jobs.models import Job
from notifications import errors, services
from notifications.models import Channel, Rule
from tests.fake_runtime import job_document

pytestmark = pytest.mark.django_db


@pytest.fixture
def allow_loopback(settings):
    settings.RLARK_NOTIFY_ALLOWED_HOSTS = ["127.0.0.1"]


def test_api_channels_are_owner_only_and_never_return_the_secret(client, alice, bob, allow_loopback):
    client.force_login(alice)
    answer = client.post(
        "/api/v1/notifications/channels/",
        {"name": "hook", "kind": "webhook", "url": "http://127.0.0.1:9/h", "secret": "topsecret"},
        content_type="application/json",
    )
    assert answer.status_code == 201, answer.content
    body = answer.json()
    assert body["has_secret"] is True and "secret" not in body and "topsecret" not in answer.content.decode()
    pk = body["id"]
    assert client.get("/api/v1/notifications/channels/").json()[0]["url"] == "http://127.0.0.1:9/h"
    client.force_login(bob)
    assert client.get("/api/v1/notifications/channels/").json() == []
    assert client.get(f"/api/v1/notifications/channels/{pk}/").status_code == 404
    assert client.delete(f"/api/v1/notifications/channels/{pk}/").status_code == 404
    client.logout()
    assert client.get("/api/v1/notifications/channels/").status_code in (401, 403)


def test_api_refuses_the_metadata_address_with_a_localized_error(client, alice):
    client.force_login(alice)
    data = {"name": "meta", "kind": "slack", "url": "https://169.254.169.254/latest/meta-data/"}
    answer = client.post("/api/v1/notifications/channels/", data, content_type="application/json")
    assert answer.status_code == 400
    assert answer.json()["code"] == "url_refused" and answer.json()["field"] == "url"
    assert "169.254.169.254" in answer.json()["detail"]
    answer = client.post(
        "/api/v1/notifications/channels/", data, content_type="application/json", HTTP_ACCEPT_LANGUAGE="zh-hans"
    )
    assert "已拒绝" in answer.json()["detail"]
    assert not Channel.objects.exists()


def test_api_rules_default_and_per_job(client, alice, bob, allow_loopback):
    job = Job.objects.create(name="demo", owner=alice, spec=job_document("demo"))
    client.force_login(alice)
    c = services.create_channel(alice, {"name": "m", "kind": "email", "email": "a@example.com"})
    answer = client.post(
        "/api/v1/notifications/rules/",
        {"channel": c.pk, "events": ["Failed", "restart"]},
        content_type="application/json",
    )
    assert answer.status_code == 201 and answer.json()["job"] is None
    answer = client.post(
        "/api/v1/notifications/rules/",
        {"channel": c.pk, "events": ["log_match"], "log_pattern": "Traceback", "job": "demo"},
        content_type="application/json",
    )
    assert answer.status_code == 201 and answer.json()["job"] == "demo"
    rules = client.get("/api/v1/notifications/rules/?job=demo").json()
    assert [r["events"] for r in rules] == [["Failed", "restart"], ["log_match"]]
    assert client.get("/api/v1/notifications/rules/").json()[0]["last_status"] == ""
    client.force_login(bob)
    assert client.get("/api/v1/notifications/rules/?job=demo").status_code == 404
    answer = client.post(
        "/api/v1/notifications/rules/", {"channel": c.pk, "events": ["Failed"]}, content_type="application/json"
    )
    assert answer.status_code == 400 and answer.json()["field"] == "channel"  # not bob's channel
    pk = Rule.objects.first().pk
    assert client.delete(f"/api/v1/notifications/rules/{pk}/").status_code == 404
    assert job.notify_rules.count() == 1


def test_account_page_adds_a_channel_and_a_rule_in_both_languages(client, alice, allow_loopback):
    client.force_login(alice)
    page = client.get("/account/notifications/", HTTP_ACCEPT_LANGUAGE="en")
    assert page.status_code == 200 and "Add a channel" in page.content.decode()
    client.cookies["django_language"] = "zh-hans"
    answer = client.post(
        "/account/notifications/",
        {"form": "channel", "name": "hook", "kind": "webhook", "url": "https://127.0.0.1/x", "secret": "zzsecret"},
    )
    assert answer.status_code == 302
    page = client.get("/account/notifications/").content.decode()
    assert "添加渠道" in page and "zzsecret" not in page
    answer = client.post(
        "/account/notifications/", {"form": "channel", "name": "x", "kind": "slack", "url": "http://10.0.0.1/"}
    )
    assert answer.status_code == 400 and "只允许 https" in answer.content.decode()
    c = Channel.objects.get()
    answer = client.post("/account/notifications/", {"form": "rule", "channel": c.pk, "events": ["Running", "Failed"]})
    assert answer.status_code == 302
    assert Rule.objects.get().events == ["Running", "Failed"]


def test_job_tab_shows_status_and_last_error_and_only_the_owner_adds(client, alice, bob, admin_user, allow_loopback):
    job = Job.objects.create(name="demo", owner=alice, spec=job_document("demo"))
    c = services.create_channel(alice, {"name": "hook", "kind": "slack", "url": "http://127.0.0.1:9/x"})
    rule = services.create_rule(alice, {"channel": c.pk, "events": ["Failed"]}, job=job)
    stored = errors.encode("the receiver answered HTTP %(status)d", {"status": 503})
    Rule.objects.filter(pk=rule.pk).update(last_status="failed", last_error=stored)
    client.force_login(alice)
    page = client.get("/jobs/demo/notifications/", HTTP_ACCEPT_LANGUAGE="en").content.decode()
    assert "Delivery failed" in page and "the receiver answered HTTP 503" in page and "Add a rule for this job" in page
    answer = client.post("/jobs/demo/notifications/", {"form": "rule", "channel": c.pk, "events": ["restart"]})
    assert answer.status_code == 302 and job.notify_rules.count() == 2
    client.force_login(bob)
    assert client.get("/jobs/demo/notifications/").status_code == 404
    client.force_login(admin_user)
    page = client.get("/jobs/demo/notifications/", HTTP_ACCEPT_LANGUAGE="en").content.decode()
    assert "the receiver answered HTTP 503" in page and "Add a rule for this job" not in page
    assert client.post("/jobs/demo/notifications/", {"channel": c.pk, "events": ["restart"]}).status_code == 403
