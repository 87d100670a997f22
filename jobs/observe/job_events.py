"""The events one sync pass produces for the apps above (``jobs.signals.job_events``): a job's phase changed, a
Worker restarted. Computed from the sync's :class:`jobs.observe.sync_rows.Changes` before they are written, sent
once the transaction commits, so a receiver never sees a state the database does not hold."""

from __future__ import annotations

import logging
from typing import Any

from django.db import transaction

from jobs.observe.sync_rows import Changes
from jobs.signals import job_events

logger = logging.getLogger(__name__)


def events_of(all_changes: list[Changes]) -> list[dict[str, Any]]:
    """``[{"job", "kind", "phase" | "worker", "attempt"}]`` of ``all_changes`` (call before they are written: the
    Job's ``phase`` is still the old one). A phase change is one whose new phase differs; a restart is a Pod row
    whose ``restart_count`` rose."""
    out: list[dict[str, Any]] = []
    for c in all_changes:
        job = c.job
        new_phase = c.job_fields.get("phase")
        if new_phase and new_phase != job.phase:
            out.append({"job": job.pk, "kind": "phase", "phase": str(new_phase), "attempt": job.attempt})
        for row, fields in c.updates.values():
            if "restart_count" in fields and row.restart_count > 0:
                out.append(
                    {
                        "job": job.pk,
                        "kind": "restart",
                        "worker": row.name,
                        "restarts": row.restart_count,
                        "attempt": job.attempt,
                    }
                )
    return out


def announce(events: list[dict[str, Any]]) -> None:
    """Send ``events`` to the receivers after the current transaction commits (at once outside one). A failing
    receiver is logged and never breaks the sync."""
    if not events:
        return

    def send() -> None:
        for _receiver, result in job_events.send_robust(sender=Changes, events=events):
            if isinstance(result, Exception):
                logger.warning("job_events receiver failed: %s", result)

    transaction.on_commit(send)
