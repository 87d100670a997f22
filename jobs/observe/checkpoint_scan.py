"""The checkpoints under a job's checkpoint directories: one algorithm, run either by the console on host paths (the
local runtime bind-mounts each hostPath) or, as a script, inside a Kubernetes Worker that mounts them
(``python3 -c <this module's source> <JSON>``, through ``pods/exec``; :mod:`jobs.observe.checkpoints`).

Standard library only, no project imports: the whole file is the script sent into the container.

``scan(roots)`` looks at every directory ``global_step_<N>`` directly under each root (the newest
:data:`MAX_PER_ROOT` by step) and returns ``{"roots": [{"root", "state" ok|missing|unreadable, "checkpoints":
[{"name", "step", "size" (bytes), "files", "mtime" (epoch s, newest file or directory), "state", "reasons",
"listSha"}]}], "truncated"}``. ``state``:

- ``being_written``: something in it changed less than :data:`WRITING_SECONDS` ago (a save in progress);
- ``incomplete``: ``reasons`` says why: ``no_actor`` (no ``actor/`` sub-directory: RLinf 0.3.0 asserts it on
  resume), ``empty`` (no file), ``empty_file:<rel>`` (a zero-byte file: RLinf's writers, ``torch.save`` and
  torch.distributed.checkpoint, write no empty file, so one is a write cut off), ``temp_file:<rel>`` (a leftover
  ``*.tmp`` / ``*.tmp.*`` / ``*.partial`` file: torch.distributed.checkpoint writes ``.metadata.tmp`` and renames
  it to ``.metadata`` when every shard is written), ``no_dcp_metadata:<rel>`` (a ``dcp_checkpoint/`` without its
  ``.metadata``: the save stopped before it finished), ``not_verified`` (more than :data:`MAX_FILES` files, or the
  scan ran out of its :data:`SCAN_SECONDS`);
- ``complete`` otherwise.

``listSha``: sha256 of the sorted ``<relative path>\\t<size>\\n`` lines of its files (a checksum of the file list).
Run as a script it prints ``RLARK-CHECKPOINTS <base64 of the JSON>`` on one line.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import re
import sys
import time

MARKER = "RLARK-CHECKPOINTS "
MAX_ROOTS = 50
MAX_PER_ROOT = 100
MAX_FILES = 20000  # files walked in one checkpoint
SCAN_SECONDS = 10.0
WRITING_SECONDS = 30.0
MAX_REASONS = 5
_STEP = re.compile(r"^global_step_(\d{1,12})$")
_TEMP = re.compile(r"(\.tmp$|\.tmp\.|\.partial$|^\.?tmp[._-])")


def _walk(path: str, deadline: float) -> tuple[list[tuple[str, int]], float, bool, set[str]]:
    """``(files as (relative path, size), newest mtime, truncated, relative directories)`` of ``path``."""
    files: list[tuple[str, int]] = []
    dirs: set[str] = set()
    newest = os.stat(path).st_mtime
    for root, subdirs, names in os.walk(path):
        rel_root = os.path.relpath(root, path)
        newest = max(newest, os.stat(root).st_mtime)
        dirs.update(os.path.normpath(os.path.join(rel_root, d)) for d in subdirs)
        for name in names:
            try:
                st = os.stat(os.path.join(root, name))
            except OSError:
                continue  # removed while walking
            files.append((os.path.normpath(os.path.join(rel_root, name)), st.st_size))
            newest = max(newest, st.st_mtime)
            if len(files) > MAX_FILES or time.monotonic() > deadline:
                return files, newest, True, dirs
    return files, newest, False, dirs


def _reasons(files: list[tuple[str, int]], dirs: set[str], truncated: bool) -> list[str]:
    reasons = [] if "actor" in dirs else ["no_actor"]
    if not files:
        reasons.append("empty")
    names = {rel for rel, _size in files}
    for rel, size in files:
        base = os.path.basename(rel)
        if _TEMP.search(base):
            reasons.append(f"temp_file:{rel}")
        elif size == 0:
            reasons.append(f"empty_file:{rel}")
    for d in sorted(dirs):
        if os.path.basename(d) == "dcp_checkpoint" and os.path.join(d, ".metadata") not in names:
            reasons.append(f"no_dcp_metadata:{d}")
    if truncated:
        reasons.append("not_verified")
    return reasons[:MAX_REASONS]


def checkpoint(path: str, step: int, deadline: float, now: float) -> dict:
    """What one ``global_step_<step>`` directory holds and its state (module docstring)."""
    files, newest, truncated, dirs = _walk(path, deadline)
    listing = "".join(f"{rel}\t{size}\n" for rel, size in sorted(files))
    reasons = _reasons(files, dirs, truncated)
    if now - newest < WRITING_SECONDS:
        state = "being_written"
    else:
        state = "incomplete" if reasons else "complete"
    return {
        "name": os.path.basename(path),
        "step": step,
        "size": sum(size for _rel, size in files),
        "files": len(files),
        "mtime": newest,
        "state": state,
        "reasons": reasons,
        "listSha": hashlib.sha256(listing.encode()).hexdigest(),
    }


def scan_root(root: str, deadline: float, now: float) -> dict:
    """The checkpoints directly under ``root`` (newest :data:`MAX_PER_ROOT` by step)."""
    try:
        entries = [(e.name, e.path) for e in os.scandir(root) if e.is_dir(follow_symlinks=False)]
    except FileNotFoundError:
        return {"root": root, "state": "missing", "checkpoints": []}
    except OSError as exc:
        return {"root": root, "state": "unreadable", "detail": exc.strerror or type(exc).__name__, "checkpoints": []}
    steps = sorted(((int(m.group(1)), p) for n, p in entries if (m := _STEP.match(n))), reverse=True)
    out = []
    for step, path in steps[:MAX_PER_ROOT]:
        if time.monotonic() > deadline:
            break
        try:
            out.append(checkpoint(path, step, deadline, now))
        except OSError:
            continue  # removed while scanning
    return {"root": root, "state": "ok", "checkpoints": out, "more": len(steps) > len(out)}


def scan(roots: list[str]) -> dict:
    """Every root's checkpoints within :data:`SCAN_SECONDS` (module docstring)."""
    deadline = time.monotonic() + SCAN_SECONDS
    now = time.time()
    results = [scan_root(r, deadline, now) for r in roots[:MAX_ROOTS]]
    truncated = time.monotonic() > deadline or len(roots) > MAX_ROOTS or any(r.get("more") for r in results)
    return {"roots": results, "truncated": truncated}


def encode(result: dict) -> str:
    """The script's output line for ``result``."""
    return MARKER + base64.b64encode(json.dumps(result).encode()).decode()


def decode(output: str) -> dict | None:
    """The result in a script's output (terminal bytes around it are ignored); None when there is none."""
    at = output.find(MARKER)
    if at < 0:
        return None
    tokens = output[at + len(MARKER) :].split()
    try:
        result = json.loads(base64.b64decode(tokens[0] if tokens else "", validate=True))
    except ValueError:
        return None
    return result if isinstance(result, dict) and isinstance(result.get("roots"), list) else None


if __name__ == "__main__":
    print(encode(scan(list(json.loads(sys.argv[1])))), flush=True)
