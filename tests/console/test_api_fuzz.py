"""Schemathesis fuzzes every operation of the served ``/api/schema/`` in-process (WSGI) as an
admin with an API token and fails on any 5xx.

Bounded for CI: ``RLARK_FUZZ_EXAMPLES`` examples per operation (default 50), derandomized (the same cases every
run), no example database, a per-operation timeout. Select with ``-m fuzz`` (or skip with ``-m "not fuzz"``).
Runtimes are the in-memory FakeRuntime and every socket to a non-loopback address is refused, so generated
kubeconfigs or registry hosts never cause traffic off this machine.
"""

from __future__ import annotations

import ipaddress
import os
import socket

import pytest
import schemathesis
from django.core.wsgi import get_wsgi_application
from hypothesis import HealthCheck, Phase, settings

from accounts.services import create_token
from clusters.models import Cluster
from clusters.runtime import registry
from tests.fake_runtime import FakeRuntime
from tests.spec_fixtures import seed_db

EXAMPLES = int(os.environ.get("RLARK_FUZZ_EXAMPLES", "50"))
pytestmark = [pytest.mark.fuzz, pytest.mark.django_db, pytest.mark.timeout(180)]
WSGI = get_wsgi_application()


def _loopback(host: object) -> bool:
    if host in (None, "", "localhost"):
        return True
    try:
        return ipaddress.ip_address(str(host).split("%")[0]).is_loopback
    except ValueError:
        return False


@pytest.fixture
def loopback_only(monkeypatch):
    """Refuse connections (and name look-ups) to anything but loopback, as a closed port would."""
    real_connect, real_getaddrinfo = socket.socket.connect, socket.getaddrinfo

    def connect(sock, address):
        if sock.family in (socket.AF_INET, socket.AF_INET6) and not _loopback(address[0]):
            raise ConnectionRefusedError(f"fuzz test: no traffic to {address[0]}")
        return real_connect(sock, address)

    def getaddrinfo(host, *args, **kwargs):
        if not _loopback(host):
            raise socket.gaierror(socket.EAI_NONAME, f"fuzz test: {host} is not resolved")
        return real_getaddrinfo(host, *args, **kwargs)

    monkeypatch.setattr(socket.socket, "connect", connect)
    monkeypatch.setattr(socket, "getaddrinfo", getaddrinfo)


@pytest.fixture
def keep_test_connection():
    """As Django's test Client does: requests must not close the test's database connection (on PostgreSQL
    that would end the test transaction and fail the next query)."""
    from django.core.signals import request_finished, request_started
    from django.db import close_old_connections

    request_started.disconnect(close_old_connections)
    request_finished.disconnect(close_old_connections)
    yield
    request_started.connect(close_old_connections)
    request_finished.connect(close_old_connections)


@pytest.fixture
def token(admin_user, settings, monkeypatch, tmp_path, loopback_only, keep_test_connection):  # noqa: ARG001
    settings.CELERY_TASK_ALWAYS_EAGER = True
    settings.VAR_DIR = tmp_path
    seed_db(admin_user)
    runtime = FakeRuntime("local")
    monkeypatch.setattr(registry, "runtime_for", lambda cluster: runtime)
    Cluster.objects.filter(name="local").update(runtime="local")
    return create_token(admin_user, "fuzz")[1]


def served_schema() -> dict:
    """What ``/api/schema/`` serves: drf-spectacular's generator over the project's URLs (no request needed).
    ``test_schema_is_what_the_endpoint_serves`` checks the two agree."""
    from drf_spectacular.generators import SchemaGenerator

    return SchemaGenerator().get_schema(request=None, public=True)


def test_schema_is_what_the_endpoint_serves(client, admin_user):
    client.force_login(admin_user)
    response = client.get("/api/schema/?format=json")
    assert response.status_code == 200
    assert response.json()["paths"].keys() == served_schema()["paths"].keys()


schema = schemathesis.openapi.from_dict(served_schema())


@schema.parametrize()
@settings(
    max_examples=EXAMPLES,
    deadline=None,
    derandomize=True,
    database=None,
    phases=[Phase.explicit, Phase.generate],
    suppress_health_check=list(HealthCheck),
)
def test_api_never_answers_5xx(case, token):
    response = case.call(app=WSGI, headers={"Authorization": f"Token {token}"})
    assert response.status_code < 500, (
        f"{case.operation.label} -> {response.status_code}\n{case.as_curl_command()}\n{response.text[:2000]}"
    )
