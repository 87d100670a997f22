"""Terminal session bookkeeping and audit (peers 5.2 "Audit": every exec, who, pod,
start, end, exit code).

Every session writes ``terminal.open`` when the shell starts and ``terminal.session`` when it
ends (duration in seconds, exit code or None, close reason). :func:`active_sessions` lists the
sessions this server process holds (used by tests and the bench to prove nothing leaks).
"""

from __future__ import annotations

import dataclasses
import threading
import uuid
from datetime import UTC, datetime

from accounts.audit import record

_lock = threading.Lock()
_active: dict[str, TerminalSession] = {}


@dataclasses.dataclass
class TerminalSession:
    """One WebTerminal connection to a Pod's ``main`` container."""

    user: object
    job: str
    pod: str
    namespace: str
    remote: str = ""
    id: str = dataclasses.field(default_factory=lambda: uuid.uuid4().hex[:12])
    started_at: datetime = dataclasses.field(default_factory=lambda: datetime.now(UTC))
    ended_at: datetime | None = None
    exit_code: int | None = None
    reason: str = ""


def open_session(user, job: str, pod: str, namespace: str, remote: str = "") -> TerminalSession:
    """Register a started session and audit ``terminal.open``. Database access."""
    session = TerminalSession(user=user, job=job, pod=pod, namespace=namespace, remote=remote)
    with _lock:
        _active[session.id] = session
    record(user, "terminal.open", "pod", pod, job=job, session=session.id, started=session.started_at.isoformat())
    return session


def close_session(session: TerminalSession, exit_code: int | None, reason: str) -> None:
    """Unregister and audit ``terminal.session`` (start, end, duration, exit code, reason). Idempotent."""
    with _lock:
        if _active.pop(session.id, None) is None:
            return
    session.ended_at = datetime.now(UTC)
    session.exit_code = exit_code
    session.reason = reason
    record(
        session.user,
        "terminal.session",
        "pod",
        session.pod,
        job=session.job,
        session=session.id,
        started=session.started_at.isoformat(),
        ended=session.ended_at.isoformat(),
        duration_s=round((session.ended_at - session.started_at).total_seconds(), 3),
        exit_code=exit_code,
        reason=reason,
        remote=session.remote,
    )


def active_sessions() -> list[TerminalSession]:
    """Sessions currently open in this process."""
    with _lock:
        return list(_active.values())
