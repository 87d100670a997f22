"""Mounts of a Task template: where a container path lives on the host (local runtime).

Shared by the run check (output directories) and the metrics page (TensorBoard directory). The local runtime
bind-mounts each ``hostPath`` volume at its ``mountPath`` (``clusters.runtime.local``), so a container path under
such a mount has a host path; ``subPath`` is honoured and the longest covering mount wins.
"""

from __future__ import annotations

import os

from jobs.jobspec.layout import main_container


def _covering(template: dict, container_path: str) -> list[tuple[str, dict, dict]]:
    """``(mountPath, mount, volume)`` of each mount of the ``main`` container that covers ``container_path``."""
    try:
        volumes = template["kubernetes"]["workload"]["template"]["spec"].get("volumes") or []
    except (KeyError, TypeError, AttributeError):
        volumes = []
    by_name = {v.get("name"): v for v in volumes if isinstance(v, dict)}
    out = []
    for mount in main_container(template).get("volumeMounts") or []:
        mpath = str(mount.get("mountPath") or "").rstrip("/")
        if mpath and (container_path == mpath or container_path.startswith(mpath + "/")):
            out.append((mpath, mount, by_name.get(mount.get("name")) or {}))
    return out


def host_path_for(template: dict, container_path: str) -> str | None:
    """Resolve a container path through the template's hostPath mounts (local runtime bind-mounts each
    hostPath at its mountPath); None when no hostPath mount covers it."""
    best: tuple[int, str] | None = None
    for mpath, mount, volume in _covering(template, container_path):
        hpath = (volume.get("hostPath") or {}).get("path")
        if not hpath:
            continue
        sub = str(mount.get("subPath") or "").strip("/")
        base = os.path.join(hpath, sub) if sub else hpath
        rest = container_path[len(mpath) :].lstrip("/")
        candidate = os.path.join(base, rest) if rest else base
        if best is None or len(mpath) > best[0]:
            best = (len(mpath), candidate)
    return best[1] if best else None


def persistent_mount_for(template: dict, container_path: str) -> bool:
    """Whether a hostPath or PersistentVolumeClaim mount of the template's ``main`` container covers
    ``container_path`` (what outlives a Pod; an emptyDir does not)."""
    return any(
        v.get("hostPath") or v.get("persistentVolumeClaim") for _m, _mount, v in _covering(template, container_path)
    )
