"""The log scanner's one-search prefilters change no result (they replace ~20 searches a line).

Every line below goes through the prefiltered function and through the full patterns it stands for; they must
agree (``looks_like_error``, ``match_marker``) or the prefilter must let every possible match through
(``may_have_signature``). Non-ASCII lines (where case folding is not plain lowercasing) are in the corpus.
"""

from __future__ import annotations

import pytest

from jobs.observe import log_markers as lm
from jobs.observe import user_patterns

LINES = [
    "RLINF_NODE_RANK: 3",
    "Executing prepare script...",
    "Error: Ray CLI is not found. Please ensure Ray is installed.",
    "Waiting for 4 nodes to join the Ray cluster...",
    "Warning: Ray cluster check failed, proceeding anyway.",
    "Ray cluster is ready. Printing cluster information:",
    "Executing run script...",
    "Run script exited with code 0",
    "Run script exited with code 3",
    "Ray worker process exited with code 1",
    "Connecting to Ray head at demo-header-0.demo:6379...",
    "Head is reachable at 10.0.0.1:6379",
    "Stopping Ray worker...",
    "Waiting for head to be reachable at h:6379... (attempt 2)",
    "Could not retrieve node count, retrying",
    "NCCL WARN socket timeout",
    "ncclSystemError: System call failed",
    "Watchdog caught collective operation timeout: WorkNCCL",
    "OSError: [Errno 28] No space left on device",
    "/dev/shm is too small",
    "unable to allocate shared-memory segment",
    "franka gripper: connection refused",
    "Exiting main process due to a failure upon worker execution.",
    "Traceback (most recent call last):",
    "KILLED by signal 9",
    "Segmentation Fault (core dumped)",
    "\u017fegmentation fault",  # long s: case-folds to "s" under IGNORECASE
    "\u212aILLED",  # Kelvin sign: case-folds to "k"
    "RuntimeError: CUDA error: out of memory",
    "bash: foo: command not found",
    "step 17: generated 512 sequences in 0.17 s, kv-cache 71%",
    "Global Step: 3/100 reward=9.0",
    "训练进度 10%",
    "",
]


@pytest.mark.parametrize("line", LINES)
def test_prefilters_agree_with_the_full_patterns(line):
    full_error = any(r.search(line) for r in (lm.ERROR_LINE_RE, lm.SHM_RE, lm.NCCL_RE))
    assert lm.looks_like_error(line) == full_error
    raw_marker = next(
        (
            (key, {k: v for k, v in m.groupdict().items() if v is not None})
            for key, r, _ in lm.MARKERS
            if (m := r.search(line))
        ),
        None,
    )
    assert lm.match_marker(line) == (raw_marker if line else None)
    if any(r.search(line) for r in (lm.SHM_RE, lm.NCCL_RE, lm.ROBOT_RE, lm.RLINF_FAILURE)):
        assert lm.may_have_signature(line)
    assert not lm.may_have_signature("step 17: generated 512 sequences in 0.17 s")


def test_candidate_lines_hold_every_line_the_full_patterns_match():
    scan, errors_found, signatures_found = lm.candidates(LINES)
    counted = {i for i, t in enumerate(LINES) if any(x in t for x in lm.SCAN_LITERALS)}
    errors = {i for i, t in enumerate(LINES) if lm.looks_like_error(t) or lm.match_marker(t)}
    signatures = {i for i, t in enumerate(LINES) if any(r.search(t) for _, r in lm.SIGNATURES)}
    assert counted == scan and errors <= errors_found and signatures <= signatures_found
    plain = LINES.index("step 17: generated 512 sequences in 0.17 s, kv-cache 71%")
    assert plain not in scan | errors_found | signatures_found


@pytest.mark.parametrize(
    "pattern", ["Global Step", "command not found", "训练", "a-b #1", "exited with code 3", "nowhere"]
)
def test_a_literal_pattern_found_by_one_search_hits_the_line_a_regex_hits(pattern):
    state = lm.ScanState([pattern]).feed("\n".join(LINES) + "\n")
    regex = user_patterns.user_regex(pattern)
    first = next((i for i, line in enumerate(LINES) if regex.search(line)), None)
    assert user_patterns.is_literal(pattern)
    assert state.patterns[pattern] == (None if first is None else [first + 1, LINES[first]])


@pytest.mark.parametrize(
    "pattern",
    [r"exited with code \d+", r"Ray cluster is ready\.", "Run script exited with codes? 3", r"NCCL WARN|Traceback",
     r"(?i)killed by", r"Waiting for \d+ nodes", "foo(", r"absent \d+", r"Global Step: \d+/100"],
)  # fmt: skip
def test_a_regex_with_a_literal_start_hits_the_line_a_full_search_hits(pattern):
    state = lm.ScanState([pattern]).feed("\n".join(LINES) + "\n")
    regex = user_patterns.user_regex(pattern)
    first = next((i for i, line in enumerate(LINES) if regex.search(line)), None)
    assert state.patterns[pattern] == (None if first is None else [first + 1, LINES[first]])
    prefix = user_patterns.literal_prefix(pattern)
    assert all(prefix in line for line in LINES if regex.search(line))  # the prefix is in every matching line
