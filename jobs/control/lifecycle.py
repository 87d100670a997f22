"""Which job actions a phase allows: the one rule the list, the detail page, the API and the CLI apply.

From ``upstream-rlark.md`` 6.1 and 8.2: Succeeded and Failed are terminal, "terminal jobs cannot be started or
stopped" (the list disables the Start/Stop icon with that reason); RLark Console goes further with Restart, which
begins a new attempt from any phase, also from a finished one. A Stopped job is not finished: Start resumes it.
"""

from __future__ import annotations

from dataclasses import dataclass

from django.utils.translation import gettext_noop

from jobs.models import Job, Phase

TERMINAL = (Phase.SUCCEEDED, Phase.FAILED)  # finished: the controller never reconciles them again (6.1)
ACTIONS = ("stop", "start", "restart", "delete")

# English msgid (jobs catalog has the Chinese): why Start and Stop are refused for a finished job.
FINISHED_REFUSAL = gettext_noop(
    "This job has finished (Succeeded or Failed): it cannot be started or stopped. Restart begins a new run."
)


@dataclass(frozen=True)
class Allowed:
    """One action of a job: ``allowed``; ``reason``: the English msgid of why not ("" when allowed)."""

    allowed: bool
    reason: str = ""


def finished(job: Job) -> bool:
    """True when ``job``'s phase is terminal (Succeeded or Failed)."""
    return job.phase in TERMINAL


def refusal(job: Job, action: str) -> str:
    """The English msgid of why ``action`` (one of :data:`ACTIONS`) is refused for ``job`` now; "" when it is
    allowed. Raises ``ValueError`` for an unknown action."""
    if action not in ACTIONS:
        raise ValueError(f"unknown action {action!r}")
    if action in ("start", "stop") and finished(job):
        return FINISHED_REFUSAL
    return ""


def allowed_actions(job: Job) -> dict[str, Allowed]:
    """``{action: Allowed}`` for every action of :data:`ACTIONS`, as :func:`refusal` decides."""
    out = {}
    for action in ACTIONS:
        reason = refusal(job, action)
        out[action] = Allowed(allowed=not reason, reason=reason)
    return out
