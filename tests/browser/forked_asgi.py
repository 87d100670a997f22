"""The console's ASGI app (pages and websockets) under daphne in a process forked from the test process, on the
test database (the test's Django settings and data are the child's).

A fork copies only the forking thread. asgiref runs every thread-sensitive ``sync_to_async`` call (Django's
``database_sync_to_async`` among them) on one class-level ``ThreadPoolExecutor``; once an earlier test of the
session has used it, the child inherits an executor that believes its worker thread exists, and every call
queued there waits forever (the Logs tab's websocket never got past ``connect``). The child gets a fresh one.
"""

from __future__ import annotations

from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager


def _application():
    from asgiref.sync import SyncToAsync

    SyncToAsync.single_thread_executor = ThreadPoolExecutor(max_workers=1)
    from launcher.asgi import application

    return application


@contextmanager
def forked_asgi_server(timeout: float = 30) -> Iterator[str]:
    """Yield the base URL (``http://127.0.0.1:<port>``) of daphne serving ``launcher.asgi`` in a forked child;
    the child is terminated on exit. Raises AssertionError when it is not listening within ``timeout`` s."""
    from daphne.testing import DaphneProcess

    proc = DaphneProcess("127.0.0.1", _application)
    proc.daemon = True
    proc.start()
    try:
        assert proc.ready.wait(timeout), "daphne did not start"
        yield f"http://127.0.0.1:{proc.port.value}"
    finally:
        proc.terminate()
        proc.join(10)
