"""The stored, incremental log scan gives what the scan of the whole text gives.

``ScanState`` is what ``jobs.models.PodLogScan`` stores: the Diagnosis tab and the Run check read it instead of the
logs, and ``jobs.observe.log_scans`` feeds it only what a log appended. For every log the diagnosis and run check
tests use (the ones ``tests/jobs/test_diagnosis.py`` passes to the scanner, collected by running those tests, and
``tests/jobs/test_runcheck.py``'s), in LF and CRLF, cut at every point (a line, and a CRLF, split across chunks) and
at random points, and stored as JSON between chunks: the markers, first errors, last stage, counters, signature
and pattern hits equal ``scan_log`` of the whole text, and so do the diagnosis and the five checks built on them.
The state stays small whatever the log's length.
"""

from __future__ import annotations

import inspect
import json
import random

import pytest
from django.utils import timezone

from jobs.explain import diagnosis
from jobs.explain.diagnosis import WorkerInput, diagnose
from jobs.explain.runcheck import gather, log_patterns, run_checks, settings_of
from jobs.observe import log_markers as lm
from tests.jobs import test_diagnosis, test_log_prefilters, test_runcheck
from tests.jobs.test_runcheck import demo  # noqa: F401 - the fixture

PATTERNS = {
    **log_patterns(settings_of({})),
    "user": r"^│ Global Step:\s+(\d+)",
    "invalid": "([",  # matched as plain text
}


def diagnosis_logs() -> list[str]:
    """Every log the pure tests of test_diagnosis.py give the scanner (by running them with a spy)."""
    seen: list[str] = []
    real = diagnosis.scan_log

    def spy(log, patterns=None):
        seen.append(log if isinstance(log, str) else "\n".join(log))
        return real(log, patterns)

    diagnosis.scan_log = spy
    test_diagnosis.scan_log = spy
    try:
        for name, fn in vars(test_diagnosis).items():
            if name.startswith("test_") and callable(fn) and not inspect.signature(fn).parameters:
                fn()
    finally:
        diagnosis.scan_log = real
        test_diagnosis.scan_log = real
    return seen


def runcheck_logs() -> list[str]:
    head = test_runcheck.HEAD_LOG
    return [
        head,
        test_runcheck.worker_log(1),
        test_runcheck.worker_log(2),
        head.replace(
            "Current node count: 3\nCluster is ready: 3 nodes available (required: 3).\nRay cluster check passed.\n",
            "Current node count: 2\nError: Cluster did not become ready within 15 minutes (required 3 nodes).\n"
            "Ray cluster check failed.\nWarning: Ray cluster check failed, proceeding anyway.\n",
        ),
        head.replace("│ Global Step:    1/100 │ Progress: …│   1.0%\n", ""),
        "RLINF_NODE_RANK: 2\nConnecting to Ray head at demo-header-ray-head:6379...\n"
        + "Waiting for head to be reachable at demo-header-ray-head:6379... (attempt 1)\n" * 120,
    ]


def corpus() -> list[str]:
    logs = diagnosis_logs() + runcheck_logs() + ["\n".join(test_log_prefilters.LINES), "", "no newline at the end"]
    assert len(logs) > 20
    unique = list(dict.fromkeys(logs))
    return unique + [log.replace("\n", "\r\n") for log in unique if "\n" in log]


LOGS = corpus()


def summary(scan: lm.LogScan) -> dict:
    """Everything a consumer reads of a scan."""
    return {
        "lines": scan.line_count,
        "markers": [(m.key, m.line_no, m.text, m.kind, m.values, m.failed) for m in scan.markers],
        "segment": scan.segment_start,
        "waits": (scan.head_wait_attempts, scan.domain_wait_attempts, scan.head_wait_address),
        "check": (scan.check_required, scan.check_alive_max, scan.check_passed, scan.check_timeout),
        "rlinf": (scan.rlinf_waiting, scan.rlinf_waiting_line, scan.rlinf_nodes, scan.rlinf_cluster_line),
        "patterns": list(scan.pattern_hits.items()),
        "signatures": scan.signature_hits,
        "first_errors": [scan.first_error_after(n) for n in [0, *(m.line_no for m in scan.markers)]],
        "last_stage": (scan.last_stage.key, scan.last_stage.line_no) if scan.last_stage else None,
        "rank": scan.rank,
    }


def fed(chunks: list[str]) -> lm.LogScan:
    """The scan of ``chunks`` fed one by one, the state stored as JSON and loaded again after each."""
    state = lm.ScanState(PATTERNS.values())
    for chunk in chunks:
        state.feed(chunk)
        state = lm.ScanState.from_json(json.loads(json.dumps(state.to_json())))
    return state.scan(PATTERNS)


def cuts(log: str, points: list[int]) -> list[str]:
    bounds = [0, *sorted(points), len(log)]
    return [log[a:b] for a, b in zip(bounds, bounds[1:], strict=False)]


@pytest.mark.parametrize("index", range(len(LOGS)))
def test_fed_in_chunks_equals_the_scan_of_the_whole_text(index):
    log = LOGS[index]
    whole = summary(lm.scan_log(log, PATTERNS))
    assert summary(fed([log])) == whole
    step = max(1, len(log) // 300)  # every cut of the short logs, ~300 spread over the long ones
    for point in range(0, len(log) + 1, step):
        assert summary(fed(cuts(log, [point]))) == whole, point
    rng = random.Random(index)
    for _ in range(20):
        points = [rng.randint(0, len(log)) for _ in range(rng.randint(2, 12))]
        assert summary(fed(cuts(log, points))) == whole, points


def test_a_line_split_across_chunks_and_a_split_crlf():
    log = "RLINF_NODE_RANK: 1\r\nExecuting prepare script...\r\nbash: /opt/x: No such file or directory\r\n"
    at = log.index("\r\nbash") + 1  # between "\r" and "\n"
    mid = log.index("No such") + 3  # inside the error line
    scan = fed([log[:at], log[at:mid], log[mid:]])
    assert scan.line_count == 3 and [m.key for m in scan.markers] == ["rank", "prepare"]
    assert scan.first_error_after(2) == (3, "bash: /opt/x: No such file or directory")
    state = lm.ScanState().feed(log[:mid])
    assert state.lines == 2 and state.partial == "bash: /opt/x: No "  # the unfinished line waits for the rest
    assert state.scan().first_error_after(2) is None  # "bash: /opt/x: No " is no error yet ...
    assert state.feed(log[mid:]).scan().first_error_after(2)[0] == 3  # ... the whole line is


@pytest.mark.parametrize("index", range(len(LOGS)))
def test_diagnosis_from_the_stored_scan_equals_the_diagnosis_of_the_text(index):
    log = LOGS[index]
    rng = random.Random(index)
    chunks = cuts(log, [rng.randint(0, len(log)) for _ in range(5)])
    for phase in ("Running", "Failed"):
        from_text = diagnose([WorkerInput("j-w-0", "Worker", phase=phase, log=log)])
        from_state = diagnose([WorkerInput("j-w-0", "Worker", phase=phase, scan=fed(chunks))])
        assert from_state.to_dict("en") == from_text.to_dict("en")


@pytest.mark.django_db
def test_run_check_from_stored_scans_equals_the_run_check_of_the_texts(demo):  # noqa: F811
    job, logs = demo
    now = timezone.now()
    for variant in (logs, {**logs, "demo-header-0": runcheck_logs()[3], "demo-rollout-1": runcheck_logs()[5]}):
        from_text = gather(job, logs=variant, now=now)
        from_state = gather(job, logs=variant, now=now)
        from_state.scans = {name: fed(cuts(text, [len(text) // 3, len(text) // 2])) for name, text in variant.items()}
        assert [r.to_dict("en") for r in run_checks(from_state, "en")] == [
            r.to_dict("en") for r in run_checks(from_text, "en")
        ]


def test_the_state_stays_small_and_keeps_first_and_last_markers():
    state = lm.ScanState(PATTERNS.values())
    state.feed("RLINF_NODE_RANK: 0\nExecuting prepare script...\n")
    state.feed("Stopping Ray worker...\n" * 2000)  # a marker repeated far past MAX_MARKERS
    state.feed("Head is reachable at 10.0.0.1:6379\n")
    state.feed(f"step {'x' * 5000}: error in a very long line\n")
    for i in range(200):
        state.feed("".join(f"(RolloutWorker) step {i * 500 + k}: 512 sequences in 0.2 s\n" for k in range(500)))
    scan = state.scan(PATTERNS)
    assert scan.line_count == 2 + 2000 + 1 + 1 + 100_000
    assert len(scan.markers) == lm.MAX_MARKERS
    assert scan.first("stopping").line_no == 3 and scan.last("stopping").line_no == 2002
    assert scan.last_stage.key == "head_reachable" and scan.rank == 0
    assert scan.first_error_after(2003) == (2004, f"step {'x' * 5000}: error in a very long line"[: lm.KEEP_LINE])
    assert len(json.dumps(state.to_json())) < 16_000


def test_a_new_run_in_the_same_log_starts_the_scan_over():
    state = lm.ScanState().feed("RLINF_NODE_RANK: 1\nExecuting prepare script...\nNCCL error: timeout\n")
    assert state.scan().signature_hits["nccl"][0] == 3
    state.feed("RLINF_NODE_RANK: 1\nExecuting prepare script...\n")
    scan = state.scan()
    assert scan.segment_start == 4 and scan.signature_hits == {} and scan.first_error_after(0) is None


def test_a_state_of_another_version_is_not_used():
    data = lm.ScanState().feed("RLINF_NODE_RANK: 0\n").to_json()
    assert lm.ScanState.from_json(data) is not None
    assert lm.ScanState.from_json({**data, "v": lm.STATE_VERSION + 1}) is None
    assert lm.ScanState.from_json({}) is None and lm.ScanState.from_json("junk") is None


def test_tracks_only_patterns_followed_from_the_start():
    state = lm.ScanState(["Global Step"]).feed("Global Step: 1\n")
    assert state.tracks(["Global Step"]) and not state.tracks(["Global Step", "RLinf is running"])
    assert state.scan({"progress": "Global Step", "other": "nothing"}).pattern_hits == {
        "progress": (1, "Global Step: 1")
    }
