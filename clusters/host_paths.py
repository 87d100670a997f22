"""Which host directories a Job's ``hostPath`` volumes may mount: the one rule the validator, the local runtime
and the Kubernetes runtime apply (docs/security.md, "Host paths").

Seed 03 ("主机目录"): a host directory exposes the node's file system to the workload and may be used only after
the platform administrator has confirmed the path, its permissions, its read/write impact and its clean-up. Here
that confirmation is a cluster's list of allowed roots (``Cluster.host_path_roots``, empty by default: nothing is
allowed). A path is allowed when, with symlinks and ``..`` resolved, it is one of the roots or lies below one,
and it is none of :data:`ALWAYS_REFUSED` (nor below one; ``/`` itself) and does not overlap the console's own
files (its checkout and state directory), with one exception: the local runtime's host-path area
(``<RLARK_LOCAL_ROOT>/host-paths``, where the demo cluster's per-user root lives) is the console's to give out.
A root may contain ``{user}``, replaced by the submitting user's name, which gives every user a directory of
their own.

Everything here is checked *before* anything is created, so a refused mount creates nothing.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

ALWAYS_REFUSED = ("/usr", "/etc", "/root", "/boot", "/proc", "/sys", "/var/lib", "/dev", "/bin", "/sbin", "/lib")
MAX_ROOTS = 32
MAX_PATH_CHARS = 1024
USER_TOKEN = "{user}"
_SAFE_USER = re.compile(r"[^A-Za-z0-9_.@+-]")


class HostPathRefused(ValueError):
    """A hostPath the rule refuses. ``code`` is a message code of ``jobs.jobspec.messages`` (``host_path_*``),
    ``params`` its parameters (``path``, ``roots`` or ``protected``)."""

    def __init__(self, code: str, **params: str) -> None:
        super().__init__(f"{code}: {params}")
        self.code = code
        self.params = params


@dataclass(frozen=True)
class HostPathPolicy:
    """``roots``: the administrator's allowed roots (may hold ``{user}``); ``protected``: directories no
    hostPath may overlap (the console's checkout and state directory); ``exempt``: directories inside
    ``protected`` that are the runtime's own host-path area (e.g. ``<RLARK_LOCAL_ROOT>/host-paths``)."""

    roots: tuple[str, ...] = ()
    protected: tuple[str, ...] = ()
    exempt: tuple[str, ...] = ()


def parse_roots(text: str, exempt: Iterable[str] = ()) -> list[str]:
    """The roots in an administrator's text (one absolute path per line; blank lines and ``#`` comments are
    skipped). Raises HostPathRefused (``host_path_root_invalid``) for a relative path, an always-refused one, a
    line over :data:`MAX_PATH_CHARS` or more than :data:`MAX_ROOTS` roots."""
    roots = []
    for line in (text or "").splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        if len(line) > MAX_PATH_CHARS or not line.startswith("/") or "\0" in line:
            raise HostPathRefused("host_path_root_invalid", path=line[:200])
        resolved = _resolve(line.replace(USER_TOKEN, "user"))
        if any(_within(resolved, _resolve(e)) for e in exempt):
            roots.append(line)
            continue
        if resolved == "/" or _refused_system_path(resolved):
            raise HostPathRefused("host_path_root_invalid", path=line)
        roots.append(line)
    if len(roots) > MAX_ROOTS:
        raise HostPathRefused("host_path_root_invalid", path=f"{len(roots)} > {MAX_ROOTS}")
    return roots


def user_roots(roots: Iterable[str], user: str) -> list[str]:
    """``roots`` with ``{user}`` replaced by ``user`` (characters outside ``[A-Za-z0-9_.@+-]`` become ``_``)."""
    safe = _SAFE_USER.sub("_", user or "anonymous").lstrip(".") or "anonymous"
    return [r.replace(USER_TOKEN, safe) for r in roots]


def check(path: str, policy: HostPathPolicy, user: str | None = None) -> str:
    """The resolved form of ``path`` when ``policy`` allows it. ``user`` None (a runtime, which does not know
    the submitter; the validator checked the exact user) lets a ``{user}`` root stand for the directory above
    it. Raises HostPathRefused: ``host_path_relative``
    (not absolute), ``host_path_forbidden`` (a system directory or the console's files) or
    ``host_path_outside_roots`` (below no allowed root; ``roots`` lists them). Reads the file system to resolve
    symlinks; creates nothing."""
    if not path or not path.startswith("/") or len(path) > MAX_PATH_CHARS or "\0" in path:
        raise HostPathRefused("host_path_relative", path=str(path)[:200])
    real = check_protected(path, policy.protected, policy.exempt)
    named = user_roots(policy.roots, user) if user is not None else [r.split(USER_TOKEN)[0] for r in policy.roots]
    if not any(_within(real, _resolve(r)) for r in named if r.strip("/")):
        raise HostPathRefused("host_path_outside_roots", path=path, roots=", ".join(named) or "-")
    return real


def valid_sub_path(sub_path: str) -> bool:
    """A volume mount's ``subPath`` as Kubernetes accepts it: relative, no ``..`` component, at most
    :data:`MAX_PATH_CHARS` characters, no NUL."""
    if not sub_path or len(sub_path) > MAX_PATH_CHARS or "\0" in sub_path or sub_path.startswith("/"):
        return False
    return ".." not in sub_path.split("/")


def sub_path_within(base: str, sub_path: str) -> str:
    """The real path of ``sub_path`` below the real path of ``base``. Raises HostPathRefused
    (``sub_path_invalid``) for an invalid sub-path or one that leads out of ``base`` through a symlink."""
    if not valid_sub_path(sub_path):
        raise HostPathRefused("sub_path_invalid", sub_path=sub_path[:200])
    root = _resolve(base)
    real = _resolve(os.path.join(root, sub_path))
    if not _within(real, root):
        raise HostPathRefused("sub_path_invalid", sub_path=sub_path[:200])
    return real


def check_protected(path: str, protected: Iterable[str], exempt: Iterable[str] = ()) -> str:
    """The resolved ``path`` unless it is ``/``, an :data:`ALWAYS_REFUSED` directory or below one, or overlaps one
    of ``protected`` (inside it, or containing it) without being inside one of ``exempt``. The part of the rule a
    local runtime applies by itself (it does not know the cluster's roots). Raises HostPathRefused
    (``host_path_relative``, ``host_path_forbidden``)."""
    if not path or not path.startswith("/") or len(path) > MAX_PATH_CHARS or "\0" in path:
        raise HostPathRefused("host_path_relative", path=str(path)[:200])
    real = _resolve(path)
    allowed = [_resolve(e) for e in exempt]
    if any(_within(real, e) for e in allowed):
        return real  # the runtime's own host-path area, wherever the state directory is (e.g. /var/lib/rlark)
    if real == "/" or _refused_system_path(real):
        raise HostPathRefused("host_path_forbidden", path=path)
    for p in protected:
        if _overlaps(real, _resolve(str(p))) and not any(_within(real, e) for e in allowed):
            raise HostPathRefused("host_path_forbidden", path=path)
    return real


def _resolve(path: str) -> str:
    return os.path.realpath(path)


def _within(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip("/") + "/")


def _overlaps(a: str, b: str) -> bool:
    return _within(a, b) or _within(b, a)


def _refused_system_path(real: str) -> bool:
    return any(_within(real, _resolve(s)) or _within(real, s) for s in ALWAYS_REFUSED)


def policy_for(roots_text: str, checkout: str, var_dir: str, local_root: str) -> HostPathPolicy:
    """The policy of a cluster whose administrator allowed ``roots_text`` (see :func:`parse_roots`; an invalid
    line allows nothing, the valid ones still apply), for a console whose checkout, state directory and local
    runtime root are given. The local runtime's ``<local_root>/host-paths`` is the one place inside the state
    directory a root may name."""
    area = host_path_area(local_root)
    roots = []
    for line in (roots_text or "").splitlines()[: MAX_ROOTS * 4]:  # each line on its own: one bad line allows less
        try:
            roots += parse_roots(line, [area])
        except HostPathRefused:
            continue
    return HostPathPolicy(roots=tuple(roots[:MAX_ROOTS]), protected=(checkout, var_dir), exempt=(area,))


def host_path_area(local_root: str) -> str:
    """The local runtime's host-path area, ``<local_root>/host-paths`` (the demo cluster's roots live there)."""
    return os.path.join(local_root, "host-paths")


def demo_host_path_root(local_root: str) -> str:
    """The demo cluster's one root: every user's own directory in the local runtime's host-path area."""
    return os.path.join(host_path_area(local_root), USER_TOKEN)


def demo_output_path(local_root: str, user: str, job: str) -> str:
    """Where the demo job of ``user`` named ``job`` writes its output (below :func:`demo_host_path_root`)."""
    return os.path.join(user_roots([demo_host_path_root(local_root)], user)[0], job)


# hostPath volumes the console itself adds: the TUN device of the network domain sidecar (domains.sidecar
# mounts it under this name)
TUN_VOLUME = "rlark-net-tun"
TUN_DEVICE = "/dev/net/tun"
CONSOLE_VOLUMES = {(TUN_VOLUME, TUN_DEVICE, "CharDevice")}


def workload_host_paths(workload: dict) -> list[tuple[str, str, str]]:
    """``(volume name, path, type)`` of every ``hostPath`` volume of a StatefulSet-shaped ``workload``, except
    the ones the console adds itself (:data:`CONSOLE_VOLUMES`)."""
    spec = ((workload.get("spec") or {}).get("template") or {}).get("spec") or {}
    out = []
    for v in spec.get("volumes") or []:
        hp = v.get("hostPath") if isinstance(v, dict) else None
        if isinstance(hp, dict):
            entry = (str(v.get("name") or ""), str(hp.get("path") or ""), str(hp.get("type") or ""))
            if entry not in CONSOLE_VOLUMES:
                out.append(entry)
    return out


def check_workload(workload: dict, policy: HostPathPolicy) -> None:
    """:func:`check` for every hostPath volume of ``workload`` (a runtime's last check before it writes
    anything). Raises HostPathRefused for the first refused one, its ``params`` naming the volume too."""
    for name, path, _type in workload_host_paths(workload):
        try:
            check(path, policy)
        except HostPathRefused as exc:
            exc.params["volume"] = name
            raise


def host_path_policy(roots_text: str) -> HostPathPolicy:
    """:func:`policy_for` with this console's checkout, state directory and local root (Django settings)."""
    from django.conf import settings  # read when called: the local supervisor imports this module too

    return policy_for(roots_text, str(settings.BASE_DIR), str(settings.VAR_DIR), str(settings.RLARK_LOCAL_ROOT))


def check_cluster_host_paths(cluster: Any, workload: dict) -> None:
    """A runtime's last check before it writes a Task: every hostPath volume of ``workload`` is allowed by
    ``cluster`` (a ``clusters.models.Cluster``: ``allow_host_path`` and its ``host_path_roots``). Objects without
    ``host_path_roots`` (test doubles of a cluster) are checked against the always-refused paths only. Raises
    clusters.host_paths.HostPathRefused."""
    volumes = workload_host_paths(workload)
    if not volumes:
        return
    if not hasattr(cluster, "host_path_roots"):
        policy = host_path_policy("")
        for _name, path, _type in volumes:
            check_protected(path, policy.protected, policy.exempt)
        return
    if not cluster.allow_host_path:
        raise HostPathRefused("host_path_not_allowed", cluster=cluster.name, path=volumes[0][1])
    check_workload(workload, host_path_policy(cluster.host_path_roots))
