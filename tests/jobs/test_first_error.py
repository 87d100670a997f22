"""The first error of a Worker's log (seed 05: "定位第一条错误，而不是只看最后一行"): a traceback, an ``Error:`` marker,
a non-zero exit marker or a line a program wrote as an error; a line a logger wrote at INFO or WARNING never is
one, whatever words it holds. The status sync's message (``log_signals``) and the Diagnosis (``scan_log``) agree."""

from __future__ import annotations

import pytest

from jobs.explain.failure import tail_before_exit
from jobs.observe.log_levels import below_error_level
from jobs.observe.log_markers import log_signals, scan_log

PREPARE = ["RLINF_NODE_RANK: 0", "Executing prepare script..."]

ROUTINE = [
    "INFO:root:connection failed, retrying",
    "2026-12-06 10:00:00,123\tINFO worker.py:1832 -- Connecting to existing Ray cluster failed once, retrying",
    "2026-12-06 10:00:00,124 WARNING utils.py:12 -- could not read /proc/meminfo",
    "(raylet) [2026-12-06 10:00:00,125 I 4242 4243] node_manager.cc:100: Failed to report, will retry",
    "[2026-12-06 10:00:00,126 W 4242 4243] gcs_client.cc:50: timed out, retrying",
    "W1206 10:00:00.127000 4242 socket.cc:9] could not resolve peer, retrying",
    "/usr/lib/python3/dist-packages/x.py:3: UserWarning: could not import optional module",
    "[2026-12-06 10:00:00] [INFO] model load failed over to the CPU kernel",
]


@pytest.mark.parametrize("line", ROUTINE)
def test_a_line_at_info_or_warning_is_never_the_first_error(line):
    assert below_error_level(line)
    log = "\n".join([*PREPARE, line, "Traceback (most recent call last):", '  File "t.py", line 1', "KeyError: 'x'"])
    assert scan_log(log).first_error_after(2) == (4, "Traceback (most recent call last):")
    assert log_signals(log)["firstError"] == "KeyError: 'x'"  # the sync names the traceback's exception


@pytest.mark.parametrize(
    "line",
    [
        "2026-12-06 10:00:00,123\tERROR worker.py:1 -- Failed to connect to GCS",
        "[2026-12-06 10:00:00,125 E 4242 4243] core_worker.cc:10: Failed to register worker",
        "E1206 10:00:00.127000 4242 socket.cc:9] connection refused: failed",
        "ValueError: the robot IP is not valid",
        "cat: /data/config.yaml: No such file or directory",
        "CRITICAL:root:could not open the dataset",
    ],
)
def test_a_line_written_as_an_error_is_the_first_error(line):
    assert not below_error_level(line)
    log = "\n".join([*PREPARE, "INFO:root:loading failed over", line, "Run script exited with code 1"])
    assert scan_log(log).first_error_after(2) == (4, line)
    assert log_signals(log)["firstError"] == line


def test_a_failed_exit_marker_counts_when_nothing_else_did():
    log = "\n".join([*PREPARE, "INFO:root:start failed over", "Ray worker process exited with code 3"])
    assert scan_log(log).first_error_after(2) == (4, "Ray worker process exited with code 3")


def test_the_lines_before_the_exit_stop_at_the_exit_not_at_the_end_of_the_log():
    lines = [f"step {i}" for i in range(30)] + ["Run script exited with code 2", "Stopping Ray cluster..."]
    tail = tail_before_exit(lines)
    assert len(tail) == 20 and tail[-1] == "Run script exited with code 2" and tail[0] == "step 11"
    assert tail_before_exit(["a", "b"]) == ["a", "b"]  # no exit line: the log's last lines
    assert tail_before_exit(["Run script exited with code 0", "x"]) == ["Run script exited with code 0", "x"]
