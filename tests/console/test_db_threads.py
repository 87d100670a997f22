"""Blocking work of async code runs through ``rlark_console.db_threads.in_thread``: the database connections it
opened on the executor's threads are handed back, so a web worker's pool never runs dry and no PostgreSQL
backend is left per thread (``asyncio.to_thread`` kept them: PoolTimeout on the logs pages with a pool)."""

from __future__ import annotations

import asyncio
import threading
from concurrent.futures import ThreadPoolExecutor

import pytest
from django.db import connection, connections

from rlark_console.db_threads import in_thread

pytestmark = pytest.mark.django_db(transaction=True)


def _query() -> str:
    with connection.cursor() as cursor:
        cursor.execute("SELECT 1")
    return threading.current_thread().name


THREADS = 3


def _held_after(call) -> int:
    """How many of the executor's ``THREADS`` threads still hold an open connection after 12 ``call(_query)``
    (each thread is probed once, all at the same time, and its connection then closed)."""
    barrier = threading.Barrier(THREADS, timeout=30)

    def probe() -> bool:
        barrier.wait()  # every thread of the executor runs exactly one probe
        held = connections["default"].connection is not None
        connections.close_all()
        return held

    async def main() -> int:
        asyncio.get_running_loop().set_default_executor(ThreadPoolExecutor(THREADS))
        await asyncio.gather(*(call(_query) for _ in range(12)))
        return sum(await asyncio.gather(*(asyncio.to_thread(probe) for _ in range(THREADS))))

    return asyncio.run(main())


def test_in_thread_gives_back_the_connections_it_opened():
    assert _held_after(asyncio.to_thread) > 0  # a plain executor thread keeps what it opened (what in_thread fixes)
    assert _held_after(in_thread) == 0


def test_in_thread_returns_and_raises_what_the_function_does():
    assert asyncio.run(in_thread(lambda a, b=0: a + b, 2, b=3)) == 5
    with pytest.raises(ZeroDivisionError):
        asyncio.run(in_thread(lambda: 1 / 0))
