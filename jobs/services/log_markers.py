"""The wrapper scripts' log markers, and the one scanner of them that sync, diagnosis, pending reasons and the
run check share (issue 17: split out of ``diagnosis.py`` and ``sync.py``).

Pure functions over log text; nothing here reads a database or a runtime.

- :func:`log_signals` / :func:`merge_signals`: the few facts the status sync needs from a Worker's log
  (exit codes, Ray ready, last stage, first error), also folded from a log read in pieces
  (``jobs.services.sync_fetch`` reads only what was appended).
- :func:`scan_log` -> :class:`LogScan`: every marker of the last run in the log, with line numbers and values,
  for the diagnosis timeline, the pending reasons' last stage and the run check.

Sources: upstream-rlark 5.1/5.3 (the wrapper markers, byte-identical, in the order the scripts print them),
5.2 (``ray_check.py`` lines), rlinf.md 3 and 7 (RLinf's own lines), seed 05-troubleshooting-jobs-workers
(the error signatures).
"""

from __future__ import annotations

import re
from bisect import bisect_left, bisect_right
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

# --- the status sync's markers ------------------------------------------------------------------------------

RUN_EXIT = re.compile(r"Run script exited with code (-?\d+)")
RAY_EXIT = re.compile(r"Ray worker process exited with code (-?\d+)")
RAY_READY = "Ray cluster is ready"
CHECK_FAILED = "Warning: Ray cluster check failed, proceeding anyway."
# Wrapper stage markers in order (upstream-rlark 5.1/5.3; seed 05-troubleshooting).
STAGES = (
    ("RLINF_NODE_RANK: ", "rank"),
    ("Executing prepare script...", "prepare"),
    ("Error: Ray CLI is not found.", "ray_missing"),
    ("Waiting for ", "waiting_nodes"),
    ("Connecting to Ray head at ", "connecting"),
    ("Head is reachable at ", "head_reachable"),
    ("Warning: Ray cluster check failed", "check_failed"),
    ("Ray cluster is ready", "ray_ready"),
    ("Executing run script...", "run"),
    ("Run script exited with code ", "run_exited"),
    ("Ray worker process exited with code ", "worker_exited"),
)
EXIT_STAGES = {"run_exited", "worker_exited"}
ERROR_LINE = re.compile(
    r"(?i)(\berror\b|exception|traceback|\bfailed\b|fatal|no such file|not found|permission denied|killed)"
)


def log_signals(text: str) -> dict[str, Any]:
    """Facts the wrapper markers tell about one Worker's log.

    Returns ``{"runExit": int|None, "rayExit": int|None, "rayReady": bool,
    "clusterCheckFailed": bool, "lastStage": marker line|None, "firstError": line|None}``
    (the last occurrence of each exit marker counts; ``firstError`` is the first error-looking
    line after the last stage marker, or that marker itself when it is an error).
    """
    return _scan(text)[0]


def _scan(text: str) -> tuple[dict[str, Any], bool]:
    """:func:`log_signals` and whether ``text`` holds a (non-exit) stage marker."""
    run_exit = ray_exit = None
    ready = check_failed = False
    last_stage = None
    last_stage_index = -1
    lines = text.splitlines()
    for index, line in enumerate(lines):
        stripped = line.strip()
        if (m := RUN_EXIT.search(stripped)) is not None:
            run_exit = int(m.group(1))
        if (m := RAY_EXIT.search(stripped)) is not None:
            ray_exit = int(m.group(1))
        if RAY_READY in stripped:
            ready = True
        if CHECK_FAILED in stripped:
            check_failed = True
        stage = next((key for marker, key in STAGES if stripped.startswith(marker)), None)
        if stage is not None:
            last_stage = stripped
            if stage not in EXIT_STAGES:
                last_stage_index = index
    first_error = None
    since = lines[last_stage_index].strip() if last_stage_index >= 0 else ""
    if since.startswith("Error:"):
        first_error = since
    else:
        tail = lines[last_stage_index + 1 :]
        for pos, line in enumerate(tail):
            stripped = line.strip()
            if (
                stripped
                and ERROR_LINE.search(stripped)
                and not stripped.startswith(CHECK_FAILED)
                and not any(stripped.startswith(marker) for marker, _ in STAGES)
            ):
                if stripped.startswith("Traceback"):  # a Python traceback: name its exception line
                    stripped = next((t.strip() for t in tail[pos + 1 :] if t.strip() and not t[:1].isspace()), stripped)
                first_error = stripped[:500]
                break
    signals = {
        "runExit": run_exit,
        "rayExit": ray_exit,
        "rayReady": ready,
        "clusterCheckFailed": check_failed,
        "lastStage": last_stage,
        "firstError": first_error,
    }
    return signals, last_stage_index >= 0


def merge_signals(old: dict[str, Any], text: str) -> dict[str, Any]:
    """The signals of a log read in pieces: ``old`` (of everything before) folded with the new ``text``.

    The result equals :func:`log_signals` of the whole log: the last exit markers win, ``rayReady`` and
    ``clusterCheckFailed`` stay once seen, and ``firstError`` restarts after a new stage marker."""
    new, had_stage = _scan(text)
    merged = {**old}
    for key in ("runExit", "rayExit", "lastStage"):
        if new[key] is not None:
            merged[key] = new[key]
        merged.setdefault(key, None)
    merged["rayReady"] = bool(old.get("rayReady")) or new["rayReady"]
    merged["clusterCheckFailed"] = bool(old.get("clusterCheckFailed")) or new["clusterCheckFailed"]
    if had_stage or not old.get("firstError"):
        merged["firstError"] = new["firstError"]
    return merged


# --- wrapper markers (upstream-rlark 5.1, 5.3; exact strings) -----------------------------------------------

PROGRESS = "progress"
ERROR = "error"
WARNING = "warning"
INFO = "info"

# key, regex (searched in each line; anchored at the end), kind. Order = order in which the scripts print them.
MARKERS: list[tuple[str, re.Pattern[str], str]] = [
    ("rank", re.compile(r"RLINF_NODE_RANK: (?P<rank>-?\d+)\s*$"), PROGRESS),
    (
        "ssh",
        re.compile(
            r"(rlark-sshd started on port 22|SSH public key injected into authorized_keys"
            r"(?: \(fallback: no rlark-sshd binary\))?)\s*$"
        ),
        PROGRESS,
    ),
    ("prepare", re.compile(r"Executing prepare script\.\.\.\s*$"), PROGRESS),
    ("ray_cli_missing", re.compile(r"Error: Ray CLI is not found\. Please ensure Ray is installed\.\s*$"), ERROR),
    ("domain_ip", re.compile(r"Resolved domain IP: (?P<ip>\S+) \((?P<host>[^)]*)\)\s*$"), PROGRESS),
    ("head_wait", re.compile(r"Waiting for (?P<nodes>\d+) nodes to join the Ray cluster\.\.\.\s*$"), PROGRESS),
    ("cluster_check_failed", re.compile(r"Warning: Ray cluster check failed, proceeding anyway\.\s*$"), WARNING),
    ("cluster_ready", re.compile(r"Ray cluster is ready\. Printing cluster information:\s*$"), PROGRESS),
    ("run_script", re.compile(r"Executing run script\.\.\.\s*$"), PROGRESS),
    ("no_run_script", re.compile(r"No run script provided, keeping cluster alive\.\s*$"), PROGRESS),
    ("run_exit", re.compile(r"Run script exited with code (?P<code>-?\d+)\s*$"), PROGRESS),
    ("connect", re.compile(r"Connecting to Ray head at (?P<address>.+):(?P<port>\d+)\.\.\.\s*$"), PROGRESS),
    ("head_ip", re.compile(r"HEAD IP: (?P<ip>\S+)\s*$"), PROGRESS),
    ("head_reachable", re.compile(r"Head is reachable at (?P<ip>[^\s:]+):(?P<port>\d+)\s*$"), PROGRESS),
    ("worker_exit", re.compile(r"Ray worker process exited with code (?P<code>-?\d+)\s*$"), PROGRESS),
    ("stopping", re.compile(r"Stopping Ray (?P<what>cluster|worker)\.\.\.\s*$"), INFO),
]
MARKER_KIND = {key: kind for key, _, kind in MARKERS}

# Repeated waiting lines: counted, not put on the timeline one by one.
HEAD_WAIT_ATTEMPT = re.compile(r"Waiting for head to be reachable at (?P<address>\S+?)\.\.\. \(attempt (?P<k>\d+)\)")
DOMAIN_WAIT_ATTEMPT = re.compile(r"Waiting for domain IP from /etc/hosts\.\.\. \(attempt (?P<i>\d+)\)")

# ray_check.py (upstream-rlark 5.2)
CHECK_REQUIRED = re.compile(r"Waiting for cluster to have at least (?P<n>\d+) nodes\.")
CHECK_COUNT = re.compile(r"Current node count: (?P<a>\d+)")
CHECK_FOUND = re.compile(r"Found (?P<t>\d+) total nodes, (?P<a>\d+) of which are alive\.")
CHECK_READY = re.compile(r"Cluster is ready: (?P<a>\d+) nodes available \(required: (?P<n>\d+)\)\.")
CHECK_TIMEOUT = re.compile(r"Error: Cluster did not become ready within 15 minutes \(required (?P<n>\d+) nodes\)\.")

# RLinf (rlinf.md 3, 7)
RLINF_WAITING = re.compile(r"Waiting for (?P<n>\d+) nodes to be ready, currently (?P<k>\d+) nodes available")
RLINF_CLUSTER = re.compile(r"RLinf is running on a cluster with (?P<n>\d+) nodes")
RLINF_FAILURE = re.compile(r"Exiting main process due to a failure upon worker execution\.")

# Known error signatures (seed 05 "按错误类型排查").
SHM_RE = re.compile(r"No space left on device|/dev/shm|shared[ -]memory", re.IGNORECASE)
NCCL_RE = re.compile(
    r"(\bnccl\w*\b.*\b(error|errors|timeout|timed out|fail(ed|ure)?|abort(ed)?|hang|unhandled|refused|warn)\b)"
    r"|(nccl(System|Internal|Remote|UnhandledCuda|InvalidUsage|InvalidArgument)Error)"
    r"|(Watchdog caught collective operation timeout)",
    re.IGNORECASE,
)
ROBOT_RE = re.compile(
    r"\b(franka|robot|realsense|camera|gripper)\b.*\b(error|timeout|timed out|refused|unreachable|fail(ed)?)\b",
    re.IGNORECASE,
)
# A generic error line (the "first error" after the last completed stage).
ERROR_LINE_RE = re.compile(
    r"(\b(error|exception|traceback|fatal|panic|failed|failure|killed|segmentation fault|core dumped|"
    r"permission denied|no such file or directory|command not found|not found|cannot|could not|timed out)\b)"
    r"|No space left on device",
    re.IGNORECASE,
)
# Lines that look like errors but are the wrappers' own routine output.
BENIGN_RE = re.compile(
    r"Waiting for head to be reachable|Waiting for domain IP|\[Warning\] Failed to connect or query Ray cluster|"
    r"Could not retrieve node count, retrying|Time remaining: |Ray worker process exited with code 0|"
    r"Run script exited with code 0"
)

# Prefilters (issue 18: a 200-Worker Diagnosis ran 3 M regex searches). Each is one search that every line the
# full patterns could match also matches, so a line of plain training output costs one search, not twenty:
# - a literal every wrapper marker regex needs (``MARKERS``, in order);
MARKER_LITERALS = (
    "RLINF_NODE_RANK: ",
    "rlark-sshd started on port 22",
    "SSH public key injected into authorized_keys",
    "Executing prepare script...",
    "Error: Ray CLI is not found.",
    "Resolved domain IP: ",
    "Waiting for ",
    "Warning: Ray cluster check failed, proceeding anyway.",
    "Ray cluster is ready. Printing cluster information:",
    "Executing run script...",
    "No run script provided, keeping cluster alive.",
    "Run script exited with code ",
    "Connecting to Ray head at ",
    "HEAD IP: ",
    "Head is reachable at ",
    "Ray worker process exited with code ",
    "Stopping Ray ",
)
MARKER_PREFILTER = re.compile("|".join(re.escape(x) for x in MARKER_LITERALS))
# - and a literal of every other line the scan counts (head/domain waits, ray_check.py, RLinf);
SCAN_LITERALS = (
    *MARKER_LITERALS,
    "Current node count: ",
    "Found ",
    "Cluster is ready: ",
    "Error: Cluster did not become ready",
    "RLinf is running on a cluster with ",
)
# - one search with the result of ``ERROR_LINE_RE or SHM_RE or NCCL_RE`` (all three ignore case);
ERROR_ANY_RE = re.compile("|".join(f"(?:{r.pattern})" for r in (ERROR_LINE_RE, SHM_RE, NCCL_RE)), re.IGNORECASE)
# - the lowercase literals that every match of ``ERROR_ANY_RE``, resp. of the diagnosis's text signatures
#   (``SHM_RE``, ``NCCL_RE``, ``ROBOT_RE``, ``RLINF_FAILURE``), contains.
_SHM_NCCL = ("no space left on device", "/dev/shm", "shared", "nccl", "watchdog caught")
ERROR_WORDS = (
    *("error", "exception", "traceback", "fatal", "panic", "fail", "killed", "segmentation fault", "core dumped"),
    *("permission denied", "no such file or directory", "command not found", "not found", "cannot", "could not"),
    *("timed out", *_SHM_NCCL),
)
SIGNATURE_WORDS = (*_SHM_NCCL, "franka", "robot", "realsense", "camera", "gripper", "exiting main")
SIGNATURE_RE = re.compile(
    "|".join(f"(?:{r.pattern})" for r in (SHM_RE, NCCL_RE, ROBOT_RE, RLINF_FAILURE)), re.IGNORECASE
)


def lines_with(lines: list[str], literals: tuple[str, ...], fold: bool = False) -> list[int]:
    """Sorted 0-based indices of ``lines`` holding one of ``literals``, found by ``str.find`` over the joined text
    (C speed: a per-line search of ~20 alternatives cost ~10-100 us a line). ``fold``: the literals are lowercase
    and looked for in the lowered lines, and every non-ASCII line is counted in (Unicode case folding is not
    plain lowercasing, so only the full pattern can tell)."""
    hay_lines = [line.lower() for line in lines] if fold else lines
    starts: list[int] = []
    pos = 0
    for line in hay_lines:
        starts.append(pos)
        pos += len(line) + 1
    hay = "\n".join(hay_lines)
    found: set[int] = set()
    for literal in literals:
        at = hay.find(literal)
        while at != -1:
            idx = bisect_right(starts, at) - 1
            found.add(idx)
            at = hay.find(literal, starts[idx + 1] if idx + 1 < len(starts) else len(hay))
    if fold:
        found.update(i for i, line in enumerate(lines) if not line.isascii())
    return sorted(found)


def looks_like_error(text: str) -> bool:
    """``ERROR_LINE_RE or SHM_RE or NCCL_RE`` matches ``text``."""
    return ERROR_ANY_RE.search(text) is not None


def may_have_signature(text: str) -> bool:
    """False when none of ``SHM_RE``, ``NCCL_RE``, ``ROBOT_RE``, ``RLINF_FAILURE`` can match ``text``."""
    return bool(lines_with([text], SIGNATURE_WORDS, fold=True))


# --- the full scan (diagnosis, pending reasons, run check) ---------------------------------------------------


@dataclass
class Marker:
    """One wrapper marker found in a log. ``line_no`` is 1-based within the whole log; ``values`` the regex
    groups (``rank``, ``code``, ``nodes``, ``address``, ``ip``, ``port`` ...)."""

    key: str
    line_no: int
    text: str
    kind: str
    values: dict[str, str] = field(default_factory=dict)

    @property
    def failed(self) -> bool:
        """True for error markers and non-zero exit markers."""
        if self.kind == ERROR:
            return True
        return self.key in ("run_exit", "worker_exit") and self.values.get("code", "0") != "0"


@dataclass
class LogScan:
    """Everything one pass over a Worker's log finds.

    ``markers`` belong to the last run in the log (from the last ``RLINF_NODE_RANK`` line on; earlier runs of a
    restarted container are ignored). ``pattern_hits`` maps each requested pattern name to its first matching
    ``(line_no, line)``. Counts from ray_check.py and RLinf: ``check_required``/``check_alive_max`` (None when
    not printed), ``rlinf_waiting`` = last ``(n, k)``, ``rlinf_nodes`` = N of ``RLinf is running on a cluster``.
    """

    lines: list[str] = field(default_factory=list)
    markers: list[Marker] = field(default_factory=list)
    segment_start: int = 1
    head_wait_attempts: int = 0
    domain_wait_attempts: int = 0
    check_required: int | None = None
    check_alive_max: int | None = None
    check_passed: bool = False
    check_timeout: bool = False
    rlinf_waiting: tuple[int, int] | None = None
    rlinf_waiting_line: tuple[int, str] | None = None
    rlinf_nodes: int | None = None
    rlinf_cluster_line: tuple[int, str] | None = None
    pattern_hits: dict[str, tuple[int, str]] = field(default_factory=dict)
    _first_errors: dict[int, tuple[int, str] | None] = field(default_factory=dict, repr=False, compare=False)
    _candidates: dict[str, list[int]] = field(default_factory=dict, repr=False, compare=False)

    def candidate_lines(self, kind: str, start: int = 0) -> list[int]:
        """0-based indices from ``start`` on of the lines that may hold an error or a marker (``kind`` "error")
        or one of the diagnosis's text signatures ("signature"): every other line cannot (:func:`lines_with`)."""
        if kind not in self._candidates:
            if kind == "error":
                found = set(lines_with(self.lines, ERROR_WORDS, fold=True))
                found.update(lines_with(self.lines, MARKER_LITERALS))
                self._candidates[kind] = sorted(found)
            else:
                self._candidates[kind] = lines_with(self.lines, SIGNATURE_WORDS, fold=True)
        lines = self._candidates[kind]
        return lines[bisect_left(lines, start) :]

    def first(self, key: str) -> Marker | None:
        return next((m for m in self.markers if m.key == key), None)

    def last(self, key: str) -> Marker | None:
        return next((m for m in reversed(self.markers) if m.key == key), None)

    def has(self, key: str) -> bool:
        return self.first(key) is not None

    @property
    def rank(self) -> int | None:
        m = self.first("rank")
        return int(m.values["rank"]) if m else None

    @property
    def last_stage(self) -> Marker | None:
        """The last completed stage: last progress marker that is not a failure (exit markers with code 0)."""
        for m in reversed(self.markers):
            if m.kind == PROGRESS and not m.failed:
                return m
        return None

    def first_error_after(self, line_no: int) -> tuple[int, str] | None:
        """First error-looking line after ``line_no`` (1-based), the wrappers' routine lines excluded (remembered
        per ``line_no``: the timeline, the findings and the page ask more than once)."""
        if line_no not in self._first_errors:
            self._first_errors[line_no] = self._first_error_after(line_no)
        return self._first_errors[line_no]

    def _first_error_after(self, line_no: int) -> tuple[int, str] | None:
        for idx in self.candidate_lines("error", max(line_no, self.segment_start - 1)):
            text = self.lines[idx]
            if not text.strip() or BENIGN_RE.search(text):
                continue
            marker = match_marker(text)
            if marker is not None:
                key, _ = marker
                m = Marker(key, idx + 1, text, MARKER_KIND[key], marker[1])
                if m.failed:
                    return idx + 1, text
                continue
            if ERROR_ANY_RE.search(text):
                return idx + 1, text
        return None


def match_marker(text: str) -> tuple[str, dict[str, str]] | None:
    """The first wrapper marker (``MARKERS`` order) ``text`` holds: ``(key, regex groups)``, else None."""
    if not text or not MARKER_PREFILTER.search(text):
        return None
    for key, regex, _ in MARKERS:
        m = regex.search(text)
        if m:
            return key, {k: v for k, v in m.groupdict().items() if v is not None}
    return None


def split_lines(log: str | Iterable[str]) -> list[str]:
    if isinstance(log, str):
        return [line.rstrip("\r") for line in log.splitlines()]
    return [str(line).rstrip("\r\n") for line in log]


def scan_log(log: str | Iterable[str], patterns: dict[str, str] | None = None) -> LogScan:
    """Scan a Worker log (text or lines). ``patterns`` maps names to user regexes (invalid regexes are matched
    as plain text). Never raises for odd input."""
    scan = LogScan(lines=split_lines(log))
    compiled: dict[str, re.Pattern[str]] = {}
    for name, pattern in (patterns or {}).items():
        try:
            compiled[name] = re.compile(pattern)
        except re.error:
            compiled[name] = re.compile(re.escape(pattern))
    for name, regex in compiled.items():
        hit = next(((i + 1, text) for i, text in enumerate(scan.lines) if regex.search(text)), None)
        if hit is not None:
            scan.pattern_hits[name] = hit
    scan.pattern_hits = dict(sorted(scan.pattern_hits.items(), key=lambda item: item[1][0]))  # in log order
    candidates = lines_with(scan.lines, SCAN_LITERALS)  # no other line can hold what the scan counts
    # The last run starts at the last RLINF_NODE_RANK line (a restarted container appends a new run).
    for idx in reversed(candidates):
        if MARKERS[0][1].search(scan.lines[idx]):
            scan.segment_start = idx + 1
            break
    for idx in candidates[bisect_left(candidates, scan.segment_start - 1) :]:
        text = scan.lines[idx]
        line_no = idx + 1
        if HEAD_WAIT_ATTEMPT.search(text):
            scan.head_wait_attempts += 1
            continue
        if DOMAIN_WAIT_ATTEMPT.search(text):
            scan.domain_wait_attempts += 1
            continue
        found = match_marker(text)
        if found is not None:
            key, values = found
            scan.markers.append(Marker(key, line_no, text, MARKER_KIND[key], values))
            continue
        if m := CHECK_REQUIRED.search(text):
            scan.check_required = int(m["n"])
        elif m := CHECK_READY.search(text):
            scan.check_passed = True
            scan.check_required = int(m["n"])
            scan.check_alive_max = max(scan.check_alive_max or 0, int(m["a"]))
        elif m := CHECK_TIMEOUT.search(text):
            scan.check_timeout = True
            scan.check_required = int(m["n"])
        elif m := CHECK_COUNT.search(text) or CHECK_FOUND.search(text):
            scan.check_alive_max = max(scan.check_alive_max or 0, int(m["a"]))
        elif m := RLINF_WAITING.search(text):
            scan.rlinf_waiting = (int(m["n"]), int(m["k"]))
            scan.rlinf_waiting_line = (line_no, text)
        elif m := RLINF_CLUSTER.search(text):
            scan.rlinf_nodes = int(m["n"])
            scan.rlinf_cluster_line = (line_no, text)
    return scan
