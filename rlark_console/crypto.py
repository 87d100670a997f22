"""Field-level encryption for secrets at rest (kubeconfigs, S3 secrets, registry passwords).

Uses Fernet (AES-128-CBC + HMAC-SHA256) from ``cryptography`` with a key derived
from ``settings.RLARK_ENCRYPTION_KEY``. Ciphertext is stored as ``fernet:<token>``;
the plaintext never reaches the database, so a database dump holds no secret.
"""

from __future__ import annotations

import base64
import hashlib
from functools import lru_cache

from cryptography.fernet import Fernet, InvalidToken
from django.conf import settings
from django.db import models

PREFIX = "fernet:"


@lru_cache(maxsize=4)
def _fernet(key_material: str) -> Fernet:
    digest = hashlib.sha256(key_material.encode()).digest()
    return Fernet(base64.urlsafe_b64encode(digest))


def encrypt(plaintext: str) -> str:
    """Encrypt ``plaintext`` -> ``"fernet:<token>"``; the empty string stays empty."""
    if not plaintext:
        return ""
    token = _fernet(settings.RLARK_ENCRYPTION_KEY).encrypt(plaintext.encode())
    return PREFIX + token.decode()


DECRYPTED_CACHE_SIZE = 256  # distinct ciphertexts kept decrypted per process (a few per cluster / registry)


@lru_cache(maxsize=DECRYPTED_CACHE_SIZE)
def _decrypt_token(key_material: str, token: str) -> str:
    """Fernet-decrypt ``token``, once per process per (key, ciphertext) (uncached, a kubeconfig is decrypted on
    every load of its Cluster row, 4,020 times for one Diagnosis tab). A credential rotation stores a new
    ciphertext (Fernet tokens carry a fresh IV), so it misses this cache and the new secret is used at once; a
    changed ``RLARK_ENCRYPTION_KEY`` misses it too. Failures are not cached (``lru_cache`` keeps no exceptions)."""
    return _fernet(key_material).decrypt(token.encode()).decode()


def decrypt(stored: str) -> str:
    """Inverse of :func:`encrypt`. Raises ``ValueError`` if the key is wrong."""
    if not stored:
        return ""
    if not stored.startswith(PREFIX):
        raise ValueError("value is not encrypted")
    try:
        return _decrypt_token(settings.RLARK_ENCRYPTION_KEY, stored[len(PREFIX) :])
    except InvalidToken as exc:
        raise ValueError("cannot decrypt secret: RLARK_ENCRYPTION_KEY changed?") from exc


class EncryptedTextField(models.TextField):
    """A TextField whose value is encrypted in the database and plain in Python.

    Serialization (``dumpdata``) writes the ciphertext; deserialization (``loaddata``)
    turns it back into plaintext through ``to_python`` so it is encrypted exactly once.
    """

    def to_python(self, value):  # noqa: D102
        value = super().to_python(value)
        if isinstance(value, str) and value.startswith(PREFIX):
            try:
                return decrypt(value)
            except ValueError:
                return value
        return value

    def value_to_string(self, obj):  # noqa: D102
        return encrypt(self.value_from_object(obj) or "")

    def from_db_value(self, value, expression, connection):  # noqa: D102
        if value is None:
            return value
        return decrypt(value)

    def get_prep_value(self, value):  # noqa: D102
        value = super().get_prep_value(value)
        if value is None:
            return None
        return encrypt(value)
