"""Run check 5's look at an output path (seed 02, "output persisted and readable"): one algorithm, run either by
the console on a host path (the local runtime bind-mounts each hostPath) or, as a script, inside a Kubernetes
Worker that mounts the path (``python3 -c <this module's source> <path>``, through ``pods/exec``).

Standard library only, no project imports: the whole file is the script sent into the container.

``scan(path, hash_limit)`` returns a dict: ``state`` ``ok`` | ``missing`` | ``unreadable``; for ``ok`` also
``files`` (count, at most :data:`MAX_FILES` walked), ``newest`` (path of the newest file), ``size`` (bytes) and
``sha256`` of its first ``hash_limit`` bytes; ``detail`` says why otherwise. Run as a script it prints
``RLARK-OUTPUT <base64 of the JSON>`` on one line, so a terminal's translations cannot change it.
"""

from __future__ import annotations

import base64
import glob
import hashlib
import json
import os
import sys

MARKER = "RLARK-OUTPUT "
MAX_FILES = 10000


def _files(matches: list[str]) -> list[str]:
    files: list[str] = []
    for item in matches:
        if os.path.isdir(item):
            for root, _dirs, names in os.walk(item):
                files.extend(os.path.join(root, n) for n in names)
                if len(files) > MAX_FILES:
                    return files
        elif os.path.isfile(item):
            files.append(item)
    return files


def scan(path: str, hash_limit: int) -> dict:
    """The files under ``path`` (globs allowed) and the newest one's size and digest (see the module docstring)."""
    matches = sorted(glob.glob(path)) if any(c in path for c in "*?[") else ([path] if os.path.exists(path) else [])
    if not matches:
        return {"state": "missing", "detail": "not found"}
    files = _files(matches)
    if not files:
        return {"state": "missing", "detail": "no files"}
    newest = max(files, key=lambda f: os.stat(f).st_mtime)
    digest = hashlib.sha256()
    try:
        with open(newest, "rb") as fh:
            remaining = hash_limit
            while remaining > 0 and (chunk := fh.read(min(1 << 20, remaining))):
                digest.update(chunk)
                remaining -= len(chunk)
    except OSError as exc:
        return {"state": "unreadable", "detail": exc.strerror or type(exc).__name__}
    return {
        "state": "ok",
        "files": len(files),
        "newest": newest,
        "size": os.path.getsize(newest),
        "sha256": digest.hexdigest(),
    }


def encode(result: dict) -> str:
    """The script's output line for ``result``."""
    return MARKER + base64.b64encode(json.dumps(result).encode()).decode()


def decode(output: str) -> dict | None:
    """The result in a script's output (terminal bytes around it are ignored); None when there is none."""
    at = output.find(MARKER)
    if at < 0:
        return None
    token = output[at + len(MARKER) :].split()[0] if output[at + len(MARKER) :].split() else ""
    try:
        result = json.loads(base64.b64decode(token, validate=True))
    except ValueError:
        return None
    return result if isinstance(result, dict) and isinstance(result.get("state"), str) else None


if __name__ == "__main__":
    print(encode(scan(sys.argv[1], int(sys.argv[2]))), flush=True)
