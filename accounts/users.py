"""User administration for the back office: create, deactivate, reset passwords.

Every action is audited (``user.create``, ``user.deactivate``, ``user.reactivate``, ``user.password_reset``);
passwords are never recorded or logged.

Deactivating a user (:func:`deactivate_user`), in this order:

1. ``is_active = False`` (login, API tokens and websockets all refuse inactive users);
2. every API token of the user is revoked (``APIToken.revoked``);
3. every login session of the user is deleted (database session backend), so no browser stays signed in;
4. :data:`accounts.signals.user_deactivated` is sent; the WebTerminal closes the user's open terminal
   sessions at once, an SSH bastion closes their SSH sessions.
"""

from __future__ import annotations

import dataclasses
import logging
import secrets

from django.contrib.auth import get_user_model
from django.contrib.auth.password_validation import validate_password
from django.contrib.sessions.models import Session
from django.db import transaction
from django.utils import timezone

from accounts.audit import record
from accounts.models import APIToken
from accounts.signals import user_deactivated

logger = logging.getLogger("rlark.accounts")


@dataclasses.dataclass
class Deactivation:
    """What :func:`deactivate_user` closed: ``tokens`` revoked, login ``sessions`` deleted."""

    tokens: int = 0
    sessions: int = 0


def create_user(username: str, password: str, *, email: str = "", is_staff: bool = False, actor=None, request=None):
    """A new active user; Django's password validators apply (``ValidationError``)."""
    User = get_user_model()
    validate_password(password, User(username=username, email=email))
    user = User.objects.create_user(username=username, email=email, password=password, is_staff=is_staff)
    record(actor, "user.create", "user", username, request=request, staff=is_staff)
    return user


def _user_sessions(user) -> list[str]:
    """Keys of the unexpired database sessions signed in as ``user``."""
    out = []
    for s in Session.objects.filter(expire_date__gt=timezone.now()).iterator():
        if str(s.get_decoded().get("_auth_user_id")) == str(user.pk):
            out.append(s.session_key)
    return out


def deactivate_user(user, *, actor=None, request=None) -> Deactivation:
    """Deactivate ``user`` and close everything it holds (module docstring). Idempotent."""
    with transaction.atomic():
        if user.is_active:
            user.is_active = False
            user.save(update_fields=["is_active"])
        tokens = APIToken.objects.filter(user=user, revoked=False).update(revoked=True)
        keys = _user_sessions(user)
        Session.objects.filter(session_key__in=keys).delete()
        record(actor, "user.deactivate", "user", user.username, request=request, tokens=tokens, sessions=len(keys))
    for receiver, result in user_deactivated.send_robust(sender=type(user), user=user, actor=actor):
        if isinstance(result, Exception):
            logger.error("user_deactivated receiver %r failed: %r", receiver, result)
    return Deactivation(tokens=tokens, sessions=len(keys))


def reactivate_user(user, *, actor=None, request=None) -> None:
    """Let ``user`` sign in again (revoked tokens stay revoked)."""
    if not user.is_active:
        user.is_active = True
        user.save(update_fields=["is_active"])
    record(actor, "user.reactivate", "user", user.username, request=request)


def reset_password(user, *, actor=None, request=None) -> str:
    """Set a new random password (returned once, to show the admin) and end the user's login sessions."""
    password = secrets.token_urlsafe(12)
    user.set_password(password)
    user.save(update_fields=["password"])
    Session.objects.filter(session_key__in=_user_sessions(user)).delete()
    record(actor, "user.password_reset", "user", user.username, request=request)
    return password
