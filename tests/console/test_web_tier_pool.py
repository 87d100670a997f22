"""With ``RLARK_DB_POOL`` the web tier's workers reuse their PostgreSQL connections (a new connection
with its password check cost ~13 ms, as much as the job list itself) and never pile them up: a burst of parallel
requests all succeed ("sorry, too many clients already" answered 500s when finished requests' threads kept theirs),
and a second burst opens no new connection. PostgreSQL only (``DATABASE_URL``); the database is the test's own.
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from tests.processes import start_web_tier, stop_group

pytestmark = pytest.mark.e2e
ROOT = Path(__file__).resolve().parents[2]
WORKERS = 2
POOL = 2
URL = os.environ.get("DATABASE_URL", "")
if not URL.startswith(("postgres://", "postgresql://")):
    pytest.skip("needs PostgreSQL (DATABASE_URL)", allow_module_level=True)

SETUP = """
from django.contrib.auth import get_user_model
from accounts.authentication import issue_token
from jobs.models import Job
alice = get_user_model().objects.create(username="alice")
for i in range(30):
    Job.objects.create(name=f"job-{i}", owner=alice, spec={})
print("TOKEN", issue_token(alice, "t")[1])
"""


def _admin(sql: str, params: tuple = ()) -> list[tuple]:
    import psycopg

    base = URL.rpartition("/")[0]
    with psycopg.connect(f"{base}/postgres", autocommit=True) as conn:
        cursor = conn.execute(sql, params)
        return cursor.fetchall() if cursor.description else []


@pytest.fixture
def tier(tmp_path):
    name = f"{URL.rpartition('/')[2]}_webpool"
    _admin(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
    _admin(f'CREATE DATABASE "{name}"')
    env = {
        **os.environ,
        "RLARK_VAR_DIR": str(tmp_path / "var"),
        "DATABASE_URL": f"{URL.rpartition('/')[0]}/{name}",
        "DEBUG": "0",
        "ALLOWED_HOSTS": "127.0.0.1",
        "RLARK_DB_POOL": str(POOL),
        "PYTHONUNBUFFERED": "1",
    }
    env.pop("REDIS_URL", None)
    manage = [sys.executable, str(ROOT / "manage.py")]
    subprocess.run([*manage, "migrate", "--noinput", "-v0"], env=env, cwd=ROOT, check=True, timeout=300)
    out = subprocess.run(
        [*manage, "shell", "-c", SETUP], env=env, cwd=ROOT, check=True, timeout=120, capture_output=True, text=True
    ).stdout
    token = out.split("TOKEN", 1)[1].split()[0]
    proc, base, log = start_web_tier(manage, env, ROOT, tmp_path / "web.log", WORKERS)
    try:
        yield base, token, name, tmp_path / "web.log"
    finally:
        stop_group(proc)
        log.close()
        _admin(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def _burst(base: str, token: str, requests: int = 120, parallel: int = 8) -> list[int]:
    lock = threading.Lock()
    statuses: list[int] = []

    def one(_: int) -> None:
        request = urllib.request.Request(base + "/api/v1/jobs/?limit=20", headers={"Authorization": f"Token {token}"})
        try:
            with urllib.request.urlopen(request, timeout=30) as response:
                response.read()
                status = response.status
        except urllib.error.HTTPError as exc:
            status = exc.code
        with lock:
            statuses.append(status)

    with ThreadPoolExecutor(parallel) as pool:
        list(pool.map(one, range(requests)))
    return statuses


def _backends(name: str) -> set[int]:
    return {pid for (pid,) in _admin("SELECT pid FROM pg_stat_activity WHERE datname = %s", (name,))}


def test_parallel_requests_reuse_a_bounded_set_of_connections(tier):
    base, token, name, log = tier
    first = _burst(base, token)
    assert first == [200] * len(first), log.read_text()[-3000:]
    warm = _backends(name)
    assert 1 <= len(warm) <= WORKERS * POOL, warm
    second = _burst(base, token)
    assert second == [200] * len(second), log.read_text()[-3000:]
    after = _backends(name)
    assert after <= warm, f"new connections opened for the second burst: {after - warm}"


def test_the_web_tier_pools_by_default_and_other_processes_do_not():
    code = "from django.conf import settings; print(settings.DATABASES['default'].get('OPTIONS', {}).get('pool'))"

    def pool(**extra: str) -> str:
        env = {k: v for k, v in os.environ.items() if k not in ("RLARK_DB_POOL", "RLARK_WEB_TIER")}
        env.update(DJANGO_SETTINGS_MODULE="rlark_console.settings", **extra)
        out = subprocess.run(
            [sys.executable, "-c", "import django; django.setup(); " + code],
            env=env, cwd=ROOT, check=True, timeout=120, capture_output=True, text=True,
        )  # fmt: skip
        return out.stdout.strip().splitlines()[-1]

    assert "'max_size': 4" in pool(RLARK_WEB_TIER="1")  # what serve_web's daphne workers get
    assert pool() == "None"  # Celery, beat, management commands: one connection per task or command
    assert "'max_size': 2" in pool(RLARK_WEB_TIER="1", RLARK_DB_POOL="2")
    assert pool(RLARK_WEB_TIER="1", RLARK_DB_POOL="0") == "None"
