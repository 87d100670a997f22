"""Small faults of the served web tier (``manage.py serve_web``, two daphne workers, ``RLARK_DB_POOL=4`` on
PostgreSQL): none of them may answer a 500.

- 20 simultaneous logins all succeed (a pooled connection held through the password hash ran the pool dry:
  ``psycopg_pool.PoolTimeout``).
- ``..%2F`` in a websocket path is closed with 4404 (Channels' router raised and daphne answered an HTTP 500).
- A 50 MB upload is refused with a localized 413 before it is read (it was read and parsed for ~18 s).
- After a PostgreSQL restart at most the first request fails (the pool handed out dead connections for 23-32 s).
  Only where the cluster is local and may be restarted (``pg_ctlcluster``, root): marker ``pg_restart``.

PostgreSQL tests use a database of their own; without PostgreSQL the web tier runs on SQLite and those skip.
"""

from __future__ import annotations

import http.cookiejar
import json
import os
import re
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from tests import pgrestart
from tests.processes import start_web_tier, stop_group

pytestmark = pytest.mark.e2e
ROOT = Path(__file__).resolve().parents[2]
URL = os.environ.get("DATABASE_URL", "")
ON_POSTGRES = URL.startswith(("postgres://", "postgresql://"))
PASSWORD = "correct horse battery"
MB = 2**20

SETUP = f"""
from django.contrib.auth import get_user_model
from accounts.authentication import issue_token
alice = get_user_model().objects.create_user(username="alice", password={PASSWORD!r})
print("TOKEN", issue_token(alice, "t")[1])
"""


def _admin(sql: str, params: tuple = ()) -> list[tuple]:
    """Run ``sql`` on the server's ``postgres`` database (autocommit); the rows, if any."""
    import psycopg

    with psycopg.connect(f"{URL.rpartition('/')[0]}/postgres", autocommit=True) as conn:
        cursor = conn.execute(sql, params)
        return cursor.fetchall() if cursor.description else []


@pytest.fixture(scope="module")
def tier(tmp_path_factory):
    """``(base URL, API token, web log path)`` of a web tier with two workers and a pool of 4 per worker."""
    tmp = tmp_path_factory.mktemp("faults")
    name = f"{URL.rpartition('/')[2]}_faults"
    if ON_POSTGRES:
        _admin(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        _admin(f'CREATE DATABASE "{name}"')
        database = f"{URL.rpartition('/')[0]}/{name}"
    else:
        database = f"sqlite:///{tmp / 'web.sqlite3'}"
    env = {
        **os.environ,
        "RLARK_VAR_DIR": str(tmp / "var"),
        "DATABASE_URL": database,
        "DEBUG": "0",
        "ALLOWED_HOSTS": "127.0.0.1",
        "RLARK_DB_POOL": "4",
        "PYTHONUNBUFFERED": "1",
    }
    env.pop("REDIS_URL", None)
    manage = [sys.executable, str(ROOT / "manage.py")]
    subprocess.run([*manage, "migrate", "--noinput", "-v0"], env=env, cwd=ROOT, check=True, timeout=300)
    out = subprocess.run(
        [*manage, "shell", "-c", SETUP], env=env, cwd=ROOT, check=True, timeout=120, capture_output=True, text=True
    ).stdout
    token = out.split("TOKEN", 1)[1].split()[0]
    proc, base, log = start_web_tier(manage, env, ROOT, tmp / "web.log", 2)
    try:
        yield base, token, tmp / "web.log"
    finally:
        stop_group(proc)
        log.close()
        if ON_POSTGRES:
            _admin(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def _get(url: str, token: str, timeout: float = 30) -> int:
    """The status of an API GET with ``token``."""
    request = urllib.request.Request(url, headers={"Authorization": f"Token {token}"})
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            response.read()
            return response.status
    except urllib.error.HTTPError as exc:
        return exc.code


def _login(base: str, barrier: threading.Barrier, username: str = "alice", password: str = "") -> int:
    """Log in as alice through the login page: its CSRF cookie and token first, then (once every thread of
    ``barrier`` has them) the form. The POST's status (302 on success, not followed)."""
    jar = http.cookiejar.CookieJar()

    class NoRedirect(urllib.request.HTTPRedirectHandler):
        def redirect_request(self, *args, **kwargs):
            return None

    opener = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(jar), NoRedirect)
    with opener.open(base + "/login/", timeout=60) as response:
        page = response.read().decode()
    csrf = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page).group(1)
    fields = {"username": username, "password": password or PASSWORD, "csrfmiddlewaretoken": csrf}
    form = urllib.parse.urlencode(fields).encode()
    request = urllib.request.Request(base + "/login/", data=form, headers={"Referer": base + "/login/"})
    barrier.wait(timeout=60)
    try:
        with opener.open(request, timeout=120) as response:
            return response.status
    except urllib.error.HTTPError as exc:
        return exc.code


@pytest.mark.skipif(not ON_POSTGRES, reason="needs PostgreSQL (DATABASE_URL) for the connection pool")
def test_twenty_simultaneous_logins_all_succeed(tier):
    base, token, log = tier
    barrier = threading.Barrier(20)
    started = time.monotonic()
    with ThreadPoolExecutor(21) as pool:
        logins = [pool.submit(_login, base, barrier) for _ in range(20)]
        time.sleep(1)  # the logins are hashing their password now
        api_started = time.monotonic()
        api = [_get(base + "/api/v1/jobs/?limit=5", token) for _ in range(3)]
        api_seconds = time.monotonic() - api_started
        statuses = [future.result() for future in logins]
    print(
        f"20 simultaneous logins in {time.monotonic() - started:.1f} s: {sorted(statuses)}; "
        f"3 API reads meanwhile in {api_seconds:.1f} s: {api}"
    )
    assert statuses == [302] * 20, log.read_text()[-3000:]
    assert api == [200] * 3, log.read_text()[-3000:]


def test_thirty_simultaneous_wrong_logins_check_at_most_five_passwords(tier):
    """The login limit (5 failures per address and account in 5 minutes) holds under concurrency: before, 30
    simultaneous attempts all had their password checked (29 x 200, no 429)."""
    base, _token, log = tier
    barrier = threading.Barrier(30)
    with ThreadPoolExecutor(30) as pool:
        logins = [pool.submit(_login, base, barrier, "mallory", f"wrong-{i}") for i in range(30)]
        statuses = [future.result() for future in logins]
    print(f"30 simultaneous wrong logins: {sorted(statuses)}")
    assert statuses.count(200) <= 5 and statuses.count(429) >= 25, (sorted(statuses), log.read_text()[-2000:])


@pytest.mark.parametrize(
    "path", ["/ws/terminal/jobs/..%2F..%2Fetc/logs/", "/ws/terminal/jobs/x/pods/..%2F..%2F/", "/ws/nothing/"]
)
def test_an_unknown_websocket_path_closes_with_4404(tier, path):
    import websocket

    base, _token, _log = tier
    ws = websocket.create_connection(
        base.replace("http://", "ws://") + path, origin=base, header=["Accept-Language: en"], timeout=10
    )
    try:
        closing = json.loads(ws.recv())
        assert closing["type"] == "closing" and closing["code"] == 4404, closing
        assert "nothing at this address" in closing["reason"]
        opcode, frame = ws.recv_data(control_frame=True)
        assert opcode == websocket.ABNF.OPCODE_CLOSE and int.from_bytes(frame[:2], "big") == 4404
    finally:
        ws.close()


def _upload_parts(size: int, chunk: int = 256 * 1024) -> list[bytes]:
    """A ``multipart/form-data`` body (boundary ``B0undary``) of ``size`` bytes: one job file ``file`` of ``x``s, in
    pieces of at most ``chunk`` bytes."""
    head = b'--B0undary\r\nContent-Disposition: form-data; name="file"; filename="job.yaml"\r\n\r\n'
    tail = b"\r\n--B0undary--\r\n"
    content = size - len(head) - len(tail)
    return [head] + [b"x" * min(chunk, content - at) for at in range(0, content, chunk)] + [tail]


def _post_big(base: str, token: str, size: int, chunked: bool, language: str) -> tuple[bytes, float, int]:
    """Upload a ``size``-byte job file to the API on a raw socket (declared or chunked), sending from a thread
    while the answer is read: ``(answer, seconds from the request's start until the answer was complete, bytes
    sent by then)``."""
    host, port = base.removeprefix("http://").split(":")
    framing = "Transfer-Encoding: chunked" if chunked else f"Content-Length: {size}"
    head = (
        f"POST /api/v1/jobs/ HTTP/1.1\r\nHost: {host}\r\n{framing}\r\n"
        "Content-Type: multipart/form-data; boundary=B0undary\r\n"
        f"Accept-Language: {language}\r\nAuthorization: Token {token}\r\n\r\n"
    )
    parts = _upload_parts(size)
    sent = [0]
    answered = threading.Event()

    def send_body(sock: socket.socket) -> None:
        try:
            for part in parts:
                if answered.is_set():
                    return
                sock.sendall(b"%x\r\n%s\r\n" % (len(part), part) if chunked else part)
                sent[0] += len(part)
            if chunked:
                sock.sendall(b"0\r\n\r\n")
        except OSError:  # the server closed the connection after its answer
            pass

    with socket.create_connection((host, int(port)), timeout=60) as sock:
        started = time.monotonic()
        sock.sendall(head.encode())
        sender = threading.Thread(target=send_body, args=(sock,), daemon=True)
        sender.start()
        answer = b""
        while b"\r\n\r\n" not in answer or len(answer.partition(b"\r\n\r\n")[2]) < _length(answer):
            data = sock.recv(65536)
            if not data:
                break
            answer += data
        seconds, by_then = time.monotonic() - started, sent[0]
        answered.set()
        sender.join(timeout=30)
    return answer, seconds, by_then


def _length(answer: bytes) -> int:
    """The Content-Length of the answer's head (0 when not yet known)."""
    found = re.search(rb"(?i)content-length: *(\d+)", answer.partition(b"\r\n\r\n")[0])
    return int(found.group(1)) if found else 0


@pytest.mark.parametrize("chunked", [False, True], ids=["content-length", "chunked"])
@pytest.mark.parametrize("language", ["en", "zh-hans"])
def test_a_50_mb_upload_is_refused_before_it_is_read(tier, chunked, language):
    base, token, _log = tier
    size = 50 * MB
    answer, seconds, sent = _post_big(base, token, size, chunked, language)
    framing = "chunked" if chunked else "declared"
    print(f"50 MB {framing} ({language}): answered after {seconds:.2f} s, {sent / MB:.1f} MB sent by then")
    head, _sep, body = answer.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 413"), answer[:500]
    error = json.loads(body)
    assert error["code"] == "request_too_large" and error["limit"] == 10 * MB
    assert ("too large" in error["detail"]) if language == "en" else ("过大" in error["detail"]), error
    assert seconds < 3
    assert sent < 20 * MB  # the client stopped long before the end: the body was not read


@pytest.mark.pg_restart
@pytest.mark.skipif(
    pgrestart.local_cluster() is None, reason="needs a local PostgreSQL cluster this test may restart (root)"
)
def test_after_a_postgres_restart_at_most_the_first_request_fails(tier):
    base, token, log = tier
    url = base + "/api/v1/jobs/?limit=5"
    with ThreadPoolExecutor(8) as pool:  # every pooled connection of both workers is opened
        assert set(pool.map(lambda _i: _get(url, token), range(40))) == {200}
    pgrestart.restart(*pgrestart.local_cluster())
    statuses = [_get(url, token) for _ in range(30)]
    with ThreadPoolExecutor(8) as pool:
        statuses += list(pool.map(lambda _i: _get(url, token), range(40)))
    print("after the restart:", statuses)
    assert all(status == 200 for status in statuses[1:]), (statuses, log.read_text()[-3000:])
