"""What the run check reads and the words its evidence uses (seed 02-confirm-job-running).

Plain data, no database: :class:`RunCheckInput` (built by ``jobs.explain.runcheck.gather``) holds the derived
Tasks, the synced Pods, node labels, the Workers' log scans, the settings and the output path's state; each check
(``runcheck_job``, ``runcheck_pods``, ``runcheck_ray``, ``runcheck_app``, ``runcheck_progress``) returns
``(status, evidence lines)`` and :class:`CheckResult` carries one of them to the pages and the record.

Statuses: ``met`` / ``not_met`` / ``to_confirm`` = 符合预期 / 未符合 / 待确认 (the words of seed 02's record
template). Evidence never contains environment values or secrets (:func:`redact`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from django.utils.translation import gettext_noop

from jobs.observe.log_markers import LogScan
from jobs.observe.state_words import state_label
from rlark_console import language, pagetime

MET = "met"
NOT_MET = "not_met"
TO_CONFIRM = "to_confirm"

# status -> English msgid; the zh_Hans catalog of ``jobs`` has seed 02's words (符合预期 / 未符合 / 待确认).
STATUS_TEXT = {MET: gettext_noop("Met"), NOT_MET: gettext_noop("Not met"), TO_CONFIRM: gettext_noop("To confirm")}

# Row titles of the seed 02 record template as English msgids; the zh_Hans catalog has the template's exact titles.
CHECK_TITLES = [
    gettext_noop("Job created and configuration matches"),
    gettext_noop("Pod count and nodes correct"),
    gettext_noop("Ray started as expected"),
    gettext_noop("Application and configuration versions match"),
    gettext_noop("Workload progressing and output persisted"),
    gettext_noop("Result saved and next steps decided"),
]

# Statuses of the job after which no more evidence can come.
ENDED_PHASES = ("Succeeded", "Failed", "Stopped")


def tr(lang: str, message: str, **params: Any) -> str:
    """``message`` (an English msgid; the ``jobs`` catalog has its Chinese) in ``lang``, formatted with ``params``
    (``str.format`` fields) when given."""
    text = language.translate(message, lang)
    return text.format(**params) if params else text


def phase_label(phase: str, lang: str = "zh-hans") -> str:
    """A Job/Pod/Worker phase (``Running``, ``Completed``, ...) in ``lang``, as the pages show it
    (``jobs.observe.state_words``, the one table)."""
    return state_label(phase, lang)


def status_label(status: str, lang: str = "zh-hans") -> str:
    """The word of a status (``met`` ...) in ``lang``: 符合预期 / Met, ..."""
    return language.translate(STATUS_TEXT[status], lang)


def check_title(number: int, lang: str = "zh-hans") -> str:
    """The title of check ``number`` (1..6) in ``lang``: the seed 02 record's row title in Chinese."""
    return language.translate(CHECK_TITLES[number - 1], lang)


def time_label(value: datetime | None) -> str:
    """A time as every page shows it: the page's zone with its abbreviation; ``-`` for None."""
    return pagetime.label(value) if value else "-"


SECRET_RE = re.compile(
    r"(?i)((?:password|passwd|pwd|secret|token|access[_-]?key|secret[_-]?key|api[_-]?key|private[_-]?key|"
    r"authorization)\s*[=:]\s*)(\"[^\"]*\"|'[^']*'|\S+)"
)


def redact(text: str, secrets: list[str] | None = None) -> str:
    """Mask ``key=value`` secrets and any of ``secrets`` (e.g. the job's env values) in one evidence line."""
    out = SECRET_RE.sub(lambda m: m.group(1) + "***", text)
    for value in sorted(secrets or [], key=len, reverse=True):
        if value and len(value) >= 4:
            out = out.replace(value, "***")
    return out[:500]


@dataclass
class TaskView:
    """A derived Task: ``template``/``role`` names, planned ``replicas``, ``rank_start``, ``selector``."""

    name: str
    template: str
    role: str
    head: bool
    replicas: int
    rank_start: int
    selector: dict[str, str] = field(default_factory=dict)
    cluster: str = ""


@dataclass
class PodRow:
    """A Worker Pod as synced: ``task`` is the Task name."""

    name: str
    task: str
    ordinal: int
    node: str = ""
    ip: str = ""
    phase: str = ""
    ready: bool = False
    restarts: int = 0
    reason: str = ""


@dataclass
class OutputCheck:
    """Result of checking the output path: ``state`` ``ok`` | ``missing`` | ``unreadable`` | ``unsupported`` |
    ``unset``; for ``ok``: ``files`` (count), ``sample`` (container path of the newest file), ``size`` (bytes)
    and ``sha256`` of that file (its first ``runcheck_output.HASH_LIMIT`` bytes)."""

    state: str
    path: str = ""
    files: int = 0
    sample: str = ""
    size: int = 0
    sha256: str = ""
    detail: str = ""


@dataclass
class RunCheckInput:
    """Everything the checks read (plain data; ``runcheck.gather`` builds it from the database and runtime)."""

    job: str
    phase: str
    stopped: bool
    created_at: datetime | None
    started_at: datetime | None
    finished_at: datetime | None
    now: datetime
    document: dict[str, Any]
    tasks: list[TaskView]
    pods: list[PodRow]
    node_labels: dict[str, dict[str, str]]
    num_nodes: int | None
    logs: dict[str, str]
    settings: dict[str, Any]
    output: OutputCheck
    secrets: list[str] = field(default_factory=list)
    scans: dict[str, LogScan] | None = None  # stored scans by Pod name (``log_scans``); None: scan ``logs``
    scans_as_of: datetime | None = None  # when the oldest of ``scans`` read its log
    refreshing: bool = False  # some scans are older than the max age; a background refresh was asked for


@dataclass
class CheckResult:
    """One check: ``number`` 1..6, ``status``, localized ``evidence`` lines, ``checked_at``."""

    number: int
    status: str
    evidence: list[str]
    checked_at: datetime

    def title(self, lang: str = "zh-hans") -> str:
        return check_title(self.number, lang)

    def label(self, lang: str = "zh-hans") -> str:
        return status_label(self.status, lang)

    def to_dict(self, lang: str = "zh-hans") -> dict[str, Any]:
        return {
            "number": self.number,
            "title": self.title(lang),
            "status": self.status,
            "statusLabel": self.label(lang),
            "evidence": self.evidence,
            "checkedAt": self.checked_at.isoformat(),
        }


def waited_out(data: RunCheckInput) -> bool:
    """True when missing evidence can no longer come: the job ended/stopped or the max wait passed."""
    if data.phase in ENDED_PHASES or data.stopped:
        return True
    start = data.started_at or data.created_at
    if start is None:
        return False
    return (data.now - start).total_seconds() > int(data.settings["max_wait_minutes"]) * 60


def missing_status(data: RunCheckInput) -> str:
    """The status of evidence not seen yet: ``not_met`` once :func:`waited_out`, else ``to_confirm``."""
    return NOT_MET if waited_out(data) else TO_CONFIRM


def is_head(data: RunCheckInput, pod: PodRow) -> bool:
    """True when ``pod`` belongs to the header's Task."""
    return any(t.head and t.name == pod.task for t in data.tasks)


def head_first(data: RunCheckInput) -> list[PodRow]:
    """The Pods in the order their logs are searched: the header's first, then by Task name and ordinal."""
    return sorted(data.pods, key=lambda p: (0 if is_head(data, p) else 1, p.task, p.ordinal))
