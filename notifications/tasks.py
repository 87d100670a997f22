"""Celery tasks of the notifications (entry points; the logic is in ``notifications.dispatch`` and ``.scan``).

The status sync only enqueues :func:`dispatch` (``on_job_events``); each delivery is a task of its own with a
short timeout, so a receiver that hangs delays neither the sync nor the other deliveries.
"""

from __future__ import annotations

import logging
from typing import Any

from celery import shared_task

from notifications import dispatch as dispatch_service
from notifications import scan as scan_service
from notifications import testsend

logger = logging.getLogger(__name__)


def on_job_events(sender: Any, events: list[dict[str, Any]], **_kwargs: Any) -> None:
    """Receiver of ``jobs.signals.job_events``: hand the events to the broker and return."""
    dispatch.delay(events)


def _enqueue(ids: list[int]) -> None:
    for delivery_id in ids:
        deliver.delay(delivery_id)


@shared_task(name="notifications.tasks.dispatch", ignore_result=True)
def dispatch(events: list[dict[str, Any]]) -> None:
    """Make the deliveries of ``events`` and enqueue each."""
    _enqueue(dispatch_service.record(events))


@shared_task(name="notifications.tasks.deliver", ignore_result=True)
def deliver(delivery_id: int) -> None:
    """One attempt of a delivery; a failure is tried again after 2, 4 and 8 seconds (3 retries)."""
    outcome = dispatch_service.attempt(delivery_id)
    if outcome is not None and outcome.retry_in is not None:
        deliver.apply_async((delivery_id,), countdown=outcome.retry_in)


@shared_task(name="notifications.tasks.send_test", ignore_result=True)
def send_test(channel_id: int, attempts: int = 1) -> None:
    """One attempt of a channel's test message (``notifications.testsend``); retried as a delivery is."""
    retry_in = testsend.attempt(channel_id, attempts)
    if retry_in is not None:
        send_test.apply_async((channel_id, attempts + 1), countdown=retry_in)


@shared_task(name="notifications.tasks.scan", ignore_result=True)
def scan() -> None:
    """Jobs Pending too long and log lines matching a rule (Celery beat, every 15 s)."""
    events = scan_service.pending_events()
    try:
        events += scan_service.log_events()
    except Exception:  # noqa: BLE001  (a cluster that does not answer must not stop the Pending check)
        logger.exception("notification log scan")
    if events:
        _enqueue(dispatch_service.record(events))
