"""The domain relay (``manage.py domain_relay``) outlives a PostgreSQL restart: its pushes of the members read the
database every ``--publish`` seconds, and after the restart at most the first one fails (each of its worker threads
kept a dead connection, and the pushes failed for 91 s). Local cluster only (marker ``pg_restart``); the relay
listens on 127.0.0.1 and, by IP_FREEBIND, on the console address without any network namespace.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests import pgrestart
from tests.processes import stop_group

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.pg_restart,
    pytest.mark.skipif(
        pgrestart.local_cluster() is None, reason="needs a local PostgreSQL cluster this test may restart (root)"
    ),
]
ROOT = Path(__file__).resolve().parents[2]
URL = os.environ.get("DATABASE_URL", "")
FAILED = "publishing domain members failed"
PUBLISH = 0.3  # seconds between two pushes


def _admin(sql: str) -> None:
    import psycopg

    with psycopg.connect(f"{URL.rpartition('/')[0]}/postgres", autocommit=True) as conn:
        conn.execute(sql)


def _wait_for(path: Path, text: str, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while text not in path.read_text():
        assert time.monotonic() < deadline, path.read_text()[-3000:]
        time.sleep(0.2)


@pytest.fixture
def relay(tmp_path):
    """The log file of a running relay on its own database, with one isolated local cluster to publish to."""
    name = f"{URL.rpartition('/')[2]}_relaydb"
    _admin(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
    _admin(f'CREATE DATABASE "{name}"')
    env = {**os.environ, "RLARK_VAR_DIR": str(tmp_path / "var"), "DATABASE_URL": f"{URL.rpartition('/')[0]}/{name}"}
    env.update(PYTHONUNBUFFERED="1")
    env.pop("REDIS_URL", None)
    manage = [sys.executable, str(ROOT / "manage.py")]
    subprocess.run([*manage, "migrate", "--noinput", "-v0"], env=env, cwd=ROOT, check=True, timeout=300)
    log_path = tmp_path / "relay.log"
    log = open(log_path, "w")  # noqa: SIM115 - closed in finally
    proc = subprocess.Popen(
        [*manage, "domain_relay", "--port", "0", "--publish", str(PUBLISH)],
        env=env, cwd=ROOT, stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
    )  # fmt: skip
    try:
        _wait_for(log_path, "domain relay on", 60)
        yield log_path
    finally:
        stop_group(proc)
        log.close()
        _admin(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def test_the_relay_publishes_again_right_after_a_postgres_restart(relay):
    time.sleep(3 * PUBLISH)  # several pushes: the worker threads have their connections
    assert FAILED not in relay.read_text()
    pgrestart.restart(*pgrestart.local_cluster())
    mark = len(relay.read_text())
    time.sleep(40 * PUBLISH)  # 12 s: a dozen pushes or more
    failures = relay.read_text()[mark:].count(FAILED)
    print(f"pushes that failed in the {40 * PUBLISH:.0f} s after the restart: {failures}")
    assert failures <= 1, relay.read_text()[-3000:]
