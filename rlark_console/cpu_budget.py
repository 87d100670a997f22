"""A CPU budget per HTTP request: no single request can hold a worker for more than a few seconds of
CPU.

Inputs are bounded before use (sizes, ``num_nodes``, linear patterns), so no request should come near the budget;
this is the backstop for what a bound missed. While a request runs, a watchdog thread of the process reads the
CPU clock of the request's thread (``time.pthread_getcpuclockid``: CPU time, not wall time, so a request that
waits on the database or a cluster is never cut). Once it passes ``RLARK_REQUEST_CPU_SECONDS`` (default 5; 0
turns the budget off) the watchdog raises :class:`RequestCPUExceeded` in that thread
(``PyThreadState_SetAsyncExc``, delivered at the next Python bytecode; a long call inside C code ends first), and
the middleware answers 503 with a localized message. Transactions roll back as for any exception, so nothing is
half-written. The watchdog never touches a thread after its request ended: unregistering clears an exception
that was raised but not yet delivered.
"""

from __future__ import annotations

import ctypes
import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from django.conf import settings
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.utils.translation import gettext as _

logger = logging.getLogger(__name__)

POLL_SECONDS = 0.1


class RequestCPUExceeded(BaseException):  # noqa: N818 - named for what happened; BaseException: views' `except Exception` must not swallow it
    """Raised inside a request's thread by the watchdog when the request used up its CPU budget."""


@dataclass
class _Running:
    clock: int
    started: float  # seconds of thread CPU time at the start of the request
    path: str
    fired: bool = False


class CPUWatchdog:
    """Watches the CPU time of the threads serving requests in this process (one instance per process)."""

    def __init__(self, poll: float = POLL_SECONDS) -> None:
        self._running: dict[int, _Running] = {}
        self._lock = threading.Lock()
        self._poll = poll
        self._thread: threading.Thread | None = None

    def register(self, path: str) -> int:
        ident = threading.get_ident()
        clock = time.pthread_getcpuclockid(ident)
        with self._lock:
            self._running[ident] = _Running(clock, time.clock_gettime(clock), path)
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(target=self._watch, name="rlark-cpu-budget", daemon=True)
                self._thread.start()
        return ident

    def unregister(self, ident: int) -> None:
        with self._lock:
            entry = self._running.pop(ident, None)
            if entry is not None and entry.fired:
                _async_raise(ident, None)  # raised but perhaps not delivered yet: never into the next request

    def _watch(self) -> None:
        while True:
            time.sleep(self._poll)
            limit = float(getattr(settings, "RLARK_REQUEST_CPU_SECONDS", 5))
            with self._lock:
                if not self._running:
                    self._thread = None
                    return
                for ident, entry in self._running.items():
                    if entry.fired or limit <= 0:
                        continue
                    try:
                        used = time.clock_gettime(entry.clock) - entry.started
                    except OSError:  # the thread is gone
                        continue
                    if used > limit:
                        entry.fired = True
                        logger.warning(
                            "request %s used %.1f s of CPU (budget %.1f s): aborted", entry.path, used, limit
                        )
                        _async_raise(ident, RequestCPUExceeded)


def _async_raise(ident: int, exc: type[BaseException] | None) -> None:
    """Raise ``exc`` in thread ``ident`` at its next bytecode (None clears a pending one)."""
    ctypes.pythonapi.PyThreadState_SetAsyncExc(ctypes.c_ulong(ident), ctypes.py_object(exc) if exc else None)


_watchdog = CPUWatchdog()


class CPUBudgetMiddleware:
    """Answers 503 (JSON for ``/api/``, text elsewhere, localized) for a request that used up its CPU budget."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse], watchdog: CPUWatchdog | None = None):
        self.get_response = get_response
        self.watchdog = watchdog or _watchdog

    def __call__(self, request: HttpRequest) -> HttpResponse:
        if float(getattr(settings, "RLARK_REQUEST_CPU_SECONDS", 5)) <= 0:
            return self.get_response(request)
        ident = self.watchdog.register(request.path)
        try:
            try:
                return self.get_response(request)
            finally:
                self.watchdog.unregister(ident)
        except RequestCPUExceeded:  # also when it arrives just before unregistering
            return too_much_cpu(request)


def too_much_cpu(request: HttpRequest) -> HttpResponse:
    limit = float(getattr(settings, "RLARK_REQUEST_CPU_SECONDS", 5))
    message = _("The request was stopped after %(seconds)s s of CPU time; try a smaller input.") % {
        "seconds": f"{limit:g}"
    }
    if request.path.startswith("/api/"):
        return JsonResponse({"code": "request_too_expensive", "detail": message}, status=503)
    return HttpResponse(message, status=503, content_type="text/plain; charset=utf-8")
