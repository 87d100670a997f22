"""A full state directory (``var/``, ``RLARK_VAR_DIR``): said, never a bare 500.

``var/`` holds the SQLite database and broker (without ``DATABASE_URL`` / ``REDIS_URL``), the log archive, the
local runtime's Pods, the file cache and the keys. When its file system is full, writes fail with ``ENOSPC`` (an
``OSError``), SQLite's "database or disk is full" (or, in WAL mode, "disk I/O error") or PostgreSQL's ``DiskFull``
(SQLSTATE 53100), and each failed request used to answer Django's HTML 500.

- :func:`is_disk_full` recognises those errors, also when wrapped (``__cause__`` / ``__context__``).
- :class:`DiskFullMiddleware` turns one into a 503: ``{"code": "var_full", "detail"}`` under ``/api/``, a page
  with the banner elsewhere (one that needs no database: SQLite on a full disk cannot even open it); the failure
  is logged.
- :func:`var_full` (free space below ``RLARK_VAR_MIN_FREE_BYTES``, looked up at most every
  :data:`CHECK_SECONDS`) feeds the banner every page shows (context processor :func:`var_status`), so a user
  learns that changes and status updates are not being saved before their own write fails.
- :func:`report` logs a background failure (the status sync) once per :data:`REPORT_SECONDS` with what failed.
"""

from __future__ import annotations

import errno
import logging
import os
import sqlite3
import sys
import threading
import time
from pathlib import Path

from django.conf import settings
from django.core.signals import got_request_exception
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.template.loader import render_to_string
from django.utils import translation
from django.utils.translation import gettext as _

logger = logging.getLogger(__name__)

CHECK_SECONDS = 5.0
REPORT_SECONDS = 60.0
FULL_ERRNOS = {errno.ENOSPC, errno.EDQUOT}
DISK_FULL_SQLSTATE = "53100"
_lock = threading.Lock()
_checked: tuple[float, bool] = (float("-inf"), False)
_reported: dict[str, float] = {}


def _is_full_itself(exc: BaseException) -> bool:
    if isinstance(exc, OSError) and exc.errno in FULL_ERRNOS:
        return True
    if isinstance(exc, sqlite3.Error):
        primary = (getattr(exc, "sqlite_errorcode", None) or 0) & 0xFF
        if primary == sqlite3.SQLITE_FULL or "disk is full" in str(exc):
            return True
        # A WAL database on a full file system fails its write with "disk I/O error" (SQLITE_IOERR_*): full only
        # when var/ (where the database lives unless DATABASE_URL says otherwise) really has no space left.
        return primary == sqlite3.SQLITE_IOERR and _space_low()
    return getattr(exc, "sqlstate", None) == DISK_FULL_SQLSTATE  # psycopg.errors.DiskFull


def _space_low() -> bool:
    try:
        return var_free_bytes() < int(settings.RLARK_VAR_MIN_FREE_BYTES)
    except OSError:
        return False


def is_disk_full(exc: BaseException | None) -> bool:
    """True when ``exc``, or an exception it was raised from or during, says the disk is full."""
    seen: set[int] = set()
    while exc is not None and id(exc) not in seen:
        if _is_full_itself(exc):
            return True
        seen.add(id(exc))
        exc = exc.__cause__ or exc.__context__
    return False


def var_free_bytes(var_dir: Path | None = None) -> int:
    """Bytes an unprivileged writer may still use on ``var_dir``'s file system (``settings.VAR_DIR``).
    Raises OSError when the directory cannot be examined."""
    stat = os.statvfs(var_dir or settings.VAR_DIR)
    return stat.f_bavail * stat.f_frsize


def var_full(now: float | None = None) -> bool:
    """True when ``var/`` has less than ``RLARK_VAR_MIN_FREE_BYTES`` free. Looked up at most every
    :data:`CHECK_SECONDS` per process; a directory that cannot be examined counts as not full."""
    global _checked
    now = time.monotonic() if now is None else now
    with _lock:
        at, full = _checked
        if now - at < CHECK_SECONDS:
            return full
    full = _space_low()
    with _lock:
        _checked = (now, full)
    return full


def mark_full() -> None:
    """Remember (for :data:`CHECK_SECONDS`) that a write just failed for lack of space."""
    global _checked
    with _lock:
        _checked = (time.monotonic(), True)


def report(what: str, exc: BaseException) -> None:
    """Log that ``what`` (e.g. ``"status sync"``) failed because ``var/`` or the database's disk is full: an error
    with the cause, at most once per :data:`REPORT_SECONDS` for one ``what`` (the next ones at debug level)."""
    mark_full()
    now = time.monotonic()
    with _lock:
        last = _reported.get(what, float("-inf"))
        if now - last >= REPORT_SECONDS:
            _reported[what] = now
            loud = True
        else:
            loud = False
    logger.log(
        logging.ERROR if loud else logging.DEBUG,
        "%s failed: no space left in %s or the database's disk (%s); nothing is saved until space is freed",
        what,
        settings.VAR_DIR,
        exc,
    )


def full_message() -> str:
    """The banner's sentence in the active language."""
    return _(
        "The console's storage is full: changes and job status updates cannot be saved. "
        "An administrator must free space in the state directory (var/) or on the database's disk."
    )


def var_status(request: HttpRequest) -> dict[str, str]:
    """Context processor: ``{"var_full_message": sentence}`` while ``var/`` is full, else ``{}``."""
    return {"var_full_message": full_message()} if var_full() else {}


def _note_exception(sender, request: HttpRequest | None = None, **kwargs) -> None:
    """``got_request_exception`` receiver: marks ``request`` when the exception being handled is a full disk."""
    exc = sys.exc_info()[1]
    if request is not None and is_disk_full(exc):
        request.var_full_exception = exc


def full_response(request: HttpRequest, exc: BaseException) -> HttpResponse:
    """The 503 for ``request`` that failed with ``exc``: JSON ``{"code": "var_full", "detail"}`` under ``/api/``,
    else a page with the banner that needs no database (``var_full.html``, no context processors). The failure
    is logged (:func:`report`)."""
    report(f"{request.method} {request.path}", exc)
    with translation.override(translation.get_language_from_request(request)):
        message = full_message()
        if request.path.startswith("/api/"):
            return JsonResponse({"code": "var_full", "detail": message}, status=503)
        page = render_to_string("var_full.html", {"var_full_message": message})
    return HttpResponse(page, status=503)


class DiskFullMiddleware:
    """A request that failed because the disk is full answers :func:`full_response` (503) instead of Django's
    HTML 500: an exception of the view (``process_exception``) or of a middleware inside this one, such as the
    session's lookup when SQLite cannot even open the database (noted by :func:`_note_exception`). Other
    exceptions pass on."""

    def __init__(self, get_response) -> None:
        self.get_response = get_response
        got_request_exception.connect(_note_exception, dispatch_uid="rlark_console.varspace")

    def __call__(self, request: HttpRequest) -> HttpResponse:  # noqa: D102
        response = self.get_response(request)
        exc = getattr(request, "var_full_exception", None)
        if exc is not None and response.status_code == 500:
            return full_response(request, exc)
        return response

    def process_exception(self, request: HttpRequest, exception: Exception) -> HttpResponse | None:
        """The 503 for a full disk, else None (Django's own handling)."""
        return full_response(request, exception) if is_disk_full(exception) else None
