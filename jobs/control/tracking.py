"""A Job's experiment-tracking credentials, from the names in its document to the variables of its Workers.

``spec.trackingCredentials`` lists names of the job owner's ``accounts.TrackingCredential`` rows (at most one W&B
and one SwanLab); :func:`env_for` turns them into the variables of ``clusters.tracking_secret`` that reach every
Worker through the Task's Secret. The wizard's common step (step 3) picks them (:func:`picked`, :func:`to_spec`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from accounts.models import TrackingCredential
from clusters import tracking_secret as ts
from jobs.jobspec.tracking import CODES, SPEC_KEY, names_in

__all__ = ["CODES", "env_for", "from_spec", "job_env", "picked", "to_spec"]


def env_for(user, names: Iterable[str]) -> dict[str, str]:
    """Variable -> value for ``user``'s credentials called ``names`` (at most two are read): the API key, for a
    self-hosted one its host and, for a W&B one with an entity, ``WANDB_ENTITY``. Names without a credential are
    skipped (deleted since submit)."""
    wanted = [n for n in names if isinstance(n, str)][:2]
    out: dict[str, str] = {}
    for cred in TrackingCredential.objects.filter(user=user, name__in=wanted):
        wandb = cred.kind == TrackingCredential.Kind.WANDB
        out[ts.WANDB_API_KEY if wandb else ts.SWANLAB_API_KEY] = cred.api_key
        if cred.host:
            out[ts.WANDB_BASE_URL if wandb else ts.SWANLAB_HOST] = cred.host
        if wandb and cred.entity:
            out[ts.WANDB_ENTITY] = cred.entity
    return out


def job_env(job) -> dict[str, str]:
    """The tracking variables of ``job`` (a ``jobs.Job``): its owner's credentials named in its document."""
    return env_for(job.owner, names_in(job.spec_section))


def picked(data) -> list[str]:
    """The credential names a wizard POST picked (field ``tracking``; at most two, empty ones dropped)."""
    getlist = data.getlist if hasattr(data, "getlist") else (lambda k: list(data.get(k) or []))
    return [str(n)[:63] for n in getlist("tracking") if n][:2]


def to_spec(spec: dict[str, Any], names: list[str]) -> None:
    """Write the wizard's picked names into the document's ``spec`` (nothing when none is picked)."""
    if names:
        spec[SPEC_KEY] = list(names)


def from_spec(spec: Mapping[str, Any]) -> list[str]:
    """The names a stored document picks, for the wizard's prefill."""
    return names_in(spec)
