"""Blocking work of async code (websocket consumers, async views, the SSH bastion) on a worker thread, with the
database connections it opened there handed back when it is done.

``asyncio.to_thread`` runs a function on a thread of the event loop's default executor and leaves whatever it
opened on that thread. Django's connections are per thread and are closed only at the end of a request, on the
request's own thread: a connection opened on an executor thread stayed open for the thread's life. With a pool
(``RLARK_DB_POOL``) that connection was never given back, and a web worker's pool ran dry after a few Logs-tab
visits (``psycopg_pool.PoolTimeout`` after 10 s, 500s on the logs and terminal pages); without one, every
executor thread kept a PostgreSQL backend. :func:`in_thread` closes them (back to the pool, if there is one).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import ParamSpec, TypeVar

from django.db import connections

P = ParamSpec("P")
R = TypeVar("R")


def _close_outside_transactions() -> None:
    """Close this thread's connections (Django keeps them per thread) that are not inside ``atomic()``: one in a
    transaction stays as it is (closing it would break the transaction; a test's own runs in one)."""
    for conn in connections.all(initialized_only=True):
        if not conn.in_atomic_block:
            conn.close()


def _closing(fn: Callable[P, R], *args: P.args, **kwargs: P.kwargs) -> R:
    try:
        return fn(*args, **kwargs)
    finally:
        _close_outside_transactions()


async def in_thread(fn: Callable[P, R], /, *args: P.args, **kwargs: P.kwargs) -> R:
    """``await asyncio.to_thread(fn, *args, **kwargs)``, then the database connections ``fn`` opened on the worker
    thread are closed (returned to the pool). Raises what ``fn`` raises."""
    return await asyncio.to_thread(_closing, fn, *args, **kwargs)


def release_connections() -> None:
    """Close this thread's database connections now (back to the pool, if there is one); the next query opens
    one again. Called before a response that streams for long (a whole log), which would otherwise hold a
    pooled connection until its last byte, since Django closes them only when the request has finished. A
    connection inside ``atomic()`` is left open."""
    _close_outside_transactions()
