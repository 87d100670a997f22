"""The web tier serves users in parallel: ``manage.py serve_web`` runs several daphne processes on one
port, and while one user's slow request runs another user's job list answers within a second.

The slow request is a real one: an admin registers a cluster whose API server hangs (the fake API server holds
every request), so the registration's connection test waits on it. Meanwhile a researcher lists their jobs.
"""

from __future__ import annotations

import http.cookiejar
import json
import os
import re
import subprocess
import sys
import threading
import time
import urllib.parse
import urllib.request
from pathlib import Path

import pytest

from rlark_console.webserver import default_workers
from tests.fake_k8s.server import FakeKubernetes
from tests.processes import start_web_tier, stop_group

pytestmark = pytest.mark.e2e
ROOT = Path(__file__).resolve().parents[2]
HOLD = 6.0  # seconds the hung API server holds each request

SETUP = """
from django.contrib.auth import get_user_model
from accounts.authentication import issue_token
from jobs.models import Job
users = get_user_model()
admin = users.objects.create(username="ops", is_staff=True, is_superuser=True)
alice = users.objects.create(username="alice")
for i in range(30):
    Job.objects.create(name=f"job-{i}", owner=alice, spec={})
print("TOKENS", issue_token(admin, "t")[1], issue_token(alice, "t")[1])
"""


def test_default_workers_scale_with_cores(monkeypatch):
    monkeypatch.delenv("RLARK_WEB_WORKERS", raising=False)
    assert [default_workers(c) for c in (1, 2, 3, 8)] == [2, 4, 6, 8]
    monkeypatch.setenv("RLARK_WEB_WORKERS", "3")
    assert default_workers(16) == 3


def call(url: str, token: str, body: dict | None = None, timeout: float = 30) -> tuple[int, float, dict]:
    data = json.dumps(body).encode() if body is not None else None
    request = urllib.request.Request(url, data=data, headers={"Authorization": f"Token {token}"})
    if data:
        request.add_header("Content-Type", "application/json")
    t0 = time.monotonic()
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            return response.status, time.monotonic() - t0, json.loads(response.read() or b"{}")
    except urllib.error.HTTPError as exc:
        return exc.code, time.monotonic() - t0, json.loads(exc.read() or b"{}")


@pytest.fixture(scope="module")
def web(tmp_path_factory):
    tmp_path = tmp_path_factory.mktemp("web")
    env = {
        **os.environ,
        "RLARK_VAR_DIR": str(tmp_path / "var"),
        "DATABASE_URL": f"sqlite:///{tmp_path / 'web.sqlite3'}",
        "DEBUG": "0",
        "ALLOWED_HOSTS": "127.0.0.1",
        "RLARK_K8S_CONNECT_TIMEOUT": "3",
        "RLARK_K8S_READ_TIMEOUT": "15",
        "PYTHONUNBUFFERED": "1",
    }
    env.pop("REDIS_URL", None)
    manage = [sys.executable, str(ROOT / "manage.py")]
    subprocess.run([*manage, "migrate", "--noinput", "-v0"], env=env, cwd=ROOT, check=True, timeout=300)
    out = subprocess.run(
        [*manage, "shell", "-c", SETUP], env=env, cwd=ROOT, check=True, timeout=120, capture_output=True, text=True
    ).stdout
    admin_token, alice_token = out.split("TOKENS", 1)[1].split()
    proc, base, log = start_web_tier(manage, env, ROOT, tmp_path / "web.log", 2)
    yield base, admin_token, alice_token
    stop_group(proc)
    log.close()


def test_a_slow_request_does_not_hold_another_users_list(web):
    base, admin_token, alice_token = web
    status, _, body = call(base + "/api/v1/jobs/?limit=5", alice_token)
    assert status == 200 and body["count"] == 30  # warm: both users authenticate
    hung = FakeKubernetes(token="hung-token").start()
    try:
        hung.set_fault("timeout", count=1, delay=HOLD)  # the first call of the connection test hangs
        slow: dict = {}

        def register() -> None:
            slow["result"] = call(
                base + "/api/v1/clusters/",
                admin_token,
                {"name": "hung", "runtime": "kubernetes", "kubeconfig": hung.kubeconfig()},
                timeout=90,
            )
            slow["done_at"] = time.monotonic()

        thread = threading.Thread(target=register, daemon=True)
        started = time.monotonic()
        thread.start()
        time.sleep(1.0)  # the registration is now waiting on the hung API server
        answers = []
        for _ in range(5):
            status, seconds, body = call(base + "/api/v1/jobs/?limit=10", alice_token, timeout=10)
            assert status == 200 and len(body["results"]) == 10
            answers.append(seconds)
        listed_at = time.monotonic()
        thread.join(timeout=90)
    finally:
        hung.stop()
    assert "done_at" in slow, "the slow request never finished"
    assert slow["done_at"] - started >= HOLD - 1  # it really was slow ...
    assert listed_at < slow["done_at"]  # ... and every list answered while it ran
    assert max(answers) < 1.0, answers


def failed_login(base: str) -> int:
    """One wrong-password login for alice on a fresh connection (so attempts spread over the workers)."""
    jar = http.cookiejar.CookieJar()
    opener = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(jar))
    page = opener.open(base + "/login/", timeout=30).read().decode()
    token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page).group(1)
    data = urllib.parse.urlencode({"username": "alice", "password": "wrong", "csrfmiddlewaretoken": token})
    request = urllib.request.Request(base + "/login/", data=data.encode(), headers={"Referer": base + "/login/"})
    try:
        with opener.open(request, timeout=30) as response:
            return response.status
    except urllib.error.HTTPError as exc:
        return exc.code


def test_login_rate_limit_counts_across_workers(web):
    base, _, _ = web
    statuses = [failed_login(base) for _ in range(5)]
    assert 429 not in statuses, statuses
    assert failed_login(base) == 429  # the 6th attempt is refused, whichever worker took the other five
