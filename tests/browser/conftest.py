"""Fixtures of the browser tests."""

from __future__ import annotations

import pytest


@pytest.fixture(scope="session", autouse=True)
def _database_before_playwright(django_db_setup):
    """Create the test database before Playwright's sync API starts its event loop in the test thread.

    Django refuses synchronous database work in a thread that runs an event loop (``SynchronousOnlyOperation``).
    In the whole suite the non-browser tests run first (``tests/conftest.py`` orders them so) and the database
    exists before any browser starts; a run of browser tests alone used to fail at its first test. An autouse
    session fixture is set up before the session fixtures a test asks for, Playwright's among them."""
    return django_db_setup
