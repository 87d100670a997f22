"""Find and read the resolved RLinf ``config.yaml`` under a TensorBoard directory: one algorithm, run either by the
console on a host path (the local runtime bind-mounts each hostPath) or, as a script, inside a running Kubernetes
Header that has the directory (``python3 -c <this module's source> <dir>``, through ``pods/exec``).

Standard library only, no project imports: the whole file is the script sent into the container.

``find(base)`` returns None when no readable config is found, else a dict: ``rel`` (its path relative to
``base``), ``size`` (bytes), ``sha256`` (hex, of the first :data:`MAX_HASH` bytes), ``hashed_all`` (the checksum
covers the whole file), ``head`` (base64 of its first :data:`MAX_SHOW` bytes). Where it looks: ``config.yaml`` in
``base`` or in its ``tensorboard/`` child, else the newest ``config.yaml`` beside event files at most
:data:`MAX_DEPTH` levels down (``tensorBoardDir`` may be the parent of timestamped run folders, reference
rlinf.md), looking at no more than :data:`MAX_ENTRIES` directory entries. A file is opened without following a
link, and a path that resolves outside ``base`` is not read. Run as a script it prints ``RLARK-CONFIG <base64 of
the JSON>`` on one line: ``{"config": <that dict or null>}``.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import stat
import sys

MARKER = "RLARK-CONFIG "
FILE = "config.yaml"
MAX_SHOW = 256 * 1024  # bytes of the file shown
MAX_HASH = 64 * 1024 * 1024  # bytes the checksum reads
CHUNK = 1024 * 1024
MAX_DEPTH = 3  # directory levels below the directory searched for a run's config.yaml
MAX_ENTRIES = 5000  # directory entries looked at by that search


def _read(path: str) -> dict | None:
    """``{size, sha256, hashed_all, head}`` of a regular file (not through a link), or None."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        return None
    with os.fdopen(fd, "rb") as f:
        st = os.fstat(f.fileno())
        if not stat.S_ISREG(st.st_mode):
            return None
        digest = hashlib.sha256()
        head = b""
        read = 0
        while read < MAX_HASH:
            chunk = f.read(min(CHUNK, MAX_HASH - read))
            if not chunk:
                break
            if len(head) < MAX_SHOW:
                head += chunk[: MAX_SHOW - len(head)]
            digest.update(chunk)
            read += len(chunk)
    return {
        "size": st.st_size,
        "sha256": digest.hexdigest(),
        "hashed_all": read >= st.st_size,
        "head": base64.b64encode(head).decode(),
    }


def _run_configs(base: str) -> list[str]:
    """Relative paths of the ``config.yaml`` files beside event files under ``base``, newest first."""
    found: list[tuple[float, str]] = []
    seen = 0
    for root, dirs, files in os.walk(base):
        seen += len(dirs) + len(files)
        depth = os.path.relpath(root, base).count(os.sep) + (root != base)
        if depth >= MAX_DEPTH or seen > MAX_ENTRIES:
            dirs[:] = []
        if FILE in files and any("tfevents" in f for f in files):
            try:
                found.append(
                    (os.lstat(os.path.join(root, FILE)).st_mtime, os.path.relpath(os.path.join(root, FILE), base))
                )
            except OSError:
                continue
        if seen > MAX_ENTRIES:
            break
    return [rel for _, rel in sorted(found, reverse=True)]


def find(base: str) -> dict | None:
    """The resolved config under ``base`` (see the module docstring), or None."""
    if not os.path.isdir(base):
        return None
    real_base = os.path.realpath(base)
    for rel in (FILE, os.path.join("tensorboard", FILE), *_run_configs(base)):
        path = os.path.join(base, rel)
        real = os.path.realpath(path)
        if os.path.commonpath([real_base, real]) != real_base or not os.path.isfile(real):
            continue
        found = _read(path)
        if found is not None:
            return {"rel": rel, **found}
    return None


def decode(output: str) -> dict | None:
    """The result in a script's output (terminal bytes around it are ignored): ``{"config": find's dict or
    None}``; None when the output holds no well-formed result."""
    at = output.find(MARKER)
    if at < 0:
        return None
    rest = output[at + len(MARKER) :].split()
    try:
        result = json.loads(base64.b64decode(rest[0] if rest else "", validate=True))
    except ValueError:
        return None
    if not isinstance(result, dict) or "config" not in result:
        return None
    config = result["config"]
    keys = {"rel", "size", "sha256", "hashed_all", "head"}
    if config is not None and not (isinstance(config, dict) and keys <= set(config)):
        return None
    return result


if __name__ == "__main__":
    found = find(sys.argv[1]) if len(sys.argv) > 1 else None
    print(MARKER + base64.b64encode(json.dumps({"config": found}).encode()).decode(), flush=True)
