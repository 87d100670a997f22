"""One command in a Worker's ``main`` container, run to its end: what ``rlark exec JOB [WORKER] -- CMD`` asks for.

The permission path is the WebTerminal's (:func:`terminal.services.access.check_job`, then the job's Pods as the
runtime reports them, then ``Runtime.exec``), and it is audited as a terminal session (``terminal.open`` /
``terminal.session`` with the exit code), so a command through the API can do exactly what a shell on the
Workers tab can, no more. Every size is bounded: the command's words and length (:data:`MAX_ARGS`,
:data:`MAX_COMMAND_BYTES`), the output kept (:data:`MAX_OUTPUT`, the rest counted and dropped) and the time
(:data:`MAX_TIMEOUT` seconds).
"""

from __future__ import annotations

import dataclasses
import time

from django.utils.translation import gettext as _

from clusters.runtime.base import PodNotFound, RuntimeFailure
from terminal.services import access, logs, sessions
from terminal.services.runtimes import runtime_for

MAX_ARGS = 256
MAX_COMMAND_BYTES = 16 * 1024
MAX_OUTPUT = 1024 * 1024  # bytes of output kept; more is counted and dropped
DEFAULT_TIMEOUT = 60.0
MAX_TIMEOUT = 600.0


class CommandRefused(Exception):
    """The command was not run. ``status`` is the HTTP status to answer (400 invalid, 403 not allowed, 404 job or
    Worker not found, 409 the Worker does not run now, 503 the runtime cannot be reached); ``str(exc)`` the
    sentence to show, in the request's language."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


@dataclasses.dataclass
class CommandResult:
    """``output``: the command's terminal output (stdout and stderr interleaved, as a PTY gives them; UTF-8 with
    replacement), at most :data:`MAX_OUTPUT` bytes; ``dropped``: bytes beyond that; ``exit_code``: the process's
    exit code, None when it did not end within the timeout (it is then killed); ``pod``: the Worker it ran in."""

    pod: str
    output: str
    exit_code: int | None
    timed_out: bool
    dropped: int

    def to_dict(self) -> dict:
        return {
            "pod": self.pod,
            "output": self.output,
            "exitCode": self.exit_code,
            "timedOut": self.timed_out,
            "droppedBytes": self.dropped,
        }


def check_command(command: object, timeout: object) -> tuple[list[str], float]:
    """``command`` (a non-empty list of strings, at most :data:`MAX_ARGS` words and :data:`MAX_COMMAND_BYTES`
    bytes in all) and ``timeout`` (seconds, 1 to :data:`MAX_TIMEOUT`; None = :data:`DEFAULT_TIMEOUT`), checked.
    Raises CommandRefused(400) with the reason."""
    if not isinstance(command, list) or not command or not all(isinstance(w, str) for w in command):
        raise CommandRefused(400, _("command must be a non-empty list of strings"))
    if len(command) > MAX_ARGS or sum(len(w.encode()) + 1 for w in command) > MAX_COMMAND_BYTES:
        raise CommandRefused(
            400,
            _("the command is too long (at most %(words)d words and %(size)d bytes)")
            % {
                "words": MAX_ARGS,
                "size": MAX_COMMAND_BYTES,
            },
        )
    if any("\x00" in w for w in command):
        raise CommandRefused(400, _("the command contains a NUL character"))
    if timeout is None:
        return command, DEFAULT_TIMEOUT
    try:
        seconds = float(timeout)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        seconds = -1.0
    if not 1 <= seconds <= MAX_TIMEOUT:
        raise CommandRefused(400, _("timeout must be between 1 and %(max)d seconds") % {"max": int(MAX_TIMEOUT)})
    return command, seconds


def pick_target(targets: list[logs.LogTarget], job: str, worker: str) -> logs.LogTarget | None:
    """The Worker ``worker`` names (its Pod name, or the part after ``<job>-``, e.g. ``rollout-1``), else the
    Header (rank 0); None when there is no such Worker."""
    if worker:
        return next((t for t in targets if t.pod in (worker, f"{job}-{worker}")), None)
    return min(targets, key=lambda t: t.rank, default=None)


def check_access(user, job_name: str):
    """The Job ``job_name`` when ``user`` may open a terminal in it. Raises CommandRefused (401 not signed in, 404
    no such job of theirs); asked before the request's body is looked at, so a stranger learns nothing from a
    400."""
    try:
        return access.check_job(user, job_name)
    except access.AccessDenied as exc:
        raise CommandRefused(401 if exc.code == access.CLOSE_AUTH else 404, str(exc))


def run_command(user, job, worker: str, command: list[str], timeout: float, remote: str = "") -> CommandResult:
    """Run ``command`` (checked by :func:`check_command`) in Worker ``worker`` of ``job`` (as :func:`check_access`
    returned it for ``user``) and wait for its end, at most ``timeout`` seconds. Blocking (database and runtime
    calls). Raises CommandRefused."""
    targets, _warnings = logs.resolve_targets(logs.load_layout(job))
    target = pick_target(targets, job.name, worker)
    if target is None:
        raise CommandRefused(404, _("job %(job)s has no Worker %(worker)s") % {"job": job.name, "worker": worker})
    if not target.exists:  # a finished or stopped job's Workers are gone: its phase says why
        raise CommandRefused(
            409,
            _("job %(job)s is %(phase)s: a command runs only in a running Worker")
            % {"job": job.name, "phase": job.phase},
        )
    if target.phase != "Running":
        raise CommandRefused(
            409,
            _("Worker %(pod)s is %(phase)s: a command runs only in a running Worker")
            % {
                "pod": target.pod,
                "phase": target.phase,
            },
        )
    try:
        stream = runtime_for(target.cluster).exec(target.namespace, target.pod, command)
    except PodNotFound as exc:
        raise CommandRefused(404, str(exc))
    except RuntimeFailure as exc:
        raise CommandRefused(409 if exc.reason == "conflict" else 503, str(exc))
    session = sessions.open_session(user, job.name, target.pod, target.namespace, remote)
    out, dropped, timed_out = bytearray(), 0, False
    deadline = time.monotonic() + timeout
    try:
        while True:
            if time.monotonic() > deadline:
                timed_out = True
                break
            chunk = stream.read(timeout=0.2)
            if chunk is None:
                continue
            if not chunk:
                break
            room = MAX_OUTPUT - len(out)
            out += chunk[:room]
            dropped += max(0, len(chunk) - room)
        code = None if timed_out else _wait_exit(stream)
    finally:
        stream.close()
    sessions.close_session(session, code, "timeout" if timed_out else "exit")
    text = out.decode("utf-8", "replace").replace("\r\n", "\n")
    return CommandResult(pod=target.pod, output=text, exit_code=code, timed_out=timed_out, dropped=dropped)


def _wait_exit(stream, wait: float = 5.0) -> int | None:
    """The exit code of a stream at EOF (a runtime may set it a moment after the output ends)."""
    deadline = time.monotonic() + wait
    while stream.exit_code is None and time.monotonic() < deadline:
        time.sleep(0.05)
    return stream.exit_code
