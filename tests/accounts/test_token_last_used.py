"""An API token's "last used" time (tokens page, admin) follows its use without a database write per request."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.contrib.auth import get_user_model
from django.db import connection
from django.test.utils import CaptureQueriesContext
from rest_framework.test import APIClient

from accounts.authentication import issue_token
from accounts.models import APIToken

pytestmark = pytest.mark.django_db


def test_last_used_is_stored_on_first_use_then_at_most_once_a_minute():
    user = get_user_model().objects.create_user("alice", password="pw-alice-1")
    token, key = issue_token(user, "ci")
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {key}")
    assert client.get("/api/v1/jobs/").status_code == 200
    first = APIToken.objects.get(pk=token.pk).last_used_at
    assert first is not None
    with CaptureQueriesContext(connection) as ctx:
        assert client.get("/api/v1/jobs/").status_code == 200
    assert not [q for q in ctx.captured_queries if q["sql"].startswith("UPDATE")]
    assert APIToken.objects.get(pk=token.pk).last_used_at == first
    APIToken.objects.filter(pk=token.pk).update(last_used_at=first - timedelta(minutes=2))
    assert client.get("/api/v1/jobs/").status_code == 200
    assert APIToken.objects.get(pk=token.pk).last_used_at > first
