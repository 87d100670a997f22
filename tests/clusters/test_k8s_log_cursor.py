"""The Kubernetes runtime's incremental log read (``read_log_from``) cuts and strips the kubelet's timestamps in
bulk (a cold Diagnosis reads 200 logs); it must give exactly what the line-by-line reading gives, for any cursor."""

from __future__ import annotations

import random

from clusters.runtime.kubernetes.runtime import (
    _after_timestamp,
    _after_timestamp_per_line,
    _by_line_count,
    _ts_key,
    _utc_seconds,
)

LIMIT = 4 << 20


def stamped(lines: list[tuple[str, str]]) -> str:
    return "".join(f"{ts} {body}\n" for ts, body in lines)


def per_line(data: str, since_ts: str, seen_at: int):
    parts = data.split("\n")
    parts.pop()
    return _after_timestamp_per_line(parts, since_ts, seen_at, "\n")


def test_bulk_reading_equals_the_line_by_line_reading_for_any_cursor():
    rng = random.Random(18)
    for _ in range(300):
        stamps = sorted(f"2026-12-02T05:00:{rng.randint(0, 5):02d}.{rng.randint(0, 3):09d}Z" for _ in range(12))
        lines = [(ts, rng.choice(["step 1", "ERROR x", "", "a\rb", "tab\tend", "终了"])) for ts in stamps]
        data = stamped(lines)
        since = rng.choice(["", *stamps, "2026-12-02T04:59:59Z", "2026-12-02T05:00:09Z"])
        seen = rng.randint(0, 3) if since else 0
        fast = _after_timestamp(data, since, seen, LIMIT, "T-old|0")
        slow = per_line(data, since, seen)
        assert (fast.text, fast.cursor) == (slow.text, slow.cursor), (since, seen, lines)


def test_a_cut_last_line_waits_and_an_over_long_single_line_is_taken():
    data = "2026-12-02T05:00:00.1Z first\n2026-12-02T05:00:00.2Z second\n2026-12-02T05:00:00.3Z thi"
    chunk = _after_timestamp(data, "", 0, LIMIT, "")
    assert chunk.text == "first\nsecond\n"
    assert chunk.cursor == "T2026-12-02T05:00:00.2Z|1"
    again = _after_timestamp(data + "rd\n", "2026-12-02T05:00:00.2Z", 1, LIMIT, chunk.cursor)
    assert again.text == "third\n"  # the seen lines are not read twice, the cut one comes whole
    assert _after_timestamp("2026-12-02T05:00:00.1Z unfinished", "", 0, LIMIT, "c").text == ""
    long = "2026-12-02T05:00:00.1Z " + "x" * 100
    assert _after_timestamp(long, "", 0, 50, "").text == "x" * 100


def test_lines_with_the_same_timestamp_are_counted_across_reads():
    ts = "2026-12-02T05:00:01Z"
    data = stamped([("2026-12-02T05:00:00Z", "a"), (ts, "b"), (ts, "c")])
    first = _after_timestamp(data, "", 0, LIMIT, "")
    assert first.cursor == f"T{ts}|2"
    grown = data + stamped([(ts, "d")])
    second = _after_timestamp(grown, ts, 2, LIMIT, first.cursor)  # the server sends from the whole second on
    assert (second.text, second.cursor) == ("d\n", f"T{ts}|3")
    nothing = _after_timestamp(grown, ts, 3, LIMIT, second.cursor)
    assert (nothing.text, nothing.cursor) == ("", f"T{ts}|3")


def test_a_line_without_a_timestamp_keeps_the_one_before():
    data = "2026-12-02T05:00:00Z a\nno stamp here\n2026-12-02T05:00:01Z c\n"
    chunk = _after_timestamp(data, "", 0, LIMIT, "")
    assert chunk.text == "a\nno stamp here\nc\n"
    assert chunk.cursor == "T2026-12-02T05:00:01Z|1"


def test_a_server_without_timestamps_is_read_by_line_count():
    chunk = _by_line_count("one\ntwo\nthr", "", LIMIT)
    assert (chunk.text, chunk.cursor) == ("one\ntwo\n", "L2")
    later = _by_line_count("one\ntwo\nthree\n", chunk.cursor, LIMIT)
    assert (later.text, later.cursor, later.reset) == ("three\n", "L3", False)
    assert _by_line_count("new\n", later.cursor, LIMIT).reset  # a shorter log: a new container


def test_kubelet_timestamps_with_a_utc_offset_ask_since_the_same_moment_in_utc():
    # A kubelet and containerd outside UTC stamp lines in local time (seen on real nodes with TZ=Asia/Shanghai):
    # sinceTime must name the same moment, not the local wall clock read as UTC (8 hours in the future).
    assert _utc_seconds("2026-12-03T21:30:20.512594937+08:00") == "2026-12-03T13:30:20Z"
    assert _utc_seconds("2026-12-03T13:30:20.5Z") == "2026-12-03T13:30:20Z"
    assert _utc_seconds("2026-12-03T01:00:00-02:30") == "2026-12-03T03:30:00Z"
    assert _ts_key("2026-12-03T21:30:20.5+08:00") == _ts_key("2026-12-03T13:30:20.5Z")
    data = "".join(f"2026-12-03T21:30:2{i}.000000001+08:00 line {i}\n" for i in range(3))
    first = _after_timestamp(data, "", 0, LIMIT, "")
    assert first.cursor == "T2026-12-03T21:30:22.000000001+08:00|1"
    more = data + "2026-12-03T21:30:23.5+08:00 Run script exited with code 0\n"
    assert _after_timestamp(more, "2026-12-03T21:30:22.000000001+08:00", 1, LIMIT, first.cursor).text == (
        "Run script exited with code 0\n"
    )
