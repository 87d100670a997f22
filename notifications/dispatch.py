"""From events to deliveries, and one delivery attempt.

:func:`record` turns events (the sync's ``jobs.signals.job_events`` and the scans' own, ``notifications.scan``)
into :class:`notifications.models.Delivery` rows, one per matching rule and event key (a repeated event is not
delivered twice). :func:`attempt` sends one delivery once; the Celery task retries it ``MAX_ATTEMPTS - 1`` times
after :func:`backoff` seconds. Messages name the job, the event and the Worker or log line: never a URL, a secret
or an environment value.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from django.db import IntegrityError, transaction
from django.db.models import Q
from django.utils import timezone
from django.utils.translation import gettext_noop

from jobs.models import Job
from notifications import errors, send
from notifications.models import Channel, Delivery, Event, Rule
from rlark_console.language import translate

logger = logging.getLogger(__name__)

MAX_ATTEMPTS = 4  # the first attempt and 3 retries
BACKOFF_BASE = 2.0  # seconds before the first retry; doubled each time (2, 4, 8)
MAX_LINE = 300  # characters of a matched log line quoted in a message
QUIET_SECONDS = 30.0  # after a receiver did not answer in time, its deliveries fail at once for this long
QUIET_TEXT = gettext_noop("not tried: the receiver did not answer a moment ago")

PHASE_TEXT = gettext_noop("RLark: job %(job)s is %(phase)s.")
PENDING_TEXT = gettext_noop("RLark: job %(job)s has been Pending for more than %(minutes)d minutes.")
RESTART_TEXT = gettext_noop("RLark: Worker %(worker)s of job %(job)s restarted (%(restarts)d restarts).")
LOG_TEXT = gettext_noop("RLark: a log line of job %(job)s matches the pattern %(pattern)s: %(line)s")


def backoff(attempts: int) -> float:
    """Seconds before the next attempt after ``attempts`` failed ones: 2, 4, 8."""
    return BACKOFF_BASE * 2 ** max(0, attempts - 1)


def _key(event: dict[str, Any]) -> str:
    kind = event["kind"]
    base = f"{kind}:{event['job']}:{event.get('attempt', 1)}"
    if kind == "phase":
        return f"{base}:{event['phase']}"
    if kind == "restart":
        return f"{base}:{event['worker']}:{event.get('restarts', 0)}"
    if kind == "log_match":
        return f"{base}:{event['rule']}"
    return base


def _wants(rule: Rule, event: dict[str, Any]) -> bool:
    kind = event["kind"]
    if kind == "phase":
        return event["phase"] in rule.events
    if kind == "restart":
        return Event.RESTART in rule.events
    if kind in ("pending_long", "log_match"):
        return event.get("rule") == rule.pk
    return False


def text_of(event: dict[str, Any], job: Job, language: str) -> str:
    """The message of ``event`` about ``job`` in ``language`` (``zh-hans`` or ``en``)."""
    kind = event["kind"]
    if kind == "phase":
        return translate(PHASE_TEXT, language) % {"job": job.name, "phase": translate(event["phase"], language)}
    if kind == "pending_long":
        return translate(PENDING_TEXT, language) % {"job": job.name, "minutes": event["minutes"]}
    if kind == "restart":
        values = {"job": job.name, "worker": event["worker"], "restarts": event.get("restarts", 0)}
        return translate(RESTART_TEXT, language) % values
    line = str(event.get("line", ""))[:MAX_LINE]
    return translate(LOG_TEXT, language) % {"job": job.name, "pattern": event.get("pattern", ""), "line": line}


def record(events: list[dict[str, Any]]) -> list[int]:
    """The ids of the new deliveries ``events`` make (each ``{"job", "kind", ...}``, see ``jobs.signals``; the
    scans' ``pending_long``/``log_match`` carry the ``rule`` id). Queries: one per job, one insert per delivery."""
    ids: list[int] = []
    jobs = Job.objects.in_bulk({e["job"] for e in events})
    now = timezone.now()
    for event in events:
        job = jobs.get(event["job"])
        if job is None:
            continue
        rules = Rule.objects.filter(owner_id=job.owner_id, enabled=True).filter(Q(job=job) | Q(job=None))
        for rule in rules.select_related("channel"):
            if not _wants(rule, event):
                continue
            text = text_of(event, job, rule.channel.language)
            try:
                with transaction.atomic():
                    delivery = Delivery.objects.create(rule=rule, job=job, key=_key(event), text=text, event_at=now)
            except IntegrityError:  # already delivered (a repeated sync or scan)
                continue
            ids.append(delivery.pk)
    return ids


@dataclass
class Outcome:
    """What one attempt gave: ``status`` (sent, pending: retry in ``retry_in`` seconds, failed) and ``error``."""

    status: str
    error: str = ""
    retry_in: float | None = None
    hung: bool = False  # the receiver did not answer in time: leave its channel alone for QUIET_SECONDS


def prepare(delivery_id: int) -> Delivery | None:
    """The delivery to attempt, with its rule and channel (one query); None when it is gone or settled."""
    delivery = Delivery.objects.select_related("rule__channel", "job").filter(pk=delivery_id).first()
    if delivery is None or delivery.status in ("sent", "failed"):
        return None
    return delivery


def transmit(delivery: Delivery) -> Outcome:
    """One send of ``delivery`` on its channel (no database access; at most ``RLARK_NOTIFY_TIMEOUT`` seconds of
    network); counts the attempt on the object. A receiver that did not answer in time is left alone for
    ``QUIET_SECONDS``: its deliveries meanwhile count a failed attempt without connecting, so one hanging
    receiver cannot take every Celery worker and delay the other channels' messages."""
    event = {"kind": delivery.key.split(":", 1)[0], "job": delivery.job.name, "key": delivery.key}
    channel = delivery.rule.channel
    delivery.attempts += 1
    last = delivery.attempts >= MAX_ATTEMPTS
    if channel.quiet_until is not None and channel.quiet_until > timezone.now():
        stored = errors.encode(QUIET_TEXT)  # the receiver hung a moment ago: not tried, no worker held
        return Outcome("failed" if last else "pending", stored, None if last else backoff(delivery.attempts))
    try:
        send.deliver(channel, event, delivery.text)
    except send.SendError as exc:
        logger.info("notification %s attempt %d failed: %s", delivery.pk, delivery.attempts, exc)
        outcome = Outcome("failed" if last else "pending", exc.stored, None if last else backoff(delivery.attempts))
        outcome.hung = exc.hung
        return outcome
    return Outcome("sent")


def finish(delivery: Delivery, outcome: Outcome) -> None:
    """Store ``outcome`` on the delivery and on its rule (``last_status``, ``last_error``, ``last_at``), and on
    the channel whether its receiver hung (``Channel.quiet_until``)."""
    now = timezone.now()
    channel = delivery.rule.channel
    if outcome.hung:
        Channel.objects.filter(pk=channel.pk).update(quiet_until=now + timedelta(seconds=QUIET_SECONDS))
    elif outcome.status == "sent" and channel.quiet_until is not None:
        Channel.objects.filter(pk=channel.pk).update(quiet_until=None)
    delivery.status, delivery.last_error = outcome.status, outcome.error
    delivery.delivered_at = now if outcome.status == "sent" else None
    delivery.save(update_fields=["status", "attempts", "last_error", "delivered_at"])
    Rule.objects.filter(pk=delivery.rule_id).update(
        last_status="retrying" if outcome.status == "pending" else outcome.status,
        last_error=outcome.error,
        last_at=now,
    )


def attempt(delivery_id: int) -> Outcome | None:
    """Send delivery ``delivery_id`` once and store the outcome (:func:`prepare`, :func:`transmit`,
    :func:`finish`). None when it is gone or already settled."""
    delivery = prepare(delivery_id)
    if delivery is None:
        return None
    outcome = transmit(delivery)
    finish(delivery, outcome)
    return outcome
