"""Ray token authentication of a Job's Workers (Ray 2.52+; the installed Ray 2.60 is the reference).

Every Job gets its own token; every Ray process of the job and its run script present it, so a client without it
(or with another job's) is refused by the GCS (gRPC ``UNAUTHENTICATED``), the dashboard and the dashboard agent's
job API (HTTP 401 without a token, 403 with a wrong one). Ray's switches, read from the environment by the C++
``AuthenticationTokenLoader`` and ``ray._private.authentication``:

- ``RAY_AUTH_MODE=token`` turns authentication on (``authentication_token_setup.AUTH_MODE_ENV_VAR``);
- ``RAY_AUTH_TOKEN`` (the token itself) or ``RAY_AUTH_TOKEN_PATH`` (a file holding it) gives the token.

Kubernetes: each Task carries a Secret ``<task>-ray-auth`` (key ``token``, label ``rlark.io/ray-auth``) in its
``extra_objects``, deleted with the Task; the ``main`` container gets ``RAY_AUTH_TOKEN`` from it via
``secretKeyRef``. The local runtime takes the token out of that Secret and gives it to the Workers as a file
(``clusters.runtime.local.ray_auth``). The token is never part of the Job's document, the workload, the pages or
the logs (:func:`jobs.jobspec.manifests.redacted` hides Secret data).
"""

from __future__ import annotations

import base64
from collections.abc import Mapping
from typing import Any

AUTH_MODE_VAR = "RAY_AUTH_MODE"
TOKEN_VAR = "RAY_AUTH_TOKEN"
TOKEN_PATH_VAR = "RAY_AUTH_TOKEN_PATH"
MODE_TOKEN = "token"
SECRET_KEY = "token"
LABEL = "rlark.io/ray-auth"
_SALT = "rlark.jobs.ray-auth"


def job_token(job_id: int, created: str) -> str:
    """The Ray token of one Job: 64 hex characters, an HMAC-SHA256 of ``(job_id, created)`` under the console's
    ``SECRET_KEY``.

    ``created`` is the Job's creation time (ISO text), so a Job re-created under the same name gets another token.
    Stable for the Job's life (re-applying a Task never changes it); nothing is stored. Rotating ``SECRET_KEY``
    changes every token: Workers started afterwards no longer match running ones until the job is restarted.
    """
    from django.utils.crypto import salted_hmac

    return salted_hmac(_SALT, f"{int(job_id)}:{created}", algorithm="sha256").hexdigest()


def secret_name(task: str) -> str:
    """``<task>-ray-auth``: the Secret holding the job's token for one Task."""
    return f"{task}-ray-auth"


def secret(task: str, namespace: str, labels: Mapping[str, str], token: str) -> dict[str, Any]:
    """The Task's ``Opaque`` Secret: ``data.token`` = base64 of ``token``; ``labels`` plus ``rlark.io/ray-auth``."""
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "type": "Opaque",
        "metadata": {"name": secret_name(task), "namespace": namespace, "labels": {**labels, LABEL: "true"}},
        "data": {SECRET_KEY: base64.b64encode(token.encode()).decode()},
    }


def container_env(task: str) -> list[dict[str, Any]]:
    """The ``main`` container's env entries (appended after the user's, so they win): mode ``token`` and the
    token from the Task's Secret."""
    return [
        {"name": AUTH_MODE_VAR, "value": MODE_TOKEN},
        {"name": TOKEN_VAR, "valueFrom": {"secretKeyRef": {"name": secret_name(task), "key": SECRET_KEY}}},
    ]


def token_of(obj: Mapping[str, Any]) -> str | None:
    """The token held by ``obj`` when it is a ray-auth Secret made by :func:`secret`, else ``None``."""
    meta = obj.get("metadata") or {}
    if obj.get("kind") != "Secret" or (meta.get("labels") or {}).get(LABEL) != "true":
        return None
    value = (obj.get("data") or {}).get(SECRET_KEY)
    if not value:
        return None
    return base64.b64decode(value).decode()
