"""API tokens: create shows the key once, list by prefix, revoke; the key authenticates until revoked;
only a hash is stored; the page; login rate limiting."""

from __future__ import annotations

import pytest
from django.core.cache import cache

from accounts import ratelimit
from accounts.models import APIToken

pytestmark = pytest.mark.django_db


def test_api_create_use_list_revoke(client, alice, bob):
    client.force_login(alice)
    resp = client.post("/api/v1/tokens/", {"name": "ci"}, content_type="application/json")
    assert resp.status_code == 201
    data = resp.json()
    key = data["key"]
    assert key.startswith(data["prefix"]) and len(key) > 30
    assert not APIToken.objects.filter(key_hash__contains=key).exists()
    assert key not in str(list(APIToken.objects.values()))  # only the hash is stored
    listed = client.get("/api/v1/tokens/").json()
    assert [t["prefix"] for t in listed] == [data["prefix"]] and "key" not in listed[0]
    client.logout()
    # the key authenticates API calls as alice
    resp = client.get("/api/v1/tokens/", HTTP_AUTHORIZATION=f"Token {key}")
    assert resp.status_code == 200 and resp.json()[0]["name"] == "ci"
    assert client.get("/api/v1/ssh-keys/", HTTP_AUTHORIZATION=f"Bearer {key}").status_code == 200
    # bob can neither see nor revoke it
    client.force_login(bob)
    assert client.get("/api/v1/tokens/").json() == []
    assert client.delete(f"/api/v1/tokens/{data['id']}/").status_code == 404
    client.force_login(alice)
    assert client.delete(f"/api/v1/tokens/{data['id']}/").status_code == 204
    client.logout()
    assert client.get("/api/v1/tokens/", HTTP_AUTHORIZATION=f"Token {key}").status_code in (401, 403)
    assert client.get("/api/v1/tokens/", HTTP_AUTHORIZATION="Token rlk_wrong").status_code in (401, 403)


def test_api_requires_name(client, alice):
    client.force_login(alice)
    assert client.post("/api/v1/tokens/", {"name": "  "}, content_type="application/json").status_code == 400


def test_page_shows_key_once_and_revokes(client, alice):
    client.force_login(alice)
    resp = client.post("/account/tokens/", {"name": "laptop"})
    assert resp.status_code == 200 and resp["Cache-Control"] == "no-store"
    token = APIToken.objects.get(user=alice)
    html = resp.content.decode()
    start = html.index('data-testid="new-token-key">') + len('data-testid="new-token-key">')
    key = html[start : html.index("</pre>", start)]
    assert key.startswith(token.prefix)
    again = client.get("/account/tokens/").content.decode()
    assert key not in again and token.prefix in again
    client.post("/account/tokens/", {"revoke": token.pk})
    token.refresh_from_db()
    assert token.revoked


def test_login_rate_limited(client, alice):
    cache.clear()
    for _ in range(ratelimit.MAX_FAILURES):
        resp = client.post("/login/", {"username": "alice", "password": "wrong"})
        assert resp.status_code == 200
    resp = client.post("/login/", {"username": "alice", "password": "alice-pass-1"})
    assert resp.status_code == 429  # locked even with the right password
    assert "_auth_user_id" not in client.session
    # another user from the same address is not locked
    cache_key_other = client.post("/login/", {"username": "bob", "password": "wrong"})
    assert cache_key_other.status_code == 200
    cache.clear()
    resp = client.post("/login/", {"username": "alice", "password": "alice-pass-1"})
    assert resp.status_code == 302
