"""Experiment-tracking credentials (W&B, SwanLab) of a Job, as its Workers receive them.

The variables each service's client reads (W&B: ``WANDB_API_KEY``, ``WANDB_BASE_URL`` for a self-hosted server,
``WANDB_ENTITY`` for the team or user the runs are logged under, all three named in W&B's "Environment variables"
reference; SwanLab: ``SWANLAB_API_KEY``, ``SWANLAB_WEB_HOST`` for a private deployment, which SwanLab's
environment-variable reference says is the only host a private deployment needs). RLinf's
``rlinf/utils/metric_logger.py`` (``MetricLogger``) calls ``wandb.init`` / ``swanlab.init`` when
``runner.logger.logger_backends`` lists them, and both clients take the key from these variables. That file reads
``runner.logger.logger_backends`` (``tensorboard``, ``wandb``, ``swanlab``), ``project_name``, ``experiment_name``,
``wandb_proxy`` and ``swanlab_mode``; the version consulted reads no ``wandb_entity`` (W&B then uses the key's
default entity, or ``WANDB_ENTITY`` set in the job), so the entity of the user's W&B credential
(``accounts.TrackingCredential.entity``), given here as ``WANDB_ENTITY``, is how a team sets it. The entity is
not secret but travels with the key in the same Secret.

Kubernetes: each Task carries a Secret ``<task>-tracking`` (label ``rlark.io/tracking``, one key per variable) in
its ``extra_objects``; the ``main`` container gets every variable via ``env.valueFrom.secretKeyRef``, exactly as
:mod:`clusters.ray_auth` gives the Ray token. The local runtime takes the values out of that Secret and gives them
to the Workers as files (``clusters.runtime.local.tracking``). The values are never part of the Job's document,
the workload's env values, the pages or the logs (:func:`jobs.jobspec.manifests.redacted` hides Secret data).
"""

from __future__ import annotations

import base64
from collections.abc import Mapping
from typing import Any

WANDB_API_KEY = "WANDB_API_KEY"
WANDB_BASE_URL = "WANDB_BASE_URL"
WANDB_ENTITY = "WANDB_ENTITY"
SWANLAB_API_KEY = "SWANLAB_API_KEY"
SWANLAB_HOST = "SWANLAB_WEB_HOST"
VARIABLES = (WANDB_API_KEY, WANDB_BASE_URL, WANDB_ENTITY, SWANLAB_API_KEY, SWANLAB_HOST)
LABEL = "rlark.io/tracking"
MAX_VALUE_CHARS = 512  # an API key, a host URL or an entity; longer values are refused before they are stored


def secret_name(task: str) -> str:
    """``<task>-tracking``: the Secret holding the job's tracking credentials for one Task."""
    return f"{task}-tracking"


def secret(task: str, namespace: str, labels: Mapping[str, str], values: Mapping[str, str]) -> dict[str, Any]:
    """The Task's ``Opaque`` Secret: ``data[VAR]`` = base64 of each value (only the names of :data:`VARIABLES`);
    ``labels`` plus ``rlark.io/tracking``."""
    data = {k: base64.b64encode(v.encode()).decode() for k, v in values.items() if k in VARIABLES and v}
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "type": "Opaque",
        "metadata": {"name": secret_name(task), "namespace": namespace, "labels": {**labels, LABEL: "true"}},
        "data": data,
    }


def container_env(task: str, values: Mapping[str, str]) -> list[dict[str, Any]]:
    """The ``main`` container's env entries (appended after the user's): each variable from the Task's Secret."""
    return [
        {"name": k, "valueFrom": {"secretKeyRef": {"name": secret_name(task), "key": k}}}
        for k in VARIABLES
        if values.get(k)
    ]


def values_of(obj: Mapping[str, Any]) -> dict[str, str] | None:
    """The variables held by ``obj`` when it is a tracking Secret made by :func:`secret` (name -> value), else
    ``None``. Unknown keys and values longer than :data:`MAX_VALUE_CHARS` are dropped."""
    meta = obj.get("metadata") or {}
    if obj.get("kind") != "Secret" or (meta.get("labels") or {}).get(LABEL) != "true":
        return None
    out = {}
    for key, value in (obj.get("data") or {}).items():
        if key in VARIABLES and isinstance(value, str):
            text = base64.b64decode(value).decode(errors="replace")
            if text and len(text) <= MAX_VALUE_CHARS:
                out[key] = text
    return out
