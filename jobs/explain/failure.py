"""The failure of a Failed job, summarised for the Diagnosis: which Worker, its last stage, its exit code, its first
error and the last lines before the exit.

Seed 05-troubleshooting-jobs-workers, "Worker 异常或日志显示进程失败": choose the failing role and Worker, "定位第一条
错误，而不是只看最后一行", tell apart image/mounts, prepare script, Ray formation and the run command; "联系平台管理员
时提供": the first error with the lines around it. So the Diagnosis of a Failed job never has nothing to say.

- :func:`failure_of` ``(job, tasks, workers) -> JobFailure | None``: None unless ``job.phase`` is ``Failed``. The
  failing Worker is the one the status rules name (``jobs.observe.phases.worker_failures``, the Header's first, as
  the job's message); a job-wide failure (an image that cannot be pulled) has no Worker.
- The log is read through the runtime, or the log archive once the Pod is gone
  (``jobs.observe.status.read_worker_log``): the last ``READ_LINES`` lines of the current container and, when the
  current log shows no exit and no error, of the previous one, then of their archived copies (the kubelet may
  have restarted the container after the last sync, so the synced restart count is not asked).
- ``rayLogs``: Ray's own files of the Worker's failed runs can be downloaded (local runtime; ``jobs.observe.ray_logs``).
- ``tail``: the ``TAIL_LINES`` lines up to the exit (the last ``Run script exited with code``, ``Ray worker process
  exited with code`` or ``Error: Ray CLI is not found.`` line), else the log's last ``TAIL_LINES``.
- ``first_error``: the scan's first error after the last completed stage (``jobs.observe.log_markers``), else the
  container's termination message.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

from django.utils import translation
from django.utils.translation import gettext_noop

from clusters.runtime.base import RuntimeFailure
from jobs.control import log_archive
from jobs.models import Phase
from jobs.observe import phases, ray_logs
from jobs.observe.log_markers import RAY_EXIT, RUN_EXIT, scan_log
from jobs.observe.status import localized_message, read_worker_log
from rlark_console.language import translate

TAIL_LINES = 20  # lines shown before the exit
READ_LINES = 400  # lines read from the end of a log to find the exit and the lines before it
KEEP_LINE = 500  # characters kept of one line
RETRY_SECONDS = 2.0  # wait before the live logs are read again when no read showed the failure
RAY_MISSING = "Error: Ray CLI is not found."

SOURCE_TEXT = {
    "current": gettext_noop("the current container's log"),
    "previous": gettext_noop("the previous container's log (the container restarted)"),
    "none": gettext_noop("no log could be read"),
}


@dataclass(frozen=True)
class JobFailure:
    """Why a job failed. ``pod``/``role``/``head`` name the failing Worker ("" for a job-wide failure); ``reason`` is
    the ``Failed`` condition's reason (``RunScriptFailed``, ``WorkerExited``, ``CrashLoop`` ...); ``stage`` the
    last completed stage's key (``jobs.explain.diagnosis.STAGE_TEXT``); ``exit_code`` None when unknown;
    ``first_error`` ``(line_no, line)`` (line 0: the termination message); ``tail`` the lines before the exit;
    ``source`` ``current`` | ``previous`` | ``none`` (which container's log ``tail`` comes from); ``ray_logs``: Ray's
    own log files of the Worker's failed runs can be downloaded (``jobs.observe.ray_logs``)."""

    reason: str
    message: str
    pod: str = ""
    role: str = ""
    head: bool = False
    stage: str = "none"
    exit_code: int | None = None
    first_error: tuple[int, str] | None = None
    tail: list[str] = field(default_factory=list)
    source: str = "none"
    ray_logs: bool = False

    def to_dict(self, lang: str, stage_label: str, advice: str) -> dict[str, Any]:
        """The API's ``failure`` object in ``lang``; ``stage_label``/``advice``: the Diagnosis's texts of ``stage``."""
        with translation.override(lang):
            message = localized_message(self.message)
        return {
            "reason": self.reason,
            "message": message,
            "pod": self.pod,
            "role": self.role,
            "head": self.head,
            "lastStage": self.stage,
            "lastStageLabel": stage_label,
            "advice": advice,
            "exitCode": self.exit_code,
            "firstError": {"lineNo": self.first_error[0], "line": self.first_error[1]} if self.first_error else None,
            "tail": self.tail,
            "previous": self.source == "previous",
            "source": translate(SOURCE_TEXT[self.source], lang),
            "rayLogs": self.ray_logs,
        }


def failed_worker(job, tasks: list) -> tuple[Any, Any, phases.Failure] | None:
    """``(task, pod row, failure)`` of the Worker the status rules name for a Failed ``job`` (``tasks`` with their
    Pods loaded), the Header's failure first; None when no Worker failed (a job-wide failure)."""
    found = []
    for task in tasks:
        for row in task.pods.all():
            for failure in phases.worker_failures(job, task, row):
                found.append((task, row, failure))
    found.sort(key=lambda item: not item[2].head)
    return found[0] if found else None


def exit_code_of(row, failure: phases.Failure) -> int | None:
    """The exit code the failure is about: the run script's or the Ray worker process's logged code, else the
    container's (this instance's, else the previous one's)."""
    signals = phases.signals_of(row)
    if failure.reason == "RunScriptFailed" and signals.get("runExit") is not None:
        return int(signals["runExit"])
    if signals.get("rayExit") not in (None, 0):
        return int(signals["rayExit"])
    if row.exit_code is not None:
        return int(row.exit_code)
    last = (row.container_state or {}).get("last_exit_code")
    return int(last) if last is not None else None


def _is_exit(line: str) -> bool:
    m = RUN_EXIT.search(line) or RAY_EXIT.search(line)
    return (m is not None and m.group(1) != "0") or line.strip().startswith(RAY_MISSING)


def tail_before_exit(lines: list[str], count: int = TAIL_LINES) -> list[str]:
    """The ``count`` lines up to and with the last exit line of ``lines`` (the log's last ``count`` when none)."""
    end = next((i + 1 for i in range(len(lines) - 1, -1, -1) if _is_exit(lines[i])), len(lines))
    return [line[:KEEP_LINE] for line in lines[max(0, end - count) : end]]


def _read(job, pod: str, previous: bool) -> str:
    try:
        return read_worker_log(job, pod, tail=READ_LINES, previous=previous)
    except (RuntimeFailure, OSError):
        return ""


def _archived(job, pod: str, previous: bool) -> str:
    path = log_archive.find(job.name, pod, previous)
    try:
        return log_archive.read_tail(path, READ_LINES) if path is not None else ""
    except OSError:
        return ""


def _failed_log(job, pod: str, restarting: bool = False) -> tuple[str, str]:
    """``(text, source)`` of the container run that failed: the first of the current log, the previous one, then
    their archived copies, that shows an exit or an error. The kubelet may restart the container (and the
    runtime may be stopping the Pod) between the sync that saw the exit and this read, so the synced restart
    count is not asked; when no read shows the failure, the live logs are read once more after
    :data:`RETRY_SECONDS` (a container just replaced may have only its first lines, and its previous one may not
    be listed yet; ``restarting``: it restarted before, so even an empty read is worth a second look).
    Nothing shows one: the current log (the previous one when the current is empty)."""
    current = _read(job, pod, previous=False)
    previous = (lambda: _read(job, pod, previous=True), "previous")
    reads = (
        (lambda: current, "current"),
        previous,
        (lambda: _archived(job, pod, previous=False), "current"),
        (lambda: _archived(job, pod, previous=True), "previous"),
    )
    found, fallback = _first_showing(reads, (current, "current"))
    if found is None and (restarting or current):  # a live container: its log may still be coming
        time.sleep(RETRY_SECONDS)  # a container the kubelet is just replacing may have no log yet
        found, fallback = _first_showing(((lambda: _read(job, pod, previous=False), "current"), previous), fallback)
    return found or fallback


def _first_showing(reads, fallback: tuple[str, str]) -> tuple[tuple[str, str] | None, tuple[str, str]]:
    """``(the first (text, source) of `reads` that shows an exit or an error, or None; fallback)``: ``fallback``
    becomes the first non-empty text read when it is empty. ``reads``: ``(read(), source)`` pairs, read in order
    until one shows the failure."""
    for read, source in reads:
        text = read()
        if text and _has_exit_or_error(text):
            return (text, source), fallback
        if text and not fallback[0]:
            fallback = (text, source)
    return None, fallback


def _has_exit_or_error(text: str) -> bool:
    scan = scan_log(text)
    return scan.first_error is not None or any(_is_exit(line) for line in text.splitlines()[-READ_LINES:])


def failure_of(job, tasks: list, worker_stage: dict[str, tuple[str, tuple[int, str] | None]]) -> JobFailure | None:
    """The summary of a Failed ``job`` (None for any other phase). ``tasks``: the job's Tasks with Pods loaded;
    ``worker_stage``: Pod name -> ``(last stage key, first error)`` from the Diagnosis of the current logs."""
    if job.phase != Phase.FAILED:
        return None
    named = failed_worker(job, tasks)
    if named is None:
        return JobFailure(reason=_failed_reason(job), message=job.message)
    task, row, failure = named
    stage, first_error = worker_stage.get(row.name, ("none", None))
    text, source = _failed_log(job, row.name, restarting=row.restart_count > 0)
    if source == "previous":
        first_error = None  # the Diagnosis read the current container's log
    if not text:
        source = "none"
    elif first_error is None:  # the log read here (the previous container's, or the archived copy)
        scan = scan_log(text)
        last = scan.last_stage
        stage = last.key if last else stage
        first_error = scan.first_error_after(last.line_no if last else 0)
    termination = str((row.container_state or {}).get("message") or "").strip()
    if first_error is None and termination:
        first_error = (0, termination[:KEEP_LINE])
    return JobFailure(
        reason=failure.reason,
        message=job.message or failure.message,
        pod=row.name,
        role=task.display_role or task.template_name,
        head=task.head,
        stage=stage,
        exit_code=exit_code_of(row, failure),
        first_error=first_error,
        tail=tail_before_exit(text.splitlines()),
        source=source,
        ray_logs=ray_logs.available(job, row.name),
    )


def _failed_reason(job) -> str:
    return next((c.get("reason", "") for c in job.conditions or [] if c.get("type") == "Failed"), "")
