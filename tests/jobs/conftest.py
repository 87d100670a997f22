"""Fixtures of the jobs tests."""

from __future__ import annotations

import pytest
from rest_framework.test import APIClient

from tests.spec_fixtures import seed_db


@pytest.fixture
def api(alice):
    """A REST client authenticated as ``alice``, with the inventory of ``tests.spec_fixtures`` in the database."""
    seed_db(alice)
    client = APIClient()
    client.force_authenticate(alice)
    return client
