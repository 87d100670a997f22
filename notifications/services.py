"""Channels and rules of a user: validated creation, deletion, and the lists the pages and the API show (editing
is in ``notifications.edit``, with the same checks).

Owner-only: every query is filtered by the owner (an admin manages others' channels in the back office). Bounds:
``MAX_CHANNELS`` per user, ``MAX_RULES`` per user, names of ``NAME_MAX`` characters, secrets of ``SECRET_MAX``,
log patterns as the Run check's (``jobs.explain.runcheck_settings.clean_pattern``, seed
``02-confirm-job-running.txt`` checks 4-5), Pending minutes 1..``MAX_PENDING_MINUTES``.
"""

from __future__ import annotations

from typing import Any

from django.core.exceptions import ValidationError
from django.core.validators import validate_email
from django.db.models import F, Q, QuerySet
from django.utils.translation import gettext_lazy as _

from accounts import audit
from jobs.explain import runcheck_settings
from jobs.models import Job
from notifications import safety
from notifications.models import Channel, Event, Kind, Rule

MAX_CHANNELS = 20
MAX_RULES = 100
NAME_MAX = 64
SECRET_MAX = 256
MAX_PENDING_MINUTES = 7 * 24 * 60
LANGUAGES = ("zh-hans", "en")


class NotifyError(ValueError):
    """Bad input; ``field`` names it, ``message`` is a localized sentence, ``code`` a stable identifier."""

    def __init__(self, field: str, message: Any, code: str = "invalid") -> None:
        super().__init__(str(message))
        self.field, self.message, self.code = field, message, code


def channels_of(user) -> QuerySet[Channel]:
    """The user's channels, by name."""
    return Channel.objects.filter(owner=user).order_by("name")


def rules_of(user, job: Job | None = None) -> QuerySet[Rule]:
    """The user's default rules (``job`` None), or the rules that apply to ``job``: its own and its owner's
    defaults."""
    if job is None:
        return Rule.objects.filter(owner=user, job=None).select_related("channel").order_by("pk")
    return (
        Rule.objects.filter(owner=job.owner)
        .filter(Q(job=job) | Q(job=None))
        .select_related("channel", "job")
        .order_by(F("job").asc(nulls_first=True), "pk")
    )


def _text(data: dict[str, Any], key: str, limit: int) -> str:
    value = data.get(key)
    text = "" if value is None else str(value).strip()
    if len(text) > limit:
        raise NotifyError(key, _("At most %(n)d characters.") % {"n": limit}, "too_long")
    return text


def channel_fields(user, data: dict[str, Any], exclude: int | None = None) -> dict[str, str]:
    """The checked fields ``{"name", "kind", "language", "secret", "email", "url"}`` of a channel from ``data``
    (the same rules for a new and an edited channel; ``exclude``: the edited channel's id, for the name's
    uniqueness). Raises :class:`NotifyError`."""
    name = _text(data, "name", NAME_MAX)
    if not name:
        raise NotifyError("name", _("Give the channel a name."), "required")
    if Channel.objects.filter(owner=user, name=name).exclude(pk=exclude).exists():
        raise NotifyError("name", _("You already have a channel with this name."), "duplicate")
    kind = _text(data, "kind", 16)
    if kind not in Kind.values:
        raise NotifyError("kind", _("Choose a kind of channel."), "invalid")
    language = _text(data, "language", 8) or "zh-hans"
    if language not in LANGUAGES:
        raise NotifyError("language", _("Choose Chinese or English."), "invalid")
    fields = {"name": name, "kind": kind, "language": language, "secret": _text(data, "secret", SECRET_MAX)}
    if kind == Kind.EMAIL:
        fields.update(email=_text(data, "email", 254), secret="", url="")
        try:
            validate_email(fields["email"])
        except ValidationError:
            raise NotifyError("email", _("Enter a valid e-mail address."), "invalid") from None
    else:
        fields.update(url=_text(data, "url", safety.MAX_URL_LEN), email="")
        try:
            safety.resolve(fields["url"])
        except safety.UnsafeURL as exc:
            raise NotifyError("url", exc.message, "url_refused") from None
    return fields


def create_channel(user, data: dict[str, Any], request=None) -> Channel:
    """A new channel of ``user`` from ``{"name", "kind", "url", "secret", "email", "language"}``; the URL is
    checked now (https, public address) and again at every send. Raises :class:`NotifyError`."""
    if Channel.objects.filter(owner=user).count() >= MAX_CHANNELS:
        raise NotifyError("name", _("At most %(n)d channels per user.") % {"n": MAX_CHANNELS}, "too_many")
    fields = channel_fields(user, data)
    channel = Channel.objects.create(owner=user, **fields)
    audit.record(
        user, "notify.channel.create", "channel", str(channel.pk), request=request, name=channel.name, kind=channel.kind
    )
    return channel


def delete_channel(user, channel: Channel, request=None) -> None:
    """Delete one of the user's channels with its rules."""
    audit.record(user, "notify.channel.delete", "channel", str(channel.pk), request=request, name=channel.name)
    channel.delete()


def as_bool(value: Any) -> bool:
    """A posted flag: ``True``/``"1"``/``"true"``/``"on"``/``"yes"`` are true, anything else false."""
    if isinstance(value, str):
        return value.strip().lower() in ("1", "true", "on", "yes")
    return bool(value)


def rule_fields(user, data: dict[str, Any]) -> dict[str, Any]:
    """The checked fields ``{"channel", "events", "pending_minutes", "log_pattern", "enabled"}`` of a rule from
    ``data`` (the same rules for a new and an edited rule). Raises :class:`NotifyError`."""
    try:
        channel = channels_of(user).get(pk=int(data.get("channel") or 0))
    except (Channel.DoesNotExist, TypeError, ValueError):
        raise NotifyError("channel", _("Choose one of your channels."), "invalid") from None
    events = data.get("events") or []
    if isinstance(events, str):
        events = [events]
    if not isinstance(events, list | tuple):
        events = []
    events = list(dict.fromkeys(str(e) for e in events[:20] if str(e) in Event.values))
    if not events:
        raise NotifyError("events", _("Choose at least one event."), "required")
    minutes = data.get("pending_minutes")
    minutes = 10 if minutes in (None, "") else minutes
    try:
        minutes = int(str(minutes)[:12])
    except (TypeError, ValueError):
        minutes = 0
    if not 1 <= minutes <= MAX_PENDING_MINUTES:
        raise NotifyError(
            "pending_minutes", _("Between 1 and %(n)d minutes.") % {"n": MAX_PENDING_MINUTES}, "out_of_range"
        )
    try:
        pattern = runcheck_settings.clean_pattern("log_pattern", data.get("log_pattern"))
    except runcheck_settings.SettingsError as exc:
        raise NotifyError("log_pattern", _("Invalid log pattern: %(e)s") % {"e": exc}, "invalid_pattern") from None
    if Event.LOG_MATCH in events and not pattern:
        raise NotifyError("log_pattern", _("Give the log pattern to look for."), "required")
    enabled = as_bool(data["enabled"]) if "enabled" in data else True
    return {
        "channel": channel,
        "events": events,
        "pending_minutes": minutes,
        "log_pattern": pattern,
        "enabled": enabled,
    }


def create_rule(user, data: dict[str, Any], job: Job | None = None, request=None) -> Rule:
    """A rule of ``user`` (for ``job``, else a default for all of their jobs) from ``{"channel" (id), "events"
    (list of Event values), "pending_minutes", "log_pattern", "enabled"}``. Raises :class:`NotifyError`."""
    if Rule.objects.filter(owner=user).count() >= MAX_RULES:
        raise NotifyError("events", _("At most %(n)d rules per user.") % {"n": MAX_RULES}, "too_many")
    fields = rule_fields(user, data)
    rule = Rule.objects.create(owner=user, job=job, **fields)
    events = fields["events"]
    audit.record(user, "notify.rule.create", "rule", str(rule.pk), request=request, events=events, job=job and job.name)
    return rule


def delete_rule(user, rule: Rule, request=None) -> None:
    """Delete one of the user's rules."""
    audit.record(user, "notify.rule.delete", "rule", str(rule.pk), request=request, events=rule.events)
    rule.delete()
