"""``id_in`` selects exactly the rows a plain ``__in`` list selects, bound as one array on PostgreSQL."""

from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model
from django.db import connection
from django.test.utils import CaptureQueriesContext

from rlark_console.id_sets import SMALL, id_in


@pytest.mark.django_db
def test_id_in_selects_the_same_rows_as_a_list_with_one_parameter_on_postgresql():
    User = get_user_model()
    users = User.objects.bulk_create([User(username=f"u{i}") for i in range(SMALL * 3)])
    ids = sorted(u.pk for u in User.objects.filter(username__in=[u.username for u in users]))
    wanted = ids[::2] + [10**12]  # every other row and one id that matches nothing
    with CaptureQueriesContext(connection) as ctx:
        got = sorted(User.objects.filter(pk__in=id_in(wanted)).values_list("pk", flat=True))
    assert got == ids[::2]
    if connection.vendor == "postgresql":
        assert "unnest" in ctx.captured_queries[0]["sql"]
    assert sorted(User.objects.filter(pk__in=id_in(ids[:3])).values_list("pk", flat=True)) == ids[:3]
    assert list(User.objects.filter(pk__in=id_in([]))) == []
