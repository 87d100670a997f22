"""Audit log: every back-office change, credential and key change is recorded without secrets; the
audit API is admin-only; the AuditEvent admin is read-only."""

from __future__ import annotations

import pytest

from accounts.models import AuditEvent
from clusters.models import Cluster

pytestmark = pytest.mark.django_db


def test_admin_add_change_delete_recorded(client, admin_user):
    client.force_login(admin_user)
    inline = {"allocations-TOTAL_FORMS": "0", "allocations-INITIAL_FORMS": "0"}
    resp = client.post("/admin/domains/domain/add/", {"name": "aud", "cidr": "10.44.0.0/16", **inline})
    assert resp.status_code == 302
    from domains.models import Domain

    d = Domain.objects.get(name="aud")
    client.post(f"/admin/domains/domain/{d.pk}/change/", {"name": "aud2", "cidr": "10.44.0.0/16", **inline})
    client.post(f"/admin/domains/domain/{d.pk}/delete/", {"post": "yes"})
    events = list(AuditEvent.objects.filter(object_type="domains.domain").order_by("at", "pk"))
    assert [e.action for e in events] == ["admin.add", "admin.change", "admin.delete"]
    assert all(e.actor_name == "root" for e in events)
    assert "name" in events[1].detail["change"].lower() or "名" in events[1].detail["change"]


def test_bulk_admin_delete_recorded(client, admin_user, alice):
    client.force_login(admin_user)
    cluster = Cluster.objects.create(name="c1")
    from storage.models import StorageClass

    a = StorageClass.objects.create(cluster=cluster, name="a", provider="kubernetes")
    b = StorageClass.objects.create(cluster=cluster, name="b", provider="kubernetes")
    resp = client.post(
        "/admin/storage/storageclass/",
        {"action": "delete_selected", "_selected_action": [a.pk, b.pk], "post": "yes"},
    )
    assert resp.status_code == 302
    deleted = AuditEvent.objects.filter(action="admin.delete", object_type="storage.storageclass")
    assert sorted(deleted.values_list("object_id", flat=True)) == sorted([str(a.pk), str(b.pk)])


def test_api_changes_recorded_and_audit_api_admin_only(client, admin_user, alice):
    client.force_login(admin_user)
    client.post(
        "/api/v1/image-registries/",
        {"name": "corp", "registry": "r.example.com", "username": "u", "password": "AUDIT-PW-MARKER"},
        content_type="application/json",
    )
    client.post("/api/v1/domains/", {"name": "d1", "cidr": "10.45.0.0/16"}, content_type="application/json")
    rows = client.get("/api/v1/audit/?limit=50").json()["results"]
    actions = {r["action"] for r in rows}
    assert {"registry.create", "domain.create"} <= actions
    assert "AUDIT-PW-MARKER" not in str(rows)
    assert client.get("/api/v1/audit/?action=domain.").json()["count"] == 1
    client.force_login(alice)
    assert client.get("/api/v1/audit/").status_code == 403
    client.logout()
    assert client.get("/api/v1/audit/").status_code in (401, 403)


def test_audit_admin_is_read_only(client, admin_user):
    from accounts import audit

    event = audit.record(admin_user, "login", "user", admin_user.pk)
    client.force_login(admin_user)
    assert client.get("/admin/accounts/auditevent/").status_code == 200
    page = client.get(f"/admin/accounts/auditevent/{event.pk}/change/")
    assert page.status_code == 200 and 'name="_save"' not in page.content.decode()
    assert client.get("/admin/accounts/auditevent/add/").status_code == 403
    assert client.post(f"/admin/accounts/auditevent/{event.pk}/delete/", {"post": "yes"}).status_code == 403
    assert AuditEvent.objects.filter(pk=event.pk).exists()


def test_admin_login_goes_through_the_rate_limited_audited_login(client, admin_user, alice):
    resp = client.get("/admin/login/?next=/admin/domains/domain/")
    assert resp.status_code == 302 and resp["Location"].startswith("/login/")
    assert "next=/admin/domains/domain/" in resp["Location"]
    resp = client.post("/login/?next=/admin/", {"username": "root", "password": "root-pass-1"})
    assert resp.status_code == 302 and resp["Location"] == "/admin/"
    assert AuditEvent.objects.filter(action="login", actor_name="root").exists()
    assert client.get("/admin/login/").status_code == 302  # already signed in: straight to the index
    client.force_login(alice)
    assert client.get("/admin/login/").status_code == 403  # signed in but not an administrator: no loop
    assert client.get("/admin/login/?next=https://evil.example/").status_code == 403
    client.logout()
    resp = client.get("/admin/login/?next=https://evil.example/")
    assert "evil.example" not in resp["Location"]


def test_user_admin_shows_tokens_and_keys_and_revokes(client, admin_user, alice):
    from accounts.authentication import issue_token
    from accounts.models import APIToken

    token, _key = issue_token(alice, "laptop-ci")
    client.force_login(admin_user)
    page = client.get(f"/admin/auth/user/{alice.pk}/change/").content.decode()
    assert "laptop-ci" in page and token.prefix in page
    assert client.get("/admin/auth/user/").status_code == 200
    resp = client.post("/admin/accounts/apitoken/", {"action": "revoke", "_selected_action": [token.pk]}, follow=True)
    assert resp.status_code == 200
    assert APIToken.objects.get(pk=token.pk).revoked
    assert AuditEvent.objects.filter(action="token.revoke", object_id=str(token.pk)).exists()
