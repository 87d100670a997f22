"""The local runtime stamps each log line with the time it was written, as the kubelet does on Kubernetes: a
real supervisor notes when ``main.log`` grows, ``stream_log(timestamps=True)`` prefixes every line, two lines
written 2 s apart carry times 2 s apart, and a second read gives the same bytes (a reader's cursor holds)."""

from __future__ import annotations

import re
import time
from datetime import UTC, datetime

import pytest

from clusters.runtime.local import log_times
from tests.clusters.test_local_runtime_support import SupervisorProcess, manifest, nodes_spec, wait_for

NODES = nodes_spec(("n-head", {"pool": "head"}, {"cpu": 4}))
STAMP = re.compile(rb"^(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z) (.*)$")


@pytest.fixture
def sup(tmp_path):
    s = SupervisorProcess(tmp_path / "root").start()
    yield s
    s.stop()


def _stamped(rt, pod: str, previous: bool = False) -> bytes:
    return b"".join(rt.stream_log("rlark-system", pod, previous=previous, timestamps=True))


def test_lines_carry_the_time_they_were_written(sup):
    rt = sup.runtime(NODES)
    script = "echo first; sleep 2; echo second; trap 'exit 0' TERM; sleep 600 & wait"
    rt.apply_task(manifest("stamps", "header", head=True, command=["bash", "-c", script]))
    try:
        started = time.time()
        wait_for(lambda: b"second" in b"".join(rt.stream_log("rlark-system", "stamps-header-0")), 30, what="two lines")
        time.sleep(1.0)  # a few supervisor ticks after the second line
        data = _stamped(rt, "stamps-header-0")
        lines = data.splitlines()
        assert lines and all(STAMP.match(line) for line in lines), data
        times = {
            STAMP.match(line).group(2): datetime.strptime(STAMP.match(line).group(1).decode(), "%Y-%m-%dT%H:%M:%S.%fZ")
            for line in lines
        }
        first = times[b"first"].replace(tzinfo=UTC).timestamp()
        second = times[b"second"].replace(tzinfo=UTC).timestamp()
        assert started - 1 <= first <= second <= time.time()
        assert 1.5 <= second - first <= 3.5, (first, second)  # 2 s apart, within a tick or two
        assert _stamped(rt, "stamps-header-0") == data  # the same bytes on every read
        assert b"".join(rt.stream_log("rlark-system", "stamps-header-0")) == b"first\nsecond\n"  # the log as written
    finally:
        rt.delete_task("rlark-system", "stamps-header")


def test_index_rules(tmp_path):
    """The earliest note at or past a line's end is its time; a partial last line is sent unstamped."""
    log = tmp_path / "main.log"
    log.write_bytes(b"a\nbb\ncc")
    log_times.append(tmp_path / "main.times", 2, 100.0)
    log_times.append(tmp_path / "main.times", 5, 200.0)
    log_times.append(tmp_path / "main.times", 7, 150.0)  # a late reader's note: earlier time, larger offset
    data = b"".join(log_times.stamped_chunks(log, 3, previous=False))
    assert data == (log_times.rfc3339(100.0) + b" a\n" + log_times.rfc3339(150.0) + b" bb\ncc")
    assert log_times.read_index(tmp_path / "missing") == ([], [])
