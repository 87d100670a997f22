"""SSH public keys: parsing, validation, fingerprints and per-user storage.

Rules (seed 04 第二步, upstream-rlark 11 "RLark Console goes further"):

* accepted types: ``ssh-ed25519``, ``ecdsa-sha2-nistp256|384|521``, ``sk-ssh-ed25519@openssh.com``,
  ``sk-ecdsa-sha2-nistp256@openssh.com`` and ``ssh-rsa`` with at least 2048 bits;
* rejected with a ``code``: a private key (``ssh_key_private``, the message asks for the ``.pub`` file),
  bad base64 or a blob that does not decode to the declared type (``ssh_key_malformed``), RSA below
  2048 bits (``ssh_key_weak``), any other type such as ``ssh-dss`` (``ssh_key_type``);
* a key the user already has (same fingerprint) -> :class:`DuplicateKeyError` (HTTP 409);
* the fingerprint is ``SHA256:<unpadded base64 of sha256(blob)>``, identical to ``ssh-keygen -lf``.

Keys are stored normalised as ``<type> <base64>`` (options and comment dropped, upstream 11).
Users see and delete only their own keys; staff see all.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import re
import struct
from dataclasses import dataclass

from cryptography.exceptions import UnsupportedAlgorithm
from cryptography.hazmat.primitives.asymmetric import ec, ed25519, rsa
from cryptography.hazmat.primitives.serialization import load_ssh_public_key
from django.db import IntegrityError, transaction
from django.db.models import QuerySet
from django.utils.translation import gettext as _

from accounts import audit
from sshkeys import signals
from sshkeys.models import SSHPublicKey

MIN_RSA_BITS = 2048
NAME_MAX = 128

# type name -> bits when fixed by the type (None: read from the key)
SUPPORTED_TYPES: dict[str, int | None] = {
    "ssh-ed25519": 256,
    "ecdsa-sha2-nistp256": 256,
    "ecdsa-sha2-nistp384": 384,
    "ecdsa-sha2-nistp521": 521,
    "sk-ssh-ed25519@openssh.com": 256,
    "sk-ecdsa-sha2-nistp256@openssh.com": 256,
    "ssh-rsa": None,
}
# Labels as printed by ``ssh-keygen -l`` (in parentheses).
TYPE_LABELS = {
    "ssh-ed25519": "ED25519",
    "ecdsa-sha2-nistp256": "ECDSA",
    "ecdsa-sha2-nistp384": "ECDSA",
    "ecdsa-sha2-nistp521": "ECDSA",
    "sk-ssh-ed25519@openssh.com": "ED25519-SK",
    "sk-ecdsa-sha2-nistp256@openssh.com": "ECDSA-SK",
    "ssh-rsa": "RSA",
}
_TYPE_LIKE = re.compile(r"^(ssh|ecdsa|sk|x509v3|rsa|dsa|pgp)[-a-z0-9@.]*$", re.IGNORECASE)
_PRIVATE_MARKERS = ("PRIVATE KEY", "PuTTY-User-Key-File", "BEGIN SSH2 ENCRYPTED")
PRIVATE_MARKERS = _PRIVATE_MARKERS


class SSHKeyError(ValueError):
    """A key was refused. ``code`` is one of ssh_key_private|ssh_key_malformed|ssh_key_weak|ssh_key_type
    (HTTP 400) or ssh_key_duplicate (HTTP 409); ``message`` is translated, for the user."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


class DuplicateKeyError(SSHKeyError):
    """The user already has a key with this fingerprint (HTTP 409)."""

    def __init__(self, existing: SSHPublicKey) -> None:
        super().__init__(
            "ssh_key_duplicate",
            _("You already added this key as “%(name)s” (%(fp)s).")
            % {"name": existing.name, "fp": existing.fingerprint},
        )
        self.existing = existing


@dataclass(frozen=True)
class ParsedKey:
    """A validated public key. ``normalized`` = ``"<type> <base64>"``; ``bits`` as ``ssh-keygen -l`` prints."""

    key_type: str
    bits: int
    fingerprint: str
    normalized: str
    comment: str

    @property
    def label(self) -> str:
        """``ED25519``, ``RSA``, ``ECDSA-SK``... as in ``ssh-keygen -l`` output."""
        return TYPE_LABELS.get(self.key_type, self.key_type)


def fingerprint_of(blob: bytes) -> str:
    """OpenSSH SHA256 fingerprint of a key blob: ``SHA256:`` + base64 (no padding) of its SHA-256."""
    return "SHA256:" + base64.b64encode(hashlib.sha256(blob).digest()).decode().rstrip("=")


def _read_string(blob: bytes, offset: int) -> tuple[bytes, int]:
    """One SSH wire ``string`` (uint32 length + bytes) at ``offset``; raises ValueError when truncated."""
    if offset + 4 > len(blob):
        raise ValueError("truncated")
    (length,) = struct.unpack(">I", blob[offset : offset + 4])
    end = offset + 4 + length
    if end > len(blob):
        raise ValueError("truncated")
    return blob[offset + 4 : end], end


def _parse_sk_blob(key_type: str, blob: bytes) -> None:
    """Minimal wire-format check of the FIDO ``sk-`` types (PROTOCOL.u2f): the public key fields then the
    application string, nothing after. Raises ValueError on any mismatch."""
    _, off = _read_string(blob, 0)
    if key_type == "sk-ssh-ed25519@openssh.com":
        pub, off = _read_string(blob, off)
        if len(pub) != 32:
            raise ValueError("bad ed25519 key length")
        ed25519.Ed25519PublicKey.from_public_bytes(pub)
    else:
        curve, off = _read_string(blob, off)
        point, off = _read_string(blob, off)
        if curve != b"nistp256":
            raise ValueError("bad curve")
        ec.EllipticCurvePublicKey.from_encoded_point(ec.SECP256R1(), point)
    application, off = _read_string(blob, off)
    if not application.startswith(b"ssh:") or off != len(blob):
        raise ValueError("bad application or trailing data")


def _malformed(detail: str = "") -> SSHKeyError:
    msg = _("This is not a valid SSH public key. Paste one line such as “ssh-ed25519 AAAA… comment”.")
    return SSHKeyError("ssh_key_malformed", f"{msg} {detail}".strip())


def parse_public_key(text: str) -> ParsedKey:
    """Validate one OpenSSH public key line (``[options] <type> <base64> [comment]``).

    Returns a :class:`ParsedKey`; raises :class:`SSHKeyError` with the codes listed in the module docstring.
    """
    text = (text or "").strip()
    if any(marker in text for marker in _PRIVATE_MARKERS):
        raise SSHKeyError(
            "ssh_key_private",
            _(
                "This is a private key: never paste it anywhere. Paste the public key instead, the contents "
                "of the .pub file (for example ~/.ssh/id_ed25519.pub)."
            ),
        )
    lines = [line for line in text.splitlines() if line.strip() and not line.lstrip().startswith("#")]
    if not lines:
        raise _malformed()
    if len(lines) > 1:
        raise _malformed(_("Add one key at a time."))
    tokens = lines[0].split()
    # authorized_keys options may precede the type; the type is the first token followed by base64.
    index = next((i for i, tok in enumerate(tokens) if tok in SUPPORTED_TYPES), None)
    if index is None:
        first = tokens[0]
        if _TYPE_LIKE.match(first) and not first.startswith("AAAA"):
            raise SSHKeyError(
                "ssh_key_type",
                _(
                    "Key type “%(type)s” is not supported. Use ed25519 (recommended), ECDSA, a security-key (sk-) type "
                    "or RSA with at least 2048 bits."
                )
                % {"type": first[:64]},
            )
        raise _malformed()
    key_type = tokens[index]
    if index + 1 >= len(tokens):
        raise _malformed(_("The base64 part is missing."))
    b64 = tokens[index + 1]
    comment = " ".join(tokens[index + 2 :])
    try:
        blob = base64.b64decode(b64, validate=True)
    except (binascii.Error, ValueError):
        raise _malformed(_("The base64 part is damaged (was the line cut or wrapped?)."))
    try:
        inner_type, _off = _read_string(blob, 0)
    except ValueError:
        raise _malformed(_("The base64 part is damaged (was the line cut or wrapped?)."))
    if inner_type.decode(errors="replace") != key_type:
        raise _malformed(_("The key data does not match the type “%(type)s”.") % {"type": key_type})

    bits = SUPPORTED_TYPES[key_type]
    try:
        loaded = load_ssh_public_key(f"{key_type} {b64}".encode())
    except (ValueError, UnsupportedAlgorithm):
        if not key_type.startswith("sk-"):
            raise _malformed(_("The key data could not be decoded."))
        try:  # older cryptography releases do not know the sk- types: check the wire format ourselves
            _parse_sk_blob(key_type, blob)
        except ValueError:
            raise _malformed(_("The key data could not be decoded."))
        loaded = None
    if isinstance(loaded, rsa.RSAPublicKey):
        bits = loaded.key_size
        if bits < MIN_RSA_BITS:
            raise SSHKeyError(
                "ssh_key_weak",
                _(
                    "This RSA key has only %(bits)d bits; at least %(min)d are required. "
                    "Generate a new key: ssh-keygen -t ed25519"
                )
                % {"bits": bits, "min": MIN_RSA_BITS},
            )
    elif isinstance(loaded, ec.EllipticCurvePublicKey):
        bits = loaded.curve.key_size
    normalized_b64 = base64.b64encode(blob).decode()
    return ParsedKey(
        key_type=key_type,
        bits=int(bits or 0),
        fingerprint=fingerprint_of(blob),
        normalized=f"{key_type} {normalized_b64}",
        comment=comment,
    )


def keys_for(user) -> QuerySet[SSHPublicKey]:
    """The user's own keys (the wizard offers only these; never other users' keys), oldest first."""
    if not getattr(user, "is_authenticated", False):
        return SSHPublicKey.objects.none()
    return SSHPublicKey.objects.filter(owner=user).order_by("created_at", "pk")


def visible_keys(user) -> QuerySet[SSHPublicKey]:
    """Keys ``user`` may list: staff see every user's keys, others only their own."""
    if not getattr(user, "is_authenticated", False):
        return SSHPublicKey.objects.none()
    qs = SSHPublicKey.objects.select_related("owner")
    return qs if user.is_staff else qs.filter(owner=user)


def add_key(user, name: str, key_text: str, request=None) -> SSHPublicKey:
    """Validate and store a key for ``user``.

    ``name`` (<= 128 chars) defaults to the key comment, else ``<type>-<n>``. Raises :class:`SSHKeyError`
    (400) or :class:`DuplicateKeyError` (409). Audited as ``ssh_key.create``.
    """
    parsed = parse_public_key(key_text)
    name = (name or "").strip() or parsed.comment.strip() or f"{parsed.label.lower()}-{keys_for(user).count() + 1}"
    name = name[:NAME_MAX]
    existing = SSHPublicKey.objects.filter(owner=user, fingerprint=parsed.fingerprint).first()
    if existing is not None:
        raise DuplicateKeyError(existing)
    try:
        with transaction.atomic():
            key = SSHPublicKey.objects.create(
                owner=user,
                name=name,
                key=parsed.normalized,
                key_type=parsed.key_type,
                bits=parsed.bits,
                fingerprint=parsed.fingerprint,
            )
    except IntegrityError:  # a concurrent add of the same key
        raise DuplicateKeyError(SSHPublicKey.objects.get(owner=user, fingerprint=parsed.fingerprint))
    audit.record(user, "ssh_key.create", "ssh_key", key.pk, request=request, name=name, fingerprint=key.fingerprint)
    return key


def get_key_for(user, key_id) -> SSHPublicKey:
    """The key with ``key_id`` if ``user`` may see it; raises ``SSHPublicKey.DoesNotExist`` otherwise."""
    return visible_keys(user).get(pk=key_id)


def delete_key(user, key: SSHPublicKey, request=None) -> None:
    """Delete ``key`` (the caller got it through :func:`get_key_for`). Running Workers keep the key in their
    ``authorized_keys`` until they restart (upstream 11). Audited as ``ssh_key.delete``."""
    audit.record(
        user,
        "ssh_key.delete",
        "ssh_key",
        key.pk,
        request=request,
        name=key.name,
        owner=key.owner.username,
        fingerprint=key.fingerprint,
    )
    key.delete()


def selected_keys(user, key_ids) -> list[SSHPublicKey]:
    """The keys of ``user`` among ``key_ids`` (for the wizard and the job spec); ids of other users' keys
    raise ``SSHPublicKey.DoesNotExist`` so a job can never carry someone else's key."""
    ids = {int(k) for k in key_ids}
    keys = list(keys_for(user).filter(pk__in=ids))
    if len(keys) != len(ids):
        raise SSHPublicKey.DoesNotExist("unknown SSH key id")
    return keys


def jobs_using_keys(user, keys) -> dict[int, list[str]]:
    """``{key id: [job names]}``: the jobs ``user`` may see whose ``spec.sshPublicKeys`` carries each key (the
    rotation step "update your jobs to use the new key", seed 04). Jobs in every phase are listed; asked of the
    jobs app (``signals.key_users``)."""
    out: dict[int, list[str]] = {k.pk: [] for k in keys}
    for _receiver, answer in signals.key_users.send(sender=SSHPublicKey, user=user, keys=list(keys)):
        for key_id, names in (answer or {}).items():
            out[key_id].extend(n for n in names if n not in out[key_id])
    return out


def authorized_keys_text(keys) -> str:
    """``authorized_keys`` content for Workers: one normalised ``<type> <base64> <name>`` line per key.

    ``keys`` are SSHPublicKey rows or plain ``"<type> <base64>"`` strings (re-validated; invalid ones dropped).
    """
    lines = []
    for key in keys:
        if isinstance(key, SSHPublicKey):
            comment = re.sub(r"\s+", "-", key.name.strip())
            lines.append(f"{key.key} {comment}".strip())
        else:
            try:
                lines.append(parse_public_key(str(key)).normalized)
            except SSHKeyError:
                continue
    return "\n".join(dict.fromkeys(lines)) + ("\n" if lines else "")
