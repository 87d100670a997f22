"""A test message on one channel ("send a test"): the same sender, retries and error texts as a job's
deliveries (``notifications.send``, ``notifications.dispatch.backoff``), sent by the Celery task
``notifications.tasks.send_test``; its outcome is kept on the channel (``test_status`` pending, retrying, sent,
failed; ``test_error``; ``test_at``) and shown next to it. One test at a time per channel."""

from __future__ import annotations

from datetime import timedelta

from django.utils import timezone
from django.utils.translation import gettext_lazy as _
from django.utils.translation import gettext_noop

from accounts import audit
from notifications import dispatch, send, services
from notifications.models import Channel
from rlark_console.language import translate

TEST_TEXT = gettext_noop("RLark: a test message of the channel %(name)s.")
STALE = timedelta(minutes=2)  # a test still "under way" after this long (a lost task) may be started again


def start(user, channel: Channel, request=None) -> Channel:
    """Mark a test of ``channel`` (one of ``user``'s) as pending and enqueue it. Raises
    :class:`~notifications.services.NotifyError` (``busy``) while one is under way."""
    from notifications import tasks  # the task module imports this one

    now = timezone.now()
    busy = channel.test_status in ("pending", "retrying") and channel.test_at and now - channel.test_at < STALE
    if busy:
        raise services.NotifyError("test", _("A test message of this channel is already under way."), "busy")
    Channel.objects.filter(pk=channel.pk).update(test_status="pending", test_error="", test_at=now)
    audit.record(user, "notify.channel.test", "channel", str(channel.pk), request=request, name=channel.name)
    tasks.send_test.delay(channel.pk, 1)
    channel.refresh_from_db()
    return channel


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
