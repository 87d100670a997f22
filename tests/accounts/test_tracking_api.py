"""Experiment-tracking credentials over REST (``/api/v1/tracking-credentials/``): a user lists, creates and
deletes their own, with the page's rules and localized errors naming the field; another user's answers 404; the
key is in no answer and no audit detail; a W&B entity is kept and shown; login and CSRF as the other API views."""

from __future__ import annotations

import json

import pytest
from django.db import connection
from django.test import Client

from accounts.authentication import issue_token
from accounts.models import AuditEvent, TrackingCredential

pytestmark = pytest.mark.django_db

KEY = "api-wandb-key-0f1e2d3c4b5a69788796a5b4c3d2e1f0"
URL = "/api/v1/tracking-credentials/"


def _post(client, lang: str = "en", **fields):
    body = {"name": "team-wandb", "kind": "wandb", "api_key": KEY, "host": "", "entity": "rl-team"} | fields
    return client.post(URL, body, content_type="application/json", HTTP_ACCEPT_LANGUAGE=lang)


def test_create_then_list_shows_the_entity_and_never_the_key(client, alice):
    client.force_login(alice)
    created = _post(client, host="https://wandb.example.com/")
    assert created.status_code == 201, created.content
    assert created.json() | {"created_at": None} == {
        "name": "team-wandb",
        "kind": "wandb",
        "host": "https://wandb.example.com",
        "entity": "rl-team",
        "api_key": "stored",
        "created_at": None,
    }
    listed = client.get(URL)
    assert listed.status_code == 200
    assert [(r["name"], r["entity"], r["api_key"]) for r in listed.json()] == [("team-wandb", "rl-team", "stored")]
    for response in (created, listed):
        assert KEY not in response.content.decode()
    cred = TrackingCredential.objects.get(user=alice)
    assert cred.api_key == KEY and cred.entity == "rl-team"
    with connection.cursor() as cur:
        cur.execute("SELECT api_key FROM accounts_trackingcredential WHERE id = %s", [cred.pk])
        assert KEY not in cur.fetchone()[0]
    event = AuditEvent.objects.get(action="tracking.create")
    assert event.actor == alice and event.detail["entity"] == "rl-team"
    assert KEY not in json.dumps(event.detail)


@pytest.mark.parametrize(
    ("fields", "field", "en", "zh"),
    [
        ({"name": "Bad Name"}, "name", "lowercase letters", "小写字母"),
        ({"kind": "mlflow"}, "kind", "Choose W&B or SwanLab.", "W&B"),
        ({"api_key": "has a space"}, "api_key", "without spaces", "空格"),
        ({"host": "ftp://user:pw@example.com"}, "host", "https:// URL", "https://"),
        ({"entity": "team name!"}, "entity", "letters, digits", "字母、数字"),
        ({"entity": "x" * 65}, "entity", "64", "64"),
        ({"kind": "swanlab", "entity": "team"}, "entity", "Only a W&B credential", "只有 W&B 凭据"),
        ({"api_key": "k" * 513}, "api_key", "512", "512"),
    ],
)
def test_bad_input_is_a_localized_400_naming_the_field(client, alice, fields, field, en, zh):
    client.force_login(alice)
    for lang, text in (("en", en), ("zh-hans", zh)):
        response = _post(client, lang, **fields)
        assert response.status_code == 400, response.content
        body = response.json()
        assert body["code"] == "invalid" and list(body["detail"]) == [field]
        message = body["detail"][field][0]
        assert text in message
        if lang == "zh-hans":
            assert any("\u4e00" <= ch <= "\u9fff" for ch in message), message
    assert not TrackingCredential.objects.exists()
    assert not AuditEvent.objects.filter(action="tracking.create").exists()


def test_a_duplicate_name_is_refused(client, alice):
    client.force_login(alice)
    assert _post(client).status_code == 201
    again = _post(client, "zh-hans")
    assert again.status_code == 400 and "team-wandb" in again.json()["detail"]["name"][0]


def test_a_user_sees_and_deletes_only_their_own(client, alice, bob):
    TrackingCredential.objects.create(user=bob, name="bobs", kind="swanlab", api_key=KEY)
    client.force_login(alice)
    assert _post(client, name="mine").status_code == 201
    assert [r["name"] for r in client.get(URL).json()] == ["mine"]
    gone = client.delete(f"{URL}bobs/")
    assert gone.status_code == 404 and gone.json()["code"] == "not_found"
    assert TrackingCredential.objects.filter(user=bob, name="bobs").exists()
    assert client.delete(f"{URL}mine/").status_code == 204
    assert client.delete(f"{URL}mine/").status_code == 404
    assert client.delete(f"{URL}%00/").status_code == 400  # the project's NUL check, before any query
    for odd in ("x" * 2000, "Bad%20Name"):
        assert client.delete(f"{URL}{odd}/").status_code == 404
    assert client.get(URL).json() == []
    event = AuditEvent.objects.get(action="tracking.delete")
    assert event.detail["name"] == "mine" and KEY not in json.dumps(event.detail)


def test_login_csrf_and_tokens_as_the_other_api_views(alice):
    anonymous = Client()
    assert anonymous.get(URL).status_code in (401, 403)
    assert anonymous.delete(f"{URL}x/").status_code in (401, 403)
    strict = Client(enforce_csrf_checks=True)
    strict.force_login(alice)
    assert _post(strict).status_code == 403  # a session without the CSRF token
    assert not TrackingCredential.objects.exists()
    _, token = issue_token(alice, "ci")
    api = Client()
    response = api.post(
        URL,
        {"name": "ci", "kind": "swanlab", "api_key": KEY, "host": "https://swan.example.org"},
        content_type="application/json",
        HTTP_AUTHORIZATION=f"Token {token}",
    )
    assert response.status_code == 201 and response.json()["entity"] == ""
    assert api.get(URL, HTTP_AUTHORIZATION=f"Token {token}").json()[0]["host"] == "https://swan.example.org"
