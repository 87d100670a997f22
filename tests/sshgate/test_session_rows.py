"""The audit row of a Worker session is closed even when the session is over before the row exists.

``ssh -tt <pod> "exit 5"`` can end within the time the bastion takes to write the session's row in a database
thread. The row's close must wait for its creation: a row left open says someone is still connected to the
Worker (the job page's "connected now") and never gets its end, exit code or bytes.
"""

from __future__ import annotations

import asyncio
import threading
import time

import pytest
from django.contrib.auth import get_user_model
from django.db import connection

from sshgate import access, sessions
from sshgate.models import SSHSession
from sshgate.server import Gate, WorkerServer
from terminal.services.runtimes import use_runtime_factory

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def no_runtime():
    use_runtime_factory(lambda cluster: None)  # the session never execs: only the row's life is under test
    yield
    use_runtime_factory(None)


def _closed() -> bool:
    try:
        return SSHSession.objects.filter(ended_at__isnull=False).exists()
    finally:
        connection.close()  # this thread's connection, not left to the test database's teardown


def test_a_session_over_before_its_row_is_written_still_closes_the_row(no_runtime, monkeypatch):
    user = get_user_model().objects.create_user("alice", password="x")
    identity = access.Identity(user_id=user.pk, username="alice", fingerprint="SHA256:abc", is_staff=False)
    target = access.WorkerTarget(job="demo", pod="demo-header-0", namespace="default", cluster=None, rank=0)
    written = threading.Event()
    open_row = sessions.open_row

    def slow_open_row(*args):  # the database is slow to answer: the client is gone before the row exists
        time.sleep(0.5)
        try:
            return open_row(*args)
        finally:
            written.set()

    monkeypatch.setattr(sessions, "open_row", slow_open_row)

    async def session() -> None:
        gate = Gate("127.0.0.1", 0)
        server = WorkerServer(gate, identity, target, "127.0.0.1:5555")
        server.auth_completed()  # starts writing the row
        server.exit_code = 5
        server.bytes_out = 12
        await asyncio.sleep(0.05)
        server.connection_lost(None)  # the client got its exit code and left
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline and not (written.is_set() and await asyncio.to_thread(_closed)):
            await asyncio.sleep(0.05)
        await asyncio.sleep(0.2)  # what is still running on the loop gets its turn
        assert server not in gate.live

    asyncio.run(session())
    assert written.is_set()
    row = SSHSession.objects.get()
    assert row.ended_at is not None, "the row stays open: the job page shows alice connected for ever"
    assert (row.exit_code, row.bytes_out, row.worker) == (5, 12, "demo-header-0")
    assert sessions.connected_now("demo") == []
