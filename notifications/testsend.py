"""Sending a channel's test message ("send a test"; asked for through ``notifications.testrequest``): the same
sender, retries and error texts as a job's deliveries (``notifications.send``, ``notifications.dispatch.backoff``),
run by the Celery task ``notifications.tasks.send_test``; its outcome is kept on the channel (``test_status``
pending, retrying, sent, failed; ``test_error``; ``test_at``) and shown next to it."""

from __future__ import annotations

from django.utils import timezone
from django.utils.translation import gettext_noop

from notifications import dispatch, send
from notifications.models import Channel
from rlark_console.language import translate

TEST_TEXT = gettext_noop("RLark: a test message of the channel %(name)s.")


def attempt(channel_id: int, attempts: int) -> float | None:
    """Send the test once (attempt number ``attempts``, from 1) and store the outcome on the channel; returns the
    seconds before the next attempt, or None when done (sent, failed after ``dispatch.MAX_ATTEMPTS``, or the
    channel is gone)."""
    channel = Channel.objects.filter(pk=channel_id).first()
    if channel is None:
        return None
    text = translate(TEST_TEXT, channel.language) % {"name": channel.name}
    event = {"kind": "test", "job": "", "key": f"test:{channel.pk}"}
    retry_in: float | None = None
    try:
        send.deliver(channel, event, text)
    except send.SendError as exc:
        last = attempts >= dispatch.MAX_ATTEMPTS
        status, error = ("failed" if last else "retrying"), exc.stored
        retry_in = None if last else dispatch.backoff(attempts)
    else:
        status, error = "sent", ""
    Channel.objects.filter(pk=channel.pk).update(test_status=status, test_error=error, test_at=timezone.now())
    return retry_in
