"""X-Forwarded-For is believed only from RLARK_TRUSTED_PROXIES; logins are rate limited per
address and per account; the audit log records the address by the same rule."""

from __future__ import annotations

import pytest
from django.core.cache import cache
from django.core.exceptions import ImproperlyConfigured

from accounts import ratelimit
from accounts.models import AuditEvent
from rlark_console.clientaddr import client_address, scope_address

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def _clean_cache():
    cache.clear()
    yield
    cache.clear()


def _login(client, password: str, xff: str | None = None, peer: str = "127.0.0.1", username: str = "alice"):
    extra = {"REMOTE_ADDR": peer}
    if xff is not None:
        extra["HTTP_X_FORWARDED_FOR"] = xff
    return client.post("/login/", {"username": username, "password": password}, **extra)


def test_made_up_forwarded_for_headers_do_not_bypass_the_lockout(client, alice, settings):
    settings.RLARK_TRUSTED_PROXIES = []
    statuses = [_login(client, "wrong", xff=f"198.51.100.{i}").status_code for i in range(10)]
    assert statuses[: ratelimit.MAX_FAILURES] == [200] * ratelimit.MAX_FAILURES
    assert set(statuses[ratelimit.MAX_FAILURES :]) == {429}
    assert _login(client, "alice-pass-1", xff="203.0.113.77").status_code == 429
    assert "_auth_user_id" not in client.session


def test_behind_a_trusted_proxy_the_client_address_is_recorded(client, alice, settings):
    settings.RLARK_TRUSTED_PROXIES = ["10.0.0.0/8"]
    # the client made up the left entry; the proxy 10.0.0.5 appended what it saw (203.0.113.9)
    assert _login(client, "alice-pass-1", xff="6.6.6.6, 203.0.113.9", peer="10.0.0.5").status_code == 302
    event = AuditEvent.objects.filter(action="login").latest("pk")
    assert event.remote_addr == "203.0.113.9"


def test_untrusted_peer_is_recorded_whatever_the_headers(client, alice, settings):
    settings.RLARK_TRUSTED_PROXIES = ["10.0.0.0/8"]
    assert _login(client, "alice-pass-1", xff="10.0.0.9", peer="192.0.2.10").status_code == 302
    assert AuditEvent.objects.filter(action="login").latest("pk").remote_addr == "192.0.2.10"


def test_per_account_limit_across_many_real_addresses(client, alice, settings):
    settings.RLARK_TRUSTED_PROXIES = ["10.0.0.5"]
    for i in range(ratelimit.MAX_ACCOUNT_FAILURES):
        assert _login(client, "wrong", xff=f"198.51.100.{i}", peer="10.0.0.5").status_code == 200
    # a new address, the right password: the account is locked for this window
    assert _login(client, "alice-pass-1", xff="198.51.100.200", peer="10.0.0.5").status_code == 429
    page = _login(client, "alice-pass-1", xff="198.51.100.201", peer="10.0.0.5", username="alice")
    assert "Too many failed logins" in page.content.decode() or "登录失败次数过多" in page.content.decode()


def test_per_address_limit_across_many_usernames(client, alice, settings):
    settings.RLARK_TRUSTED_PROXIES = []
    for i in range(ratelimit.MAX_ADDRESS_FAILURES):
        assert _login(client, "wrong", username=f"user{i}").status_code == 200
    assert _login(client, "alice-pass-1").status_code == 429


def test_client_address_rule(settings):
    settings.RLARK_TRUSTED_PROXIES = ["10.0.0.0/8", "fd00::/8"]
    assert client_address("10.1.1.1", ["1.1.1.1, 10.2.2.2, 10.3.3.3"]) == "1.1.1.1"
    assert client_address("10.1.1.1", ["9.9.9.9, 2.2.2.2, 10.3.3.3"]) == "2.2.2.2"
    assert client_address("10.1.1.1", ["1.1.1.1", "2.2.2.2:4711"]) == "2.2.2.2"  # two header lines, a port
    assert client_address("10.1.1.1", ["garbage"]) == "10.1.1.1"
    assert client_address("10.1.1.1", []) == "10.1.1.1"
    assert client_address("fd00::1", ["[2001:db8::7]:443"]) == "2001:db8::7"
    assert client_address("::ffff:10.0.0.1", ["192.0.2.1"]) == "192.0.2.1"
    assert client_address("192.0.2.1", ["10.0.0.1"]) == "192.0.2.1"
    scope = {"client": ("10.0.0.1", 5555), "headers": [(b"x-forwarded-for", b"192.0.2.44")]}
    assert scope_address(scope) == "192.0.2.44"
    settings.RLARK_TRUSTED_PROXIES = []
    assert scope_address(scope) == "10.0.0.1"
    settings.RLARK_TRUSTED_PROXIES = ["not-an-ip"]
    with pytest.raises(ImproperlyConfigured):
        client_address("10.0.0.1", [])


def test_runconsole_does_not_let_daphne_rewrite_the_peer():
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    for source in ("launcher/management/commands/runconsole.py", "rlark_console/webserver.py"):  # serve_web's daphnes
        assert '"--proxy-headers"' not in (root / source).read_text(), source


@pytest.mark.e2e
def test_real_server_locks_out_made_up_forwarded_for(console_server):
    """Through the real ASGI server as ``make run`` starts it: 10 wrong passwords, each with a different
    made-up X-Forwarded-For, are locked out after MAX_FAILURES (daphne's --proxy-headers used to believe them)."""
    import http.cookiejar
    import re
    import urllib.error
    import urllib.parse
    import urllib.request

    jar = http.cookiejar.CookieJar()
    opener = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(jar))
    statuses = []
    for i in range(10):
        page = opener.open(console_server.url + "/login/", timeout=30).read().decode()
        token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page).group(1)
        body = urllib.parse.urlencode({"csrfmiddlewaretoken": token, "username": "admin", "password": f"no-{i}"})
        req = urllib.request.Request(
            console_server.url + "/login/",
            data=body.encode(),
            headers={"X-Forwarded-For": f"198.51.100.{i}", "Referer": console_server.url + "/login/"},
        )
        try:
            statuses.append(opener.open(req, timeout=30).status)
        except urllib.error.HTTPError as exc:
            statuses.append(exc.code)
    assert statuses[: ratelimit.MAX_FAILURES] == [200] * ratelimit.MAX_FAILURES
    assert set(statuses[ratelimit.MAX_FAILURES :]) == {429}


def test_a_locked_login_page_says_only_that_and_never_checks_the_password(client, alice, settings):
    """Fresh-clone trial: the 429 page also said "enter a correct username and password", and only for a wrong
    password: while locked it told a right password from a wrong one."""
    settings.RLARK_TRUSTED_PROXIES = []
    for _ in range(ratelimit.MAX_FAILURES):
        _login(client, "wrong")
    right, wrong = _login(client, "alice-pass-1"), _login(client, "wrong")
    assert right.status_code == wrong.status_code == 429
    for resp in (right, wrong):
        assert [str(e) for e in resp.context["form"].non_field_errors()] == ["登录失败次数过多，请几分钟后再试。"], (
            resp.context["form"].errors
        )
    assert "_auth_user_id" not in client.session
