"""The cursor of the Kubernetes runtime's incremental log read (``read_log_from``), and the cutting of a
``pods/log?timestamps=true`` response into the lines after it.

Cursor ``T<RFC3339Nano>|<n>``: the last line's timestamp and how many lines carried it (the next read asks
``sinceTime`` and drops what was seen). A server that sends no timestamps gets a line-count cursor ``L<n>``
instead. The lines are cut and stripped with ``str`` methods (about ten times faster than a regex per line, which
a cold Diagnosis of a long log feels); a response in which some line does not start with a timestamp takes the
per-line path (:func:`after_timestamp_per_line`), which gives exactly the same.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime

from clusters.runtime.base import LogChunk

TIMESTAMP = r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?(?:Z|[+-]\d\d:\d\d)"  # RFC3339(Nano), as the kubelet writes it
LOG_TS = re.compile(rf"^({TIMESTAMP}) ")
_ALL_STAMPED = re.compile(rf"(?:{TIMESTAMP} [^\n]*\n)*")


def by_line_count(data: str, cursor: str, limit_bytes: int) -> LogChunk:
    """``read_log_from`` of a server that sends no timestamps: the cursor ``L<n>`` counts the complete lines
    seen; the whole log is read and the first ``n`` lines are skipped."""
    lines = data.splitlines(keepends=True)
    if len(lines) > 1 and not lines[-1].endswith("\n"):
        lines.pop()  # still being written
    if not lines or (len(lines) == 1 and not lines[0].endswith("\n") and len(data) < limit_bytes):
        return LogChunk("", cursor)
    done = int(cursor[1:]) if cursor.startswith("L") and cursor[1:].isdigit() else 0
    reset = done > len(lines)
    done = 0 if reset else done
    return LogChunk("".join(lines[done:]), f"L{len(lines)}", reset)


def after_timestamp(data: str, since_ts: str, seen_at: int, limit_bytes: int, cursor: str) -> LogChunk:
    """The lines of ``data`` (``pods/log?timestamps=true``: every line, ``\\n``-ended, starts with
    ``<RFC3339Nano> ``, as the kubelet writes them) after the ``seen_at``-th line stamped ``since_ts`` (all of
    them when ``since_ts`` is ""), timestamps removed, and the cursor ``T<last timestamp>|<lines with it>``.

    A cut last line (``limitBytes``, or still being written) waits for the next read, unless it is the only one
    and the read was full (one over-long line, taken as it is)."""
    parts = data.split("\n")
    rest = parts.pop()  # "" when the data ends with a line break
    if not parts:
        if not rest or len(data) < limit_bytes:
            return LogChunk("", cursor)
        parts, ended, complete = [rest], "", rest + "\n"
    else:
        ended, complete = "\n", data[: len(data) - len(rest)]
    if _ALL_STAMPED.fullmatch(complete) is None:
        return after_timestamp_per_line(parts, since_ts, seen_at, ended)
    heads = [p.partition(" ")[0] for p in parts]
    start, skip = 0, seen_at
    if since_ts:
        key = ts_key(since_ts)
        while start < len(heads) and (ts_key(heads[start]) < key or (heads[start] == since_ts and skip > 0)):
            skip -= heads[start] == since_ts
            start += 1
    if start == len(heads):
        return LogChunk("", f"T{since_ts}|{seen_at}")
    last = heads[-1]
    count = 0
    for head in reversed(heads[start:]):
        if head != last:
            break
        count += 1
    else:
        count += seen_at if last == since_ts else 0
    text = "\n".join([p.partition(" ")[2] for p in parts[start:]]) + ended
    return LogChunk(text, f"T{last}|{count}")


def after_timestamp_per_line(parts: list[str], since_ts: str, seen_at: int, ended: str) -> LogChunk:
    """:func:`after_timestamp` line by line, for a response where some line carries no timestamp (it keeps the
    timestamp of the line before)."""
    out: list[str] = []
    last_ts, last_count = since_ts, seen_at
    skip_at = seen_at
    for line in parts:
        m = LOG_TS.match(line)
        ts = m.group(1) if m else last_ts
        body = line[m.end() :] if m else line
        if since_ts and ts_key(ts) < ts_key(since_ts):
            continue
        if since_ts and ts == since_ts and skip_at > 0:
            skip_at -= 1
            continue
        out.append(body)
        if ts == last_ts:
            last_count += 1
        else:
            last_ts, last_count = ts, 1
    return LogChunk("\n".join(out) + ended if out else "", f"T{last_ts}|{last_count}")


def ts_key(ts: str) -> tuple[str, str]:
    """Sortable key of an RFC3339(Nano) timestamp as the kubelet writes them: (UTC seconds, fraction). The
    kubelet stamps lines in its process's time zone (``2026-12-03T21:30:20.5+08:00`` where TZ is not UTC), so an
    offset is folded into the seconds."""
    body, offset = ts, ""
    if not ts.endswith("Z") and len(ts) > 6 and ts[-6] in "+-" and ts[-3] == ":":
        body, offset = ts[:-6], ts[-6:]
    main, _, frac = body.rstrip("Z").partition(".")
    if offset and offset != "+00:00":
        main = utc_seconds(f"{main}{offset}").rstrip("Z")
    return main, frac.ljust(9, "0")


def utc_seconds(ts: str) -> str:
    """``ts`` (RFC3339(Nano), ``Z`` or an offset) as whole UTC seconds ``YYYY-MM-DDTHH:MM:SSZ``: what
    ``sinceTime`` takes. The fraction is dropped (the API passes whole seconds on anyway)."""
    main = ts.split(".")[0]
    offset = ""
    if not ts.endswith("Z") and len(ts) > 6 and ts[-6] in "+-" and ts[-3] == ":":
        offset = ts[-6:]
    main = main.rstrip("Z")[:19]
    if not offset or offset == "+00:00":
        return main + "Z"
    moment = datetime.fromisoformat(main + offset).astimezone(UTC)
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")
