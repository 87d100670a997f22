"""Notification channels, rules and deliveries (issue: notifications).

A :class:`Channel` is where a user's messages go (a signed webhook, a Feishu/Lark bot, Slack, e-mail); its URL
and secret are encrypted at rest. A :class:`Rule` says which events of which jobs go to a channel: ``job`` empty
is the owner's default for all of their jobs. A :class:`Delivery` is one message for one event, with its status,
attempts and last error; its ``key`` makes an event deliver once per rule.
"""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.utils.translation import gettext_lazy as _

from jobs.models import Job
from notifications import errors, safety
from rlark_console.crypto import EncryptedTextField


class Kind(models.TextChoices):
    """The kinds of channel."""

    WEBHOOK = "webhook", _("Webhook (signed)")
    FEISHU = "feishu", _("Feishu / Lark bot")
    SLACK = "slack", _("Slack")
    EMAIL = "email", _("E-mail")


class Event(models.TextChoices):
    """What a rule may fire on."""

    RUNNING = "Running", _("Running")
    SUCCEEDED = "Succeeded", _("Succeeded")
    FAILED = "Failed", _("Failed")
    STOPPED = "Stopped", _("Stopped")
    PENDING_LONG = "pending_long", _("Pending too long")
    RESTART = "restart", _("Worker restart")
    LOG_MATCH = "log_match", _("Log line matches")


class Channel(models.Model):
    """One destination of a user. ``url`` (webhook, Feishu, Slack) and ``secret`` (webhook HMAC key, Feishu
    signing secret) are encrypted; ``email`` is the address of an e-mail channel; ``language`` the messages'."""

    owner = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="notify_channels")
    name = models.CharField(_("name"), max_length=64)
    kind = models.CharField(_("kind"), max_length=16, choices=Kind.choices)
    url = EncryptedTextField(_("URL"), blank=True)
    secret = EncryptedTextField(_("secret"), blank=True)
    email = models.EmailField(_("e-mail address"), blank=True)
    language = models.CharField(_("language"), max_length=8, default="zh-hans")
    # Set when the receiver did not answer in time: until then its deliveries fail at once without a connection,
    # so a hanging receiver holds at most one Celery worker per window (notifications.dispatch.transmit).
    quiet_until = models.DateTimeField(_("not tried until"), null=True, blank=True)
    # The newest "send a test" of this channel (notifications.testsend): pending, retrying, sent or failed.
    test_status = models.CharField(_("test message"), max_length=16, blank=True)
    test_error = models.CharField(_("test message error"), max_length=500, blank=True)
    test_at = models.DateTimeField(_("test message at"), null=True, blank=True)
    created_at = models.DateTimeField(_("created"), auto_now_add=True)

    class Meta:
        ordering = ["owner", "name"]
        unique_together = [("owner", "name")]
        verbose_name = _("notification channel")
        verbose_name_plural = _("notification channels")

    def __str__(self) -> str:
        return self.name

    @property
    def test_error_text(self) -> str:
        """The last test message's error in the active language ("" for none)."""
        return errors.render(self.test_error)

    @property
    def masked_url(self) -> str:
        """The URL's scheme and host only (``https://host/…``), as the pages show it; "" for none."""
        return safety.masked_url(self.url)


class Rule(models.Model):
    """Events of a job (or, with ``job`` empty, of all the owner's jobs) sent to ``channel``.

    ``events``: list of :class:`Event` values; ``pending_minutes``: for ``pending_long``, 1..10080;
    ``log_pattern``: for ``log_match``, a regex bounded as the Run check's patterns. ``last_status`` /
    ``last_error`` / ``last_at``: the newest delivery's outcome (shown per rule)."""

    owner = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="notify_rules")
    channel = models.ForeignKey(Channel, on_delete=models.CASCADE, related_name="rules")
    job = models.ForeignKey(Job, on_delete=models.CASCADE, null=True, blank=True, related_name="notify_rules")
    events = models.JSONField(_("events"), default=list)
    pending_minutes = models.PositiveIntegerField(_("pending minutes"), default=10)
    log_pattern = models.CharField(_("log pattern"), max_length=500, blank=True)
    enabled = models.BooleanField(_("enabled"), default=True)
    last_status = models.CharField(_("last delivery"), max_length=16, blank=True)
    last_error = models.CharField(_("last error"), max_length=500, blank=True)
    last_at = models.DateTimeField(_("last delivery at"), null=True, blank=True)
    created_at = models.DateTimeField(_("created"), auto_now_add=True)

    class Meta:
        ordering = ["owner", "job", "pk"]
        verbose_name = _("notification rule")
        verbose_name_plural = _("notification rules")

    def __str__(self) -> str:
        return f"{self.channel} {','.join(self.events)}"

    @property
    def error_text(self) -> str:
        """The last error in the active language ("" for none)."""
        return errors.render(self.last_error)


class Delivery(models.Model):
    """One message of ``rule`` for one event of ``job``. ``key`` (unique) names the event (e.g.
    ``phase:<job>:<attempt>:Running``) so a repeated sync or scan delivers it once. ``status``: pending, sent,
    failed (after the last retry); ``attempts`` made; ``last_error`` a short, secret-free sentence."""

    rule = models.ForeignKey(Rule, on_delete=models.CASCADE, related_name="deliveries")
    job = models.ForeignKey(Job, on_delete=models.CASCADE, related_name="notify_deliveries")
    key = models.CharField(_("event key"), max_length=200)
    text = models.TextField(_("message"))
    status = models.CharField(_("status"), max_length=16, default="pending")
    attempts = models.PositiveIntegerField(_("attempts"), default=0)
    last_error = models.CharField(_("last error"), max_length=500, blank=True)
    event_at = models.DateTimeField(_("event at"))
    delivered_at = models.DateTimeField(_("delivered at"), null=True, blank=True)

    class Meta:
        ordering = ["-event_at"]
        unique_together = [("rule", "key")]
        verbose_name = _("notification delivery")
        verbose_name_plural = _("notification deliveries")

    @property
    def error_text(self) -> str:
        """The last error in the active language ("" for none)."""
        return errors.render(self.last_error)
