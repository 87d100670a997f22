"""Editing a user's channel or rule with the same checks as creating one (``notifications.services``).

Partial updates (the API's ``PATCH``, the page's edit forms): a key missing from ``data`` keeps its value. A
channel's stored URL and secret are never sent back to the browser, so a blank ``url`` or ``secret`` keeps the
stored one; ``clear_secret`` true removes the secret. A channel's kind does not change. Nothing is saved when a
check fails (:class:`notifications.services.NotifyError`), and the audit entry names the changed fields only,
never a URL or a secret.
"""

from __future__ import annotations

from typing import Any

from django.db import transaction

from accounts import audit
from notifications import safety, services
from notifications.models import Channel, Rule

masked_url = safety.masked_url
CHANNEL_KEYS = ("name", "url", "secret", "email", "language")
RULE_KEYS = ("channel", "events", "pending_minutes", "log_pattern", "enabled")


def update_channel(user, channel: Channel, data: dict[str, Any], request=None) -> Channel:
    """Change ``channel`` (one of ``user``'s) from ``{"name", "url", "secret", "clear_secret", "email",
    "language"}``, any subset. The URL, even the stored one, is checked again (https, public address). Returns
    the saved channel; raises :class:`~notifications.services.NotifyError` with nothing saved."""
    merged: dict[str, Any] = {
        "name": channel.name,
        "kind": channel.kind,
        "url": channel.url,
        "secret": channel.secret,
        "email": channel.email,
        "language": channel.language,
    }
    for key in CHANNEL_KEYS:
        value = data.get(key)
        if value is None or (key in ("url", "secret") and not str(value).strip()):
            continue
        merged[key] = value
    if services.as_bool(data.get("clear_secret", False)):
        merged["secret"] = ""
    fields = services.channel_fields(user, merged, exclude=channel.pk)
    changed = sorted(k for k, v in fields.items() if getattr(channel, k) != v)
    with transaction.atomic():
        locked = Channel.objects.select_for_update().get(pk=channel.pk, owner=user)
        for key, value in fields.items():
            setattr(locked, key, value)
        if "url" in changed:
            locked.quiet_until = None  # a new receiver gets its own chance
        locked.save()
        audit.record(
            user, "notify.channel.update", "channel", str(locked.pk), request=request, name=locked.name, changed=changed
        )
    return locked


def update_rule(user, rule: Rule, data: dict[str, Any], request=None) -> Rule:
    """Change ``rule`` (one of ``user``'s) from ``{"channel" (id), "events", "pending_minutes", "log_pattern",
    "enabled"}``, any subset; its job does not change. Returns the saved rule; raises
    :class:`~notifications.services.NotifyError` with nothing saved."""
    merged: dict[str, Any] = {
        "channel": rule.channel_id,
        "events": list(rule.events),
        "pending_minutes": rule.pending_minutes,
        "log_pattern": rule.log_pattern,
        "enabled": rule.enabled,
    }
    merged.update({k: data[k] for k in RULE_KEYS if k in data and data[k] is not None})
    fields = services.rule_fields(user, merged)
    current = {"channel": rule.channel, **{k: getattr(rule, k) for k in RULE_KEYS if k != "channel"}}
    changed = sorted(k for k, v in fields.items() if current[k] != v)
    with transaction.atomic():
        locked = (
            Rule.objects.select_for_update(of=("self",)).select_related("channel", "job").get(pk=rule.pk, owner=user)
        )
        for key, value in fields.items():
            setattr(locked, key, value)
        locked.save()
        audit.record(
            user,
            "notify.rule.update",
            "rule",
            str(locked.pk),
            request=request,
            events=locked.events,
            job=locked.job and locked.job.name,
            changed=changed,
        )
    return locked
