"""Adding keys for another user and pasting a whole ``authorized_keys`` file.

Rules (upstream-rlark 11 "RLark Console goes further"):

* ``resolve_owner(actor, username)``: no user name, or the actor's own -> the actor. Another user's name is
  honoured for staff only; anyone else gets :class:`OwnerForbidden` (HTTP 403), never a silent fallback to
  the poster's own account. A name that is not an active account -> :class:`~sshkeys.services.SSHKeyError`
  ``user_invalid`` (HTTP 400) and nothing is stored.
* ``add_keys(actor, owner, name, text)``: every non-blank, non-``#`` line of ``text`` is one key. All lines are
  checked first; if any line fails, :class:`BatchKeyError` lists *every* failing line as
  ``{"line": <1-based line number>, "code", "detail"}`` and **nothing** is stored. Otherwise every key is stored
  in one transaction. A key the owner already has, or a line repeating an earlier line, is a failing line
  (``ssh_key_duplicate``). At most :data:`MAX_KEYS` keys and :data:`MAX_TEXT` characters.
"""

from __future__ import annotations

from django.contrib.auth import get_user_model
from django.db import IntegrityError, transaction
from django.utils.translation import gettext as _

from accounts import audit
from sshkeys.models import SSHPublicKey
from sshkeys.services import NAME_MAX, PRIVATE_MARKERS, SSHKeyError, parse_public_key

MAX_KEYS = 100
MAX_TEXT = 256 * 1024


class OwnerForbidden(PermissionError):
    """A non-staff user asked to add a key for someone else (HTTP 403)."""


class BatchKeyError(SSHKeyError):
    """Some lines of a pasted file are not acceptable keys; ``errors`` = ``[{"line", "code", "detail"}]``."""

    def __init__(self, errors: list[dict]) -> None:
        lines = ", ".join(str(e["line"]) for e in errors)
        super().__init__("ssh_key_lines_invalid", _("Nothing was added: line(s) %(lines)s failed.") % {"lines": lines})
        self.errors = errors


def resolve_owner(actor, username: str | None):
    """The user a key is added for (rules in the module docstring)."""
    username = (username or "").strip()
    if not username or username == actor.username:
        return actor
    if not actor.is_staff:
        raise OwnerForbidden(_("Only administrators may add keys for other users."))
    owner = get_user_model().objects.filter(username=username[:150], is_active=True).first()
    if owner is None:
        raise SSHKeyError("user_invalid", _("“%(user)s” is not an active user.") % {"user": username[:150]})
    return owner


def add_keys(actor, owner, name: str, text: str, request=None) -> list[SSHPublicKey]:
    """Validate every line of ``text``, then store all keys for ``owner`` or none (module docstring).

    ``name``: the name of a single key; with several keys each is named after its comment, else
    ``<name>-<n>``/``<type>-<n>``. Audited as ``ssh_key.create`` per key, with the actor and the owner."""
    text = text or ""
    if len(text) > MAX_TEXT:
        raise SSHKeyError("ssh_key_malformed", _("At most %(n)d characters.") % {"n": MAX_TEXT})
    lines = [(i, ln) for i, ln in enumerate(text.splitlines(), 1) if ln.strip() and not ln.lstrip().startswith("#")]
    if not lines or any(marker in text for marker in PRIVATE_MARKERS):
        parse_public_key(text)  # raises the usual "not a public key" / "private key" error
    if len(lines) > MAX_KEYS:
        raise SSHKeyError("ssh_key_malformed", _("At most %(n)d keys at a time.") % {"n": MAX_KEYS})
    have = set(SSHPublicKey.objects.filter(owner=owner).values_list("fingerprint", flat=True))
    parsed, errors, seen = [], [], {}
    for number, line in lines:
        try:
            key = parse_public_key(line)
        except SSHKeyError as exc:
            errors.append({"line": number, "code": exc.code, "detail": exc.message})
            continue
        if key.fingerprint in have:
            errors.append({"line": number, "code": "ssh_key_duplicate", "detail": _("This user already has this key.")})
        elif key.fingerprint in seen:
            errors.append(
                {
                    "line": number,
                    "code": "ssh_key_duplicate",
                    "detail": _("Same key as line %(n)d.") % {"n": seen[key.fingerprint]},
                }
            )
        else:
            seen[key.fingerprint] = number
            parsed.append(key)
    if errors:
        raise BatchKeyError(errors)
    out = []
    try:
        with transaction.atomic():
            for n, key in enumerate(parsed, 1):
                base = (name or "").strip()
                fallback = f"{base or key.label.lower()}-{n}"
                label = base if base and len(parsed) == 1 else (key.comment.strip() or fallback)
                out.append(
                    SSHPublicKey.objects.create(
                        owner=owner,
                        name=label[:NAME_MAX],
                        key=key.normalized,
                        key_type=key.key_type,
                        bits=key.bits,
                        fingerprint=key.fingerprint,
                    )
                )
    except IntegrityError:  # a concurrent add of one of the keys: nothing of this paste is stored
        raise BatchKeyError(
            [{"line": 0, "code": "ssh_key_duplicate", "detail": _("A key was added at the same time; try again.")}]
        ) from None
    for key in out:
        audit.record(
            actor,
            "ssh_key.create",
            "ssh_key",
            key.pk,
            request=request,
            name=key.name,
            owner=owner.username,
            fingerprint=key.fingerprint,
        )
    return out
