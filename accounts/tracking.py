"""Experiment-tracking credentials (W&B, SwanLab) that each user keeps under their account.

The API key is stored with ``rlark_console.crypto.EncryptedTextField``; it is read only to build the Secret a
Job's Workers receive (``jobs.control.tracking``, ``clusters.tracking_secret``). Pages and the REST API
(``accounts.tracking_api``) show the name, the service, the host and the W&B entity: the key is never shown after
it is saved. Audit details carry the name, the service, the host and the entity, never the key.

The W&B entity is the team or user a run is logged under: W&B's "Environment variables" reference names
``WANDB_ENTITY`` ("the entity associated with your run"); without it W&B uses the key's default entity. W&B team
and user names are letters, digits, ``-``, ``_`` and ``.``; the console keeps at most 64 of them.

Seed 03-onboard-existing-rlinf-workload.txt asks for this step:
"需要 TensorBoard、W&B 或 SwanLab 时，按配置实验追踪配置 RLark 入口和外部服务".
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from urllib.parse import urlsplit

from django.utils.translation import gettext as _

NAME = re.compile(r"[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?")
KEY_MAX_CHARS = 512
KEY = re.compile(r"[\x21-\x7e]{1,512}")  # printable ASCII, no whitespace or quotes beyond what keys use
ENTITY = re.compile(r"[A-Za-z0-9._-]{1,64}")
MAX_HOST_CHARS = 255
MAX_ENTITY_CHARS = 64
MAX_PER_USER = 50
DEFAULT_HOSTS = {"wandb": "wandb.ai", "swanlab": "swanlab.cn"}


class CredentialError(ValueError):
    """A credential the form or API cannot store; ``str(exc)`` is a localized message for the user and ``field``
    the input it is about (``name``, ``kind``, ``api_key``, ``host``, ``entity``; "" for the account's limit)."""

    def __init__(self, message: str, field: str = ""):
        super().__init__(message)
        self.field = field


def credentials_for(user) -> list:
    """The user's credentials, by name (``TrackingCredential`` rows; the key stays encrypted until read)."""
    from accounts.models import TrackingCredential

    return list(TrackingCredential.objects.filter(user=user).defer("api_key"))


def clean_host(host: str) -> str:
    """``host`` as stored: "" or an ``https://`` / ``http://`` URL without user info, query or spaces (at most
    255 characters), trailing ``/`` dropped. Raises :class:`CredentialError`."""
    host = (host or "").strip()
    if not host:
        return ""
    if len(host) > MAX_HOST_CHARS:
        raise CredentialError(_("The host URL is longer than %(n)d characters.") % {"n": MAX_HOST_CHARS}, "host")
    parts = urlsplit(host)
    if (
        parts.scheme not in ("https", "http")
        or not parts.hostname
        or "@" in parts.netloc
        or parts.query
        or parts.fragment
        or re.search(r"[\s\"'`$\\]", host)
    ):
        raise CredentialError(_("Enter the host as an https:// URL, for example https://wandb.example.com."), "host")
    return host.rstrip("/")


def clean_entity(entity: str, kind: str) -> str:
    """``entity`` as stored: "" or a W&B team/user name of 1-64 letters, digits, ``-``, ``_`` and ``.``; only a
    W&B credential takes one. Raises :class:`CredentialError` (field ``entity``)."""
    entity = (entity or "").strip()
    if not entity:
        return ""
    if kind != "wandb":
        raise CredentialError(_("Only a W&B credential takes an entity."), "entity")
    if not ENTITY.fullmatch(entity):
        raise CredentialError(
            _("Enter the W&B entity as letters, digits, '-', '_' and '.' (at most %(n)d characters).")
            % {"n": MAX_ENTITY_CHARS},
            "entity",
        )
    return entity


def create(user, name: str, kind: str, api_key: str, host: str = "", request=None, entity: str = ""):
    """Store a credential for ``user``. ``name``: a DNS label (1-63 characters, unique per user); ``kind``:
    ``wandb`` or ``swanlab``; ``api_key``: 1-512 printable characters without spaces; ``host``: see
    :func:`clean_host`; ``entity``: see :func:`clean_entity`. Audited as ``tracking.create`` (no key). Raises
    :class:`CredentialError` naming the field."""
    from accounts import audit
    from accounts.models import TrackingCredential

    name = (name or "").strip()
    api_key = (api_key or "").strip()
    if not NAME.fullmatch(name):
        raise CredentialError(_("Enter a name of lowercase letters, digits and '-' (at most 63 characters)."), "name")
    if kind not in TrackingCredential.Kind.values:
        raise CredentialError(_("Choose W&B or SwanLab."), "kind")
    if not KEY.fullmatch(api_key):
        raise CredentialError(_("Enter the API key: 1 to 512 characters without spaces."), "api_key")
    host = clean_host(host)
    entity = clean_entity(entity, kind)
    qs = TrackingCredential.objects.filter(user=user)
    if qs.filter(name=name).exists():
        raise CredentialError(_("You already have a credential called “%(name)s”.") % {"name": name}, "name")
    if qs.count() >= MAX_PER_USER:
        raise CredentialError(_("You have %(n)d credentials, the most one account keeps.") % {"n": MAX_PER_USER})
    cred = TrackingCredential.objects.create(user=user, name=name, kind=kind, api_key=api_key, host=host, entity=entity)
    audit.record(
        user,
        "tracking.create",
        "tracking_credential",
        cred.pk,
        request=request,
        name=name,
        kind=kind,
        host=host,
        entity=entity,
    )
    return cred


def delete(user, pk=None, request=None, name: str | None = None):
    """Delete one of ``user``'s credentials, by ``pk`` (the page) or ``name`` (the API, the CLI); jobs that name it
    start without it. Audited as ``tracking.delete``. Raises ``TrackingCredential.DoesNotExist`` (also for another
    user's credential)."""
    from accounts import audit
    from accounts.models import TrackingCredential

    if name is not None:
        if not NAME.fullmatch(str(name)):  # never a query with what no name can be (NUL bytes, 10 kB ...)
            raise TrackingCredential.DoesNotExist
        cred = TrackingCredential.objects.get(user=user, name=name)
    else:
        cred = TrackingCredential.objects.get(user=user, pk=pk)
    pk = cred.pk
    cred.delete()
    audit.record(user, "tracking.delete", "tracking_credential", pk, request=request, name=cred.name, kind=cred.kind)
    return cred


def kinds_of(users: Iterable) -> dict[str, str]:
    """Credential name -> service (``wandb``/``swanlab``) of ``users`` (the submitter, an edited job's owner)."""
    from accounts.models import TrackingCredential

    pks = [u.pk for u in users if u is not None and getattr(u, "pk", None)]
    if not pks:
        return {}
    return dict(TrackingCredential.objects.filter(user__in=pks).values_list("name", "kind"))


def link_hosts(user) -> set[str]:
    """The hosts whose ``https`` run links a job of ``user`` may show: wandb.ai, swanlab.cn and the hosts of the
    user's self-hosted credentials."""
    from accounts.models import TrackingCredential

    hosts = set(DEFAULT_HOSTS.values())
    for host in TrackingCredential.objects.filter(user=user).exclude(host="").values_list("host", flat=True):
        name = urlsplit(host).hostname
        if name:
            hosts.add(name.lower())
    return hosts
