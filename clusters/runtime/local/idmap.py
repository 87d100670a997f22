"""Subordinate ids for local Workers: root in a Worker is an unprivileged host uid.

A root supervisor owns one range of subordinate uids and gids (``/etc/subuid``, ``/etc/subgid``, the
way rootless container runtimes do) and gives each job a slot of :data:`SLOT` ids: root in that job's
Workers is host uid/gid ``start + slot * SLOT``, uid N inside is ``start + slot * SLOT + N``. ``newuidmap``
and ``newgidmap`` (Debian package ``uidmap``) write the maps; they accept only ranges listed for the
calling user, so :func:`ensure_range` adds the range for ``root`` when it is missing (``usermod
--add-subuids``). Defaults: ``RLARK_LOCAL_SUBID_START`` 1000000000, ``RLARK_LOCAL_SUBID_COUNT``
67108864 (1,024 slots).

Errors: :class:`IdMapUnavailable` (message for the Pod's CreateContainerError) when the tools are
missing or the range cannot be set up; a root supervisor then starts no Worker rather than one that is
host root.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

SLOT = 65536
START = int(os.environ.get("RLARK_LOCAL_SUBID_START", "1000000000"))
COUNT = int(os.environ.get("RLARK_LOCAL_SUBID_COUNT", str(1024 * SLOT)))


class IdMapUnavailable(RuntimeError):
    """No subordinate id range can be used; the message says what to install or configure."""


def ranges(path: Path, user: str = "root") -> list[tuple[int, int]]:
    """``(start, count)`` of every range listed for ``user`` (name or uid) in a subuid/subgid file."""
    out = []
    try:
        lines = path.read_text().splitlines()
    except OSError:
        return []
    for line in lines:
        parts = line.strip().split(":")
        if len(parts) == 3 and parts[0] in (user, "0") and parts[1].isdigit() and parts[2].isdigit():
            out.append((int(parts[1]), int(parts[2])))
    return out


def _covered(path: Path, start: int, count: int) -> bool:
    return any(s <= start and start + count <= s + n for s, n in ranges(path))


def ensure_range(start: int = START, count: int = COUNT, etc: Path = Path("/etc")) -> tuple[int, int]:
    """Make sure root owns ``[start, start + count)`` in subuid and subgid; returns ``(start, count)``.

    Raises :class:`IdMapUnavailable` when ``newuidmap``/``newgidmap``/``unshare``/``setpriv`` are missing
    (``apt-get install uidmap``) or the files cannot be updated."""
    missing = [tool for tool in ("newuidmap", "newgidmap", "setpriv", "unshare") if not shutil.which(tool)]
    if missing:
        raise IdMapUnavailable(
            f"the local runtime needs {', '.join(missing)} to run Workers as an unprivileged user "
            "(Debian: apt-get install uidmap util-linux)"
        )
    if count < SLOT:
        raise IdMapUnavailable(f"RLARK_LOCAL_SUBID_COUNT must be at least {SLOT}")
    subuid, subgid = etc / "subuid", etc / "subgid"
    if _covered(subuid, start, count) and _covered(subgid, start, count):
        return start, count
    span = f"{start}-{start + count - 1}"
    usermod = shutil.which("usermod")
    try:
        if usermod is None:
            raise OSError("usermod not found")
        subprocess.run(
            [usermod, "--add-subuids", span, "--add-subgids", span, "root"],
            check=True,
            capture_output=True,
            timeout=30,
        )
    except (OSError, subprocess.SubprocessError) as exc:
        raise IdMapUnavailable(f"cannot add the subordinate id range {span} for root to {etc}/subuid: {exc}") from exc
    if not (_covered(subuid, start, count) and _covered(subgid, start, count)):
        raise IdMapUnavailable(f"the subordinate id range {span} is not listed for root in {etc}/subuid and subgid")
    return start, count


def slot_ids(start: int, slot: int) -> tuple[int, int]:
    """``(first host id, count)`` of ``slot``."""
    return start + slot * SLOT, SLOT
