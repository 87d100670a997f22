"""The websocket Origin check compares scheme, host and port with the request's own origin
and CSRF_TRUSTED_ORIGINS (host names alone let another port or scheme on an allowed host in)."""

from __future__ import annotations

import pytest
from asgiref.sync import sync_to_async

from rlark_console.origin import origin_allowed
from terminal.demo_runtime import DirRuntime, seed_job
from terminal.services.runtimes import use_runtime_factory
from tests.terminal_support import session_cookie, ws_communicator

LOGS = "/ws/terminal/jobs/demo/logs/"


def scope(origin: str | None, host: str = "127.0.0.1:8000", scheme: str = "ws", client=("127.0.0.1", 5000), **hdr):
    headers = [(b"host", host.encode())]
    if origin is not None:
        headers.append((b"origin", origin.encode()))
    headers += [(k.replace("_", "-").encode(), v.encode()) for k, v in hdr.items()]
    return {"type": "websocket", "scheme": scheme, "headers": headers, "client": client}


def test_origin_needs_scheme_host_and_port(settings):
    settings.ALLOWED_HOSTS = ["127.0.0.1", "console.example.com"]
    settings.CSRF_TRUSTED_ORIGINS = []
    assert origin_allowed(scope("http://127.0.0.1:8000"))
    assert not origin_allowed(scope("http://127.0.0.1:8001"))  # another port on an allowed host
    assert not origin_allowed(scope("https://127.0.0.1:8000"))  # another scheme
    assert not origin_allowed(scope("http://127.0.0.1"))  # port 80 is not 8000
    assert not origin_allowed(scope("http://evil.example:8000", host="evil.example:8000"))  # Host not allowed
    assert not origin_allowed(scope(None))
    assert not origin_allowed(scope("null"))
    assert origin_allowed(scope("https://console.example.com", host="console.example.com", scheme="wss"))
    assert not origin_allowed(scope("http://console.example.com", host="console.example.com", scheme="wss"))


def test_trusted_origins_and_trusted_proxy_scheme(settings):
    settings.ALLOWED_HOSTS = ["console.example.com", "10.0.0.3"]
    settings.CSRF_TRUSTED_ORIGINS = ["https://console.example.com", "https://*.lab.example.com:8443"]
    behind_proxy = scope("https://console.example.com", host="10.0.0.3:8000", client=("10.0.0.2", 1))
    assert origin_allowed(behind_proxy)
    assert not origin_allowed(scope("https://console.example.com:444", host="10.0.0.3:8000"))
    assert origin_allowed(scope("https://a.lab.example.com:8443", host="10.0.0.3:8000"))
    assert not origin_allowed(scope("https://a.lab.example.com", host="10.0.0.3:8000"))
    # the request's own https origin is believed from a trusted proxy only
    settings.CSRF_TRUSTED_ORIGINS = []
    proxied = scope(
        "https://console.example.com", host="console.example.com", client=("10.0.0.2", 1), x_forwarded_proto="https"
    )
    settings.RLARK_TRUSTED_PROXIES = []
    assert not origin_allowed(proxied)
    settings.RLARK_TRUSTED_PROXIES = ["10.0.0.2"]
    assert origin_allowed(proxied)


@pytest.mark.django_db(transaction=True)
@pytest.mark.asyncio
@pytest.mark.parametrize(
    ("origin", "ok"), [("http://127.0.0.1", True), ("http://127.0.0.1:8001", False), ("https://127.0.0.1", False)]
)
async def test_websocket_handshake_checks_port_and_scheme(tmp_path, alice, origin, ok):
    rt = DirRuntime(tmp_path / "rt")
    use_runtime_factory(lambda cluster: rt)
    try:
        await sync_to_async(seed_job)(rt, alice)
        comm = ws_communicator(LOGS, await sync_to_async(session_cookie)(alice), origin=origin)
        connected, _ = await comm.connect()
        assert connected is ok
        await comm.disconnect()
    finally:
        use_runtime_factory(None)
