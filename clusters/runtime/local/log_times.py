"""When each line of a local Worker's log was written: the local runtime's answer to the kubelet's timestamps.

A Worker writes its stdout and stderr straight into ``main.log`` (``launcher.spawn``), so no line carries a time.
The supervisor notes, on every tick (``supervision.TICK``, 0.5 s), the size of each running Pod's ``main.log``
when it grew, as ``<byte offset> <unix time>`` lines in ``main.times`` beside it. A line's time is the first noted
time at which the log reached the line's end: at most one tick late, and the same on every read, so a reader's
byte cursor into the stamped stream never moves (``terminal.services.logs``). A read that finds lines not noted
yet notes them first. A restart moves ``main.times`` to ``main.previous.times`` with the log
(``Supervisor._fresh_run``).
"""

from __future__ import annotations

import bisect
import os
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

TIMES = "main.times"
PREVIOUS_TIMES = "main.previous.times"
MAX_INDEX_BYTES = 64 << 20  # a larger index is not read (lines then get the log's modification time)


def times_path(log_path: Path) -> Path:
    """The index beside ``log_path`` (``main.log`` -> ``main.times``, ``main.previous.log`` ->
    ``main.previous.times``)."""
    return log_path.with_name(PREVIOUS_TIMES if log_path.name == "main.previous.log" else TIMES)


class LogTimes:
    """The supervisor's notes: the last noted size of each ``main.log`` (in memory; a restarted supervisor notes
    the current size once, which changes no earlier line's time)."""

    def __init__(self) -> None:
        self.sizes: dict[Path, int] = {}

    def note(self, pod_dirs: list[Path], now: float | None = None) -> None:
        """Append ``<size> <now>`` to ``main.times`` of each of ``pod_dirs`` whose ``main.log`` grew since the
        last note (``now``: unix seconds, default the clock). Missing logs are skipped."""
        stamp = time.time() if now is None else now
        for pdir in pod_dirs:
            log = pdir / "main.log"
            try:
                size = log.stat().st_size
            except OSError:
                continue
            if size != self.sizes.get(log):
                if size > self.sizes.get(log, 0):
                    append(times_path(log), size, stamp)
                self.sizes[log] = size

    def rotate(self, pdir: Path) -> None:
        """A restart: the index goes with the log to ``main.previous.times``."""
        current = pdir / TIMES
        if current.exists():
            os.replace(current, pdir / PREVIOUS_TIMES)
        self.sizes.pop(pdir / "main.log", None)


def append(path: Path, offset: int, stamp: float) -> None:
    """Append one ``<offset> <unix time>`` line (one ``O_APPEND`` write, so two writers never mix lines)."""
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, f"{int(offset)} {stamp:.6f}\n".encode())
    finally:
        os.close(fd)


def read_index(path: Path) -> tuple[list[int], list[float]]:
    """``(offsets ascending, times)``: for each noted offset the earliest time noted for it or a larger one.
    Empty for a missing or oversized index; malformed lines are skipped."""
    try:
        if path.stat().st_size > MAX_INDEX_BYTES:
            return [], []
        text = path.read_text("ascii", "replace")
    except OSError:
        return [], []
    pairs = []
    for line in text.splitlines():
        parts = line.split()
        if len(parts) == 2:
            try:
                pairs.append((int(parts[0]), float(parts[1])))
            except ValueError:
                continue
    pairs.sort()
    offsets, times = [p[0] for p in pairs], [p[1] for p in pairs]
    for i in range(len(times) - 2, -1, -1):  # a line's time: the earliest note at or past its end
        times[i] = min(times[i], times[i + 1])
    return offsets, times


def rfc3339(stamp: float) -> bytes:
    """Unix seconds as the kubelet writes a log time: ``2026-12-07T02:33:00.123456Z``."""
    return datetime.fromtimestamp(stamp, UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ").encode()


def stamped_chunks(log_path: Path, chunk_size: int, previous: bool) -> Iterator[bytes]:
    """The log's bytes with every line prefixed by its time and a space, as ``pods/log?timestamps=true`` sends
    them. The current log's lines past the last note are noted first (the time of this read); a last line
    without a newline is sent unstamped until it ends. Raises ``FileNotFoundError`` for a missing log."""
    index = times_path(log_path)
    with open(log_path, "rb") as f:
        size = os.fstat(f.fileno()).st_size
        offsets, times = read_index(index)
        if not previous and size and (not offsets or offsets[-1] < size):
            now = time.time()
            try:
                append(index, size, now)
            except OSError:  # a read-only state directory: this read's times only
                pass
            offsets, times = [*offsets, size], [*times, now]
        fallback = os.fstat(f.fileno()).st_mtime
        position, rest = 0, b""
        while chunk := f.read(chunk_size):
            lines = (rest + chunk).split(b"\n")
            rest = lines.pop()
            out = []
            for line in lines:
                position += len(line) + 1
                i = bisect.bisect_left(offsets, position)
                out.append(rfc3339(times[i] if i < len(times) else fallback) + b" " + line + b"\n")
            if out:
                yield b"".join(out)
        if rest:
            yield rest
