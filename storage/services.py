"""Storage classes per cluster and image registry credentials.

Sources: seed 03-onboard-existing-rlinf-workload.txt (host directories need admin confirmation),
upstream-rlark 13 and 14 ("RLark Console goes further": secrets encrypted, never returned).

Storage classes (model ``storage.models.StorageClass``):
  * ``s3``: ``parameters`` = ``{endpoint, bucket, region, access_key_id, path_style}``, the secret access key in
    the encrypted ``secret`` field (never in ``parameters``, never returned by the API or a page);
  * ``kubernetes``: ``parameters`` = ``{storage_class_name}`` naming an existing Kubernetes StorageClass.

Image registries (model ``clusters.models.ImageRegistry``): ``registry`` is a host with an optional path
prefix (``registry.example.com``, ``docker.io/library``); an image matches the longest prefix on a path
boundary; the password is encrypted and never returned.
"""

from __future__ import annotations

import base64
import json
import re
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

from django.conf import settings
from django.db import transaction
from django.db.models import QuerySet
from django.utils.translation import gettext as _
from django.utils.translation import gettext_lazy

from accounts import audit
from clusters.models import Cluster, ImageRegistry
from storage.models import StorageClass

S3_FIELDS = ("endpoint", "bucket", "region", "access_key_id", "path_style")
_BUCKET = re.compile(r"^[a-z0-9][a-z0-9.\-]{1,61}[a-z0-9]$")
_K8S_NAME = re.compile(r"^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$")
_HOST = re.compile(r"^[A-Za-z0-9.\-]+(:\d{1,5})?(/[A-Za-z0-9._\-/]+)?$")
DEFAULT_REGISTRY = "docker.io"

HOST_PATH_HELP = gettext_lazy(
    "Allow Workers on this cluster to mount host directories (hostPath). Host directories are shared by "
    "everything on the node and are never cleaned up, so enable this only after checking the paths with the "
    "node owners."
)


class StorageError(ValueError):
    """Invalid storage class or registry input. ``errors`` = ``{field: message}`` (translated)."""

    def __init__(self, errors: dict[str, str]) -> None:
        super().__init__("; ".join(f"{k}: {v}" for k, v in errors.items()))
        self.errors = errors


def _truthy(value, default: bool) -> bool:
    """Form/JSON booleans: True, "1", "true", "on", "yes"; None -> ``default``."""
    if value is None:
        return default
    return value is True or str(value).strip().lower() in ("1", "true", "on", "yes")


# --------------------------------------------------------------------------- storage classes


def classes_for_cluster(cluster: Cluster | int | str) -> QuerySet[StorageClass]:
    """The storage classes of one cluster (object, pk or name), by name. The wizard lists only these."""
    qs = StorageClass.objects.select_related("cluster")
    if isinstance(cluster, Cluster):
        return qs.filter(cluster=cluster)
    if isinstance(cluster, int) or str(cluster).isdigit():
        return qs.filter(cluster_id=int(cluster))
    return qs.filter(cluster__name=str(cluster))


def local_path(storage_class: StorageClass) -> Path:
    """Directory backing ``storage_class`` on the local runtime: ``RLARK_LOCAL_ROOT/storage/<cluster>/<class>``
    (object-storage mounts map to it). Not created here."""
    return Path(settings.RLARK_LOCAL_ROOT) / "storage" / storage_class.cluster.name / storage_class.name


def public_parameters(storage_class: StorageClass) -> dict:
    """The parameters safe to show anyone: never the secret (it is not in ``parameters`` anyway)."""
    params = dict(storage_class.parameters or {})
    for key in list(params):
        if "secret" in key.lower() or "password" in key.lower():
            params.pop(key)
    return params


def _clean_s3(data: dict, existing: StorageClass | None) -> tuple[dict, str | None]:
    errors: dict[str, str] = {}
    endpoint = str(data.get("endpoint") or "").strip()
    if endpoint:
        parsed = urlparse(endpoint if "://" in endpoint else "https://" + endpoint)
        if parsed.scheme not in ("http", "https") or not parsed.hostname or parsed.username or parsed.password:
            errors["endpoint"] = _("Enter an endpoint URL such as https://s3.example.com (no credentials in it).")
    else:
        errors["endpoint"] = _("The endpoint is required.")
    bucket = str(data.get("bucket") or "").strip()
    if not _BUCKET.match(bucket):
        errors["bucket"] = _("Enter a bucket name (3-63 lowercase letters, digits, dots or hyphens).")
    access_key_id = str(data.get("access_key_id") or "").strip()
    if not access_key_id:
        errors["access_key_id"] = _("The access key ID is required.")
    secret = data.get("secret")
    secret = str(secret).strip() if secret is not None else ""
    if not secret and (existing is None or not existing.secret):
        errors["secret"] = _("Access Key Secret is required.")
    if errors:
        raise StorageError(errors)
    params = {
        "endpoint": endpoint,
        "bucket": bucket,
        "region": str(data.get("region") or "").strip(),
        "access_key_id": access_key_id,
        "path_style": _truthy(data.get("path_style"), False),
    }
    return params, (secret or None)


def _clean_kubernetes(data: dict) -> dict:
    name = str(data.get("storage_class_name") or "").strip()
    if not name or len(name) > 253 or not _K8S_NAME.match(name):
        raise StorageError({"storage_class_name": _("Enter the name of an existing Kubernetes StorageClass.")})
    return {"storage_class_name": name}


def clean_storage_class(data: dict, existing: StorageClass | None = None) -> tuple[dict, str | None]:
    """Validate provider-specific fields of ``data``; returns ``(parameters, new_secret_or_None)``.

    ``data`` keys: ``provider`` plus the S3 fields and ``secret``, or ``storage_class_name``. On update an
    empty secret keeps the stored one (upstream 13 PUT). Raises :class:`StorageError`.
    """
    provider = data.get("provider") or (existing.provider if existing else StorageClass.Provider.S3)
    if provider == StorageClass.Provider.S3:
        return _clean_s3(data, existing if existing and existing.provider == provider else None)
    if provider == StorageClass.Provider.KUBERNETES:
        return _clean_kubernetes(data), None
    raise StorageError({"provider": _("Choose S3-compatible object storage or a Kubernetes StorageClass.")})


def save_storage_class(data: dict, existing: StorageClass | None = None, actor=None, request=None) -> StorageClass:
    """Create (``existing`` None) or update a storage class from plain ``data`` (cluster, name, provider,
    description and the provider fields). On update missing fields keep their values; name and cluster are
    immutable. Raises
    :class:`StorageError`. Audited ``storage_class.create|update`` without the secret."""
    errors: dict[str, str] = {}
    if existing is None:
        cluster = data.get("cluster")
        if not isinstance(cluster, Cluster):
            cluster = Cluster.objects.filter(name=str(cluster or "")).first() or (
                Cluster.objects.filter(pk=int(cluster)).first() if str(cluster or "").isdigit() else None
            )
        if cluster is None:
            errors["cluster"] = _("Select at least one linked cluster.")
        name = str(data.get("name") or "").strip()
        if not re.match(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$", name) or len(name) > 63:
            errors["name"] = _("Use lowercase letters, numbers or hyphens; do not start or end with a hyphen.")
        elif cluster is not None and StorageClass.objects.filter(cluster=cluster, name=name).exists():
            errors["name"] = _("This cluster already has a storage class with this name.")
    else:
        cluster, name = existing.cluster, existing.name
        if data.get("name") not in (None, "", existing.name):
            errors["name"] = _("The storage class name cannot be changed.")
        if data.get("provider") in (None, "", existing.provider):  # partial update: keep the other fields
            data = {**existing.parameters, "provider": existing.provider, **data}
    try:
        params, secret = clean_storage_class(data, existing)
    except StorageError as exc:
        errors.update(exc.errors)
    if errors:
        raise StorageError(errors)
    with transaction.atomic():
        sc = existing or StorageClass(cluster=cluster, name=name)
        provider = data.get("provider") or sc.provider
        if existing is not None and provider != existing.provider:
            sc.secret = ""
        sc.provider = provider
        sc.description = str(data.get("description") or "")[:255] if "description" in data else sc.description
        sc.parameters = params
        if secret is not None:
            sc.secret = secret
        if sc.provider != StorageClass.Provider.S3:
            sc.secret = ""
        sc.save()
    audit.record(
        actor,
        "storage_class.update" if existing else "storage_class.create",
        "storage_class",
        f"{sc.cluster.name}/{sc.name}",
        request=request,
        provider=sc.provider,
        secret_changed=secret is not None,
    )
    return sc


def delete_storage_class(sc: StorageClass, actor=None, request=None) -> None:
    """Delete a storage class (jobs keep their PVCs; hostPath/bucket data is never deleted)."""
    audit.record(actor, "storage_class.delete", "storage_class", f"{sc.cluster.name}/{sc.name}", request=request)
    sc.delete()


def s3_credentials(storage_class: StorageClass) -> dict:
    """For runtimes only (never for pages or the API): ``{endpoint, bucket, region, access_key_id,
    secret_access_key, path_style}`` of an S3 class."""
    return {**public_parameters(storage_class), "secret_access_key": storage_class.secret}


# --------------------------------------------------------------------------- image registries


def normalize_registry(value: str) -> str:
    """``https://Registry.Example.com/team/`` -> ``registry.example.com/team``; raises StorageError if invalid."""
    text = (value or "").strip()
    text = re.sub(r"^[a-z]+://", "", text, flags=re.IGNORECASE).strip("/")
    host, _sep, path = text.partition("/")
    host = host.lower()
    if host in ("index.docker.io", "registry-1.docker.io", "registry.hub.docker.com"):
        host = DEFAULT_REGISTRY
    text = f"{host}/{path}" if path else host
    if not host or not _HOST.match(text) or "@" in text:
        raise StorageError({"registry": _("Enter a registry host such as registry.example.com or docker.io/library.")})
    return text


def normalize_image(image: str) -> str:
    """Fully qualified image reference: ``ubuntu:22.04`` -> ``docker.io/library/ubuntu:22.04``,
    ``team/app`` -> ``docker.io/team/app``; other hosts unchanged (host lower-cased)."""
    ref = (image or "").strip()
    first, sep, rest = ref.partition("/")
    if sep and ("." in first or ":" in first or first == "localhost"):
        host = first.lower()
        if host in ("index.docker.io", "registry-1.docker.io", "registry.hub.docker.com"):
            host = DEFAULT_REGISTRY
        return f"{host}/{rest}"
    if not sep:
        return f"{DEFAULT_REGISTRY}/library/{ref}"
    return f"{DEFAULT_REGISTRY}/{ref}"


def match_registry(image: str, registries: Iterable[Any]) -> Any | None:
    """The registry (any object with a ``registry`` attribute) whose normalised ``registry`` is the longest
    path-boundary prefix of the normalised image: ``ubuntu:22.04`` is ``docker.io/library/ubuntu:22.04``.
    None if no registry matches or the image is blank. Used by the wizard's warning, the validator and
    both runtimes, so they agree on which credentials an image needs."""
    if not str(image or "").strip():
        return None
    full = normalize_image(image)
    best: Any | None = None
    best_len = -1
    for reg in registries:
        try:
            prefix = normalize_registry(str(getattr(reg, "registry", "") or ""))
        except StorageError:
            continue
        if (full == prefix or full.startswith(prefix + "/")) and len(prefix) > best_len:
            best, best_len = reg, len(prefix)
    return best


def registry_for_image(image: str) -> ImageRegistry | None:
    """The stored registry record for ``image`` (see :func:`match_registry`), or None."""
    return match_registry(image, ImageRegistry.objects.all())


def image_host(image: str) -> str:
    """Registry host of an image reference (``docker.io`` for Docker Hub short names)."""
    return normalize_image(image).split("/", 1)[0]


def image_pull_warning(image: str) -> str | None:
    """Translated warning for the wizard when the image's registry has no credentials and is not marked
    public, else None. Public hosts (e.g. ``docker.io/library``) are marked public by an admin."""
    if not (image or "").strip():
        return None
    reg = registry_for_image(image)
    if reg is not None and (reg.public or (reg.username and reg.password)):
        return None
    return _(
        "No credentials are registered for %(host)s and it is not marked public: pulling %(image)s fails if "
        "the registry needs a login. Ask an administrator to add the registry under Image registries."
    ) % {"host": image_host(image), "image": image}


@dataclass(frozen=True)
class PullSecret:
    """An imagePullSecret to create: ``name`` (``rlark-registry-<registry name>``) and the
    ``.dockerconfigjson`` payload (contains the password: never log or return it)."""

    name: str
    dockerconfigjson: str


def pull_secret_for_image(image: str) -> PullSecret | None:
    """The imagePullSecret the runtime needs for ``image`` (None: public or unknown registry)."""
    reg = registry_for_image(image)
    if reg is None or not reg.username or not reg.password:
        return None
    host = normalize_registry(reg.registry).split("/", 1)[0]
    auth = base64.b64encode(f"{reg.username}:{reg.password}".encode()).decode()
    payload = {"auths": {host: {"username": reg.username, "password": reg.password, "auth": auth}}}
    return PullSecret(name=f"rlark-registry-{reg.name}", dockerconfigjson=json.dumps(payload, sort_keys=True))


def save_registry(data: dict, existing: ImageRegistry | None = None, actor=None, request=None) -> ImageRegistry:
    """Create or update a registry from ``{name, registry, username, password, public}``. On update an
    empty/missing password keeps the stored one. Raises :class:`StorageError`. Audited without the password."""
    errors: dict[str, str] = {}
    name = str(data.get("name") or (existing.name if existing else "")).strip()
    if not re.match(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$", name) or len(name) > 63:
        errors["name"] = _("Use lowercase letters, numbers or hyphens; do not start or end with a hyphen.")
    elif existing is None and name == "check":  # /api/v1/image-registries/check/ is the wizard's lookup
        errors["name"] = _("This name is reserved.")
    elif existing is None and ImageRegistry.objects.filter(name=name).exists():
        errors["name"] = _("An image registry with this name already exists.")
    elif existing is not None and name != existing.name:
        errors["name"] = _("The name cannot be changed.")
    try:
        registry = normalize_registry(str(data.get("registry") or (existing.registry if existing else "")))
    except StorageError as exc:
        errors.update(exc.errors)
        registry = ""
    username = data.get("username")
    username = str(username if username is not None else (existing.username if existing else ""))
    password = data.get("password")
    password = "" if password is None else str(password)
    public = _truthy(data.get("public"), existing.public if existing else False)
    if username and not password and not (existing and existing.password):
        errors["password"] = _("Enter the password or token for this user.")
    if errors:
        raise StorageError(errors)
    reg = existing or ImageRegistry(name=name)
    reg.registry = registry
    reg.username = username.strip()
    if password:
        reg.password = password
    if not reg.username:
        reg.password = ""
    reg.public = public
    reg.save()
    audit.record(
        actor,
        "registry.update" if existing else "registry.create",
        "image_registry",
        reg.name,
        request=request,
        registry=reg.registry,
        username=reg.username,
        public=reg.public,
        password_changed=bool(password),
    )
    return reg


def delete_registry(reg: ImageRegistry, actor=None, request=None) -> None:
    """Delete a registry record."""
    audit.record(actor, "registry.delete", "image_registry", reg.name, request=request, registry=reg.registry)
    reg.delete()
