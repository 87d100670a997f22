"""The one status headline of a job and the labels that depend on whether it has ended.

Every page that shows a job's state asks :func:`job_headline` (the detail header, the jobs list), so a state has
exactly one headline, and the stored ``message`` is shown below it only when it says something the headline does
not (no "Workers are waiting to schedule or start" beside "All Workers started; waiting for the Ray cluster to
form"). Headline keys (upstream-rlark 8.3 plus ``forming``):

=============  =========================================================================================
``stopped``    stopped by a user (or ``spec.stopped``); 0 Workers ready, whatever the last sync saw
``completed``  Succeeded: every Worker counts as completed (the progress bar is full and says so)
``failed``     Failed; 0 Workers ready
``forming``    Pending with every Worker ready: the Ray cluster is forming
``waiting``    Pending with Workers not ready yet
``active``     Running
=============  =========================================================================================
"""

from __future__ import annotations

from dataclasses import dataclass

from django.utils.translation import gettext as _

from jobs.models import Phase
from jobs.observe.state_words import COMPLETED, state_label
from jobs.observe.status import localized_message

RAY_FORMING = "All Workers started; waiting for the Ray cluster to form"  # the sync's message (jobs.observe.sync)
ENDED = (Phase.STOPPED, Phase.SUCCEEDED, Phase.FAILED)


@dataclass(frozen=True)
class Headline:
    """``key`` (table above), ``text`` (in the active language), ``message`` (the stored message in the active
    language, "" when it repeats the headline), ``ready``/``total`` Workers and ``percent`` (0-100) of the
    progress bar, which always match: ``ready`` counts completed Workers for a Succeeded job (``count_label``
    "completed") and is 0 once a job was stopped or failed; ``ended`` (the run is over: "Ran for")."""

    key: str
    text: str
    message: str
    ready: int
    total: int
    percent: int
    count_label: str
    ended: bool


def headline_key(job, ready: int, total: int) -> str:
    if job.phase == Phase.STOPPED or job.stopped:
        return "stopped"
    if job.phase == Phase.SUCCEEDED:
        return "completed"
    if job.phase == Phase.FAILED:
        return "failed"
    if job.phase == Phase.PENDING:
        return "forming" if (total and ready >= total) or job.message == RAY_FORMING else "waiting"
    return "active"


def _texts() -> dict[str, str]:
    return {
        "stopped": _("Job stopped"),
        "completed": _("All Workers completed"),
        "failed": _("Job failed"),
        "forming": _("All Workers started; waiting for the Ray cluster to form"),
        "waiting": _("Workers are waiting to schedule or start"),
        "active": _("Job active"),
    }


def job_headline(job, ready: int, total: int) -> Headline:
    """The headline of ``job`` whose Workers are ``ready`` of ``total`` by the last sync (Task or Pod rows)."""
    key = headline_key(job, ready, total)
    text = _texts()[key]
    message = localized_message(job.message or "")
    if message.strip().rstrip(".") == text.rstrip(".") or job.message in ("Job stopped", RAY_FORMING):
        message = ""
    if key == "completed":
        ready = total
    elif key in ("stopped", "failed"):
        ready = 0
    percent = round(min(ready, total) * 100 / total) if total else 0
    return Headline(
        key=key,
        text=text,
        message=message,
        ready=ready,
        total=total,
        percent=percent,
        count_label="completed" if key == "completed" else "ready",
        ended=job.phase in ENDED or bool(job.stopped),
    )


def worker_phase_of(job_phase: str, stopped: bool, phase: str) -> str:
    """A Worker's phase as every tab shows it (Workers, Metrics, Diagnosis, Run check: one name, the fresh-clone
    trial found four): every Worker of a Succeeded job that did not fail is ``Completed`` (whether its Pod
    succeeded, was stopped by the console, or its last sync still said Running/Pending); a Worker of a stopped or
    failed job that was still Running/Pending is ``Stopped``; others keep theirs."""
    if job_phase == Phase.SUCCEEDED and phase != Phase.FAILED:
        return COMPLETED
    if (job_phase in ENDED or stopped) and phase in (Phase.RUNNING, Phase.PENDING):
        return Phase.STOPPED
    return phase


def worker_phase(job, phase: str) -> str:
    """:func:`worker_phase_of` for ``job``."""
    return worker_phase_of(job.phase, bool(job.stopped), phase)


def worker_phase_label(phase: str) -> str:
    """The name of a :func:`worker_phase` in the active language (``jobs.observe.state_words``, the one table)."""
    return state_label(phase)
