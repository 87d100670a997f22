"""Asking for a channel's test message ("send a test"): one test at a time per channel; the Celery task
``notifications.tasks.send_test`` sends it (``notifications.testsend``)."""

from __future__ import annotations

from datetime import timedelta

from django.utils import timezone
from django.utils.translation import gettext_lazy as _

from accounts import audit
from notifications import services, tasks
from notifications.models import Channel

STALE = timedelta(minutes=2)  # a test still "under way" after this long (a lost task) may be started again


def start(user, channel: Channel, request=None) -> Channel:
    """Mark a test of ``channel`` (one of ``user``'s) as pending and enqueue it. Raises
    :class:`~notifications.services.NotifyError` (``busy``) while one is under way."""
    now = timezone.now()
    busy = channel.test_status in ("pending", "retrying") and channel.test_at and now - channel.test_at < STALE
    if busy:
        raise services.NotifyError("test", _("A test message of this channel is already under way."), "busy")
    Channel.objects.filter(pk=channel.pk).update(test_status="pending", test_error="", test_at=now)
    audit.record(user, "notify.channel.test", "channel", str(channel.pk), request=request, name=channel.name)
    tasks.send_test.delay(channel.pk, 1)
    channel.refresh_from_db()
    return channel
