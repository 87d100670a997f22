"""Which host ids a job's Workers run as: unprivileged Workers of a root supervisor.

As root, each job gets a slot of subordinate ids (:mod:`.idmap`, ``state["id_slots"]``: ``<cluster>/<job>`` ->
slot number); its Pod directories, volumes and claims belong to that slot's root (host uid = gid), and the Worker
runs as it (:mod:`.launcher`). A slot is kept after the job is gone (a re-created job finds its storage again)
and reused only when every slot was handed out once. A supervisor that is not root runs Workers as itself.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from clusters.runtime.local import idmap
from clusters.runtime.local.statedir import cluster_key

log = logging.getLogger("rlark.local_supervisor")


class IdSlots:
    """The subordinate id range of a root supervisor (``range``: ``(start, count)``, None when not root or when
    it cannot be used, then ``error`` says why) and the jobs' slots in ``state["id_slots"]``."""

    def __init__(self, state: dict[str, Any], changed: Callable[[], None]) -> None:
        self.state = state
        self.changed = changed
        self.range: tuple[int, int] | None = None
        self.error = ""
        if os.geteuid() == 0:
            try:
                self.range = idmap.ensure_range()
            except idmap.IdMapUnavailable as exc:
                self.error = str(exc)
                log.error("%s; no Worker will start", exc)

    def job_ids(self, cluster: str, job: str) -> tuple[int, int] | None:
        """``(host uid = gid of the job's root, count)``: one :mod:`.idmap` slot per job name, kept after the
        job is gone (a re-created job finds its storage again); ``None`` when not running as root. Raises
        RuntimeError when a root supervisor has no usable range (never start a Worker as host root)."""
        if os.geteuid() != 0:
            return None
        if self.range is None:
            raise RuntimeError(self.error or "no subordinate id range for Workers")
        start, count = self.range
        slots: dict[str, int] = self.state.setdefault("id_slots", {})
        jkey = cluster_key(cluster, job)
        if jkey not in slots:
            used = set(slots.values())
            free = [n for n in range(count // idmap.SLOT) if n not in used]
            if not free:  # every slot was handed out once: reuse the one of a job that no longer exists
                gone = [k for k in slots if k not in self.state["jobs"]]
                if not gone:
                    raise RuntimeError("every subordinate id slot is in use by a running job")
                free = [slots.pop(gone[0])]
            slots[jkey] = free[0]
            self.changed()
        return idmap.slot_ids(start, slots[jkey])


def own(path: Path, ids: tuple[int, int] | None, mode: int = 0o700) -> None:
    """Give ``path`` to the Worker's root (host uid ``ids[0]``; left as it is when ``ids`` is None) with
    ``mode``. Never follows a symlink for the owner."""
    if ids is not None:
        os.chown(path, ids[0], ids[0], follow_symlinks=False)
    path.chmod(mode)
