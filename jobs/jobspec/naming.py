"""Generated names (upstream-rlark 3, 3.1, 3.2)."""

from __future__ import annotations

import re

_RUN_OF_DASHES = re.compile(r"-+")
_ALLOWED = set("abcdefghijklmnopqrstuvwxyz0123456789.-")


def to_resource_name(value: str) -> str:
    """Upstream ``toResourceName``: lower-case; every char outside ``[a-z0-9.-]`` -> ``-<hex code point>-``;
    runs of ``-`` collapse; leading/trailing non-alphanumerics removed.

    ``"Rollout Worker"`` -> ``"rollout-20-worker"``, ``"-Ab_c-"`` -> ``"ab-5f-c"``, ``"训练"`` -> ``"8bad-7ec3"``.
    """
    out = []
    for ch in str(value).lower():
        out.append(ch if ch in _ALLOWED else f"-{ord(ch):x}-")
    slug = _RUN_OF_DASHES.sub("-", "".join(out))
    start, end = 0, len(slug)
    while start < end and not slug[start].isalnum():
        start += 1
    while end > start and not slug[end - 1].isalnum():
        end -= 1
    return slug[start:end]


def task_name(job: str, template: str) -> str:
    """Task (and StatefulSet) name: ``<job>-<template>``."""
    return f"{job}-{template}"


def volume_name(mount_path: str) -> str:
    """Wizard volume name: every ``/`` -> ``-``, one leading and one trailing ``-`` removed; empty -> ``vol``.

    ``/mnt/ckpt`` -> ``mnt-ckpt``; ``/mnt/data/`` -> ``mnt-data``; ``/`` -> ``vol``.
    """
    name = str(mount_path).replace("/", "-")
    if name.startswith("-"):
        name = name[1:]
    if name.endswith("-"):
        name = name[:-1]
    return name or "vol"


def pvc_name(job: str, template: str, volume: str) -> str:
    """Wizard PVC claim name ``pvc-<jobSlug>-<taskName>-<volName>`` (3.2: job ``ppo-job``, role ``Actor``,
    mount ``/mnt/data/`` -> ``pvc-ppo-job-actor-mnt-data``)."""
    return f"pvc-{to_resource_name(job)}-{template}-{volume}"


def head_service_name(task: str) -> str:
    """Headless Service of a head Task: ``<task>-ray-head``."""
    return f"{task}-ray-head"
