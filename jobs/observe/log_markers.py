"""The wrapper scripts' log markers, and the one scanner of them that sync, diagnosis, pending reasons and the
run check share: one place knows the markers.

Pure functions over log text; nothing here reads a database or a runtime.

- :func:`log_signals` / :func:`merge_signals`: the few facts the status sync needs from a Worker's log
  (exit codes, Ray ready, last stage, first error), also folded from a log read in pieces
  (``jobs.observe.sync_fetch`` reads only what was appended).
- :func:`scan_log` -> :class:`LogScan`: every marker of the last run in the log, with line numbers and values,
  for the diagnosis timeline, the pending reasons' last stage and the run check.

Sources: upstream-rlark 5.1/5.3 (the wrapper markers, byte-identical, in the order the scripts print them),
5.2 (``ray_check.py`` lines), rlinf.md 3 and 7 (RLinf's own lines), seed 05-troubleshooting-jobs-workers
(the error signatures).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from ahocorasick_rs import AhoCorasick

from jobs.observe import run_links, user_patterns
from jobs.observe.log_levels import below_error_level

# --- the status sync's markers ------------------------------------------------------------------------------

RUN_EXIT = re.compile(r"Run script exited with code (-?\d+)")
RAY_EXIT = re.compile(r"Ray worker process exited with code (-?\d+)")
RAY_READY = "Ray cluster is ready"
RAY_STARTED = "Ray runtime started."  # Ray's own line once ``ray start`` has joined this node (head or worker)
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


def log_signals(text: str) -> dict[str, Any]:
    """Facts the wrapper markers tell about one Worker's log.

    Returns ``{"runExit": int|None, "rayExit": int|None, "rayReady": bool,
    "clusterCheckFailed": bool, "lastStage": marker line|None, "firstError": line|None, "rayStarted": bool,
    "rlinfWaiting": [N, k]|None, "rlinfSeen": bool, "rayAlive": int|None}``
    (the last occurrence of each exit marker counts; ``firstError`` is the first error-looking
    line after the last stage marker, or that marker itself when it is an error; ``rayStarted``: Ray's own
    ``Ray runtime started.`` line, this node joined; ``rlinfWaiting``: RLinf's last ``Waiting for N nodes to be
    ready, currently k nodes available`` while no ``RLinf is running on a cluster`` line followed it; ``rlinfSeen``:
    the text had either line; ``rayAlive``: the last alive-node count of the head's cluster check).
    """
    return _scan(text)[0]


def _scan(text: str) -> tuple[dict[str, Any], bool]:
    """:func:`log_signals` and whether ``text`` holds a (non-exit) stage marker."""
    run_exit = ray_exit = None
    ready = check_failed = started = rlinf_seen = False
    rlinf_waiting: list[int] | None = None
    alive: int | None = None
    last_stage = None
    last_stage_index = -1
    lines = text.splitlines()
    for index, line in enumerate(lines):
        stripped = line.strip()
        if RAY_STARTED in stripped:
            started = True
        if "node" in stripped and (m := CHECK_COUNT.search(stripped) or CHECK_FOUND.search(stripped)):
            alive = int(m["a"])  # the head's own count (ray_check.py, upstream-rlark 5.2)
        elif "nodes" in stripped and (m := CHECK_READY.search(stripped)):
            alive = int(m["a"])
        if "nodes" in stripped and (m := RLINF_WAITING.search(stripped) or RLINF_CLUSTER.search(stripped)):
            rlinf_seen = True
            rlinf_waiting = [int(m["n"]), int(m["k"])] if "k" in m.groupdict() else None
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
                and is_error_line(stripped)
                and not BENIGN_RE.search(stripped)
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
        "rayStarted": started,
        "rlinfWaiting": rlinf_waiting,
        "rlinfSeen": rlinf_seen,
        "rayAlive": alive,
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
    merged["rayStarted"] = bool(old.get("rayStarted")) or new["rayStarted"]
    merged["rlinfSeen"] = bool(old.get("rlinfSeen")) or new["rlinfSeen"]
    merged["rlinfWaiting"] = new["rlinfWaiting"] if new["rlinfSeen"] else old.get("rlinfWaiting")
    merged["rayAlive"] = new["rayAlive"] if new["rayAlive"] is not None else old.get("rayAlive")
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
    r"|\b[A-Za-z_]\w*(?:Error|Exception): |No space left on device",
    re.IGNORECASE,
)
# Lines that look like errors but are the wrappers' own routine output.
BENIGN_RE = re.compile(
    r"Waiting for head to be reachable|Waiting for domain IP|\[Warning\] Failed to connect or query Ray cluster|"
    r"Could not retrieve node count, retrying|Time remaining: |Ray worker process exited with code 0|"
    r"Run script exited with code 0"
)

# Prefilters (without them a 200-Worker Diagnosis ran 3 M regex searches). Each is one search that every line the
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
    # "not found" covers "command not found"
    *("permission denied", "no such file or directory", "not found", "cannot", "could not"),
    *("timed out", *_SHM_NCCL),
)
SIGNATURE_WORDS = (*_SHM_NCCL, "franka", "robot", "realsense", "camera", "gripper", "exiting main")
SIGNATURE_RE = re.compile(
    "|".join(f"(?:{r.pattern})" for r in (SHM_RE, NCCL_RE, ROBOT_RE, RLINF_FAILURE)), re.IGNORECASE
)


_BOTH_WORDS = tuple(w for w in ERROR_WORDS if w in SIGNATURE_WORDS)
_ERROR_ONLY = tuple(w for w in ERROR_WORDS if w not in SIGNATURE_WORDS)
_SIGNATURE_ONLY = tuple(w for w in SIGNATURE_WORDS if w not in ERROR_WORDS)


def lines_with(lines: list[str], literals: tuple[str, ...], fold: bool = False) -> list[int]:
    """Sorted 0-based indices of ``lines`` holding one of ``literals``, found by ``str.find`` over the joined text
    (C speed: a per-line search of ~20 alternatives cost ~10-100 us a line). ``fold``: the literals are lowercase
    and looked for in the lowered lines, and every non-ASCII line is counted in (Unicode case folding is not
    plain lowercasing, so only the full pattern can tell)."""
    hay = "\n".join(lines)
    if fold and not hay.isascii():
        low = "\n".join(line.lower() for line in lines)  # lowering may change a line's length: joined again
        hits = _line_starts(low, literals)
        index = _line_index(low, hits)
        found = {index[at] for at in hits} | {i for i, line in enumerate(lines) if not line.isascii()}
        return sorted(found)
    searched = hay.lower() if fold else hay  # ASCII: lowering keeps every offset
    hits = _line_starts(searched, literals)
    index = _line_index(searched, hits)
    return sorted(index[at] for at in hits)


def _line_starts(hay: str, literals: Iterable[str]) -> set[int]:
    """Start offsets of the lines of ``hay`` (lines joined by ``\\n``) that hold one of ``literals``: one
    ``str.find`` per literal and per line holding it, none per other line."""
    found: set[int] = set()
    for literal in literals:
        at = hay.find(literal)
        while at != -1:
            found.add(hay.rfind("\n", 0, at) + 1)
            end = hay.find("\n", at + len(literal))
            at = hay.find(literal, end + 1) if end != -1 else -1
    return found


def _line_index(hay: str, starts: set[int]) -> dict[int, int]:
    """Line start offset in ``hay`` -> 0-based line index, for ``starts`` (counted in C, once over the text)."""
    index: dict[int, int] = {}
    line, prev = 0, 0
    for at in sorted(starts):
        line += hay.count("\n", prev, at)
        prev = at
        index[at] = line
    return index


# One Aho-Corasick automaton per searched text (``ahocorasick_rs``: every literal found in one pass over the text
# in Rust, ~3.5x faster than one ``str.find`` pass per literal): the scan's literals over the log as it is, the
# error and signature words over its lowered copy; a word's kind says which candidate sets its line joins.
_SCAN_SEARCH = AhoCorasick(list(SCAN_LITERALS))
_LOW_WORDS = (*_BOTH_WORDS, *_ERROR_ONLY, *_SIGNATURE_ONLY)
_LOW_SEARCH = AhoCorasick(list(_LOW_WORDS))
_ERROR_KIND, _SIGNATURE_KIND = 1, 2
_LOW_KINDS = tuple(
    (_ERROR_KIND if w in ERROR_WORDS else 0) | (_SIGNATURE_KIND if w in SIGNATURE_WORDS else 0) for w in _LOW_WORDS
)


def _matched_line_starts(hay: str, search: AhoCorasick) -> list[tuple[int, int]]:
    """(pattern index, start offset of its line) of every match of ``search`` in ``hay`` (overlapping ones too,
    so no literal hides another), one per pattern and line."""
    seen: set[tuple[int, int]] = set()
    for index, start, _end in search.find_matches_as_indexes(hay, overlapping=True):
        seen.add((index, hay.rfind("\n", 0, start) + 1))
    return list(seen)


def candidates(lines: list[str], hay: str | None = None) -> tuple[set[int], set[int], set[int]]:
    """0-based indices of the ``lines`` that may hold (1) what the scan counts (``SCAN_LITERALS``), (2) an error
    or a marker, (3) one of the diagnosis's text signatures (``SIGNATURES``). No other line can (the one-search
    prefilters above); each line of plain training output is then looked at by no regex at all. ``hay``: the
    lines joined by ``\\n`` when the caller has it already."""
    hay = "\n".join(lines) if hay is None else hay
    if hay.isascii():  # the usual log: one lowered copy, every offset kept
        low, other = hay.lower(), set()
    else:  # lowering may change lengths: lowered line by line; every non-ASCII line is a candidate
        low = "\n".join(line.lower() for line in lines)
        other = {i for i, line in enumerate(lines) if not line.isascii()}
    scan_at = {start for _, start in _matched_line_starts(hay, _SCAN_SEARCH)}
    error_at: set[int] = set()
    signature_at: set[int] = set()
    for word, start in _matched_line_starts(low, _LOW_SEARCH):
        kind = _LOW_KINDS[word]
        if kind & _ERROR_KIND:
            error_at.add(start)
        if kind & _SIGNATURE_KIND:
            signature_at.add(start)
    index = _line_index(hay, scan_at)
    low_index = _line_index(low, error_at | signature_at)
    scan = {index[at] for at in scan_at}
    errors = {low_index[at] for at in error_at} | other | {i for i in scan if MARKER_PREFILTER.search(lines[i])}
    signatures = {low_index[at] for at in signature_at} | other
    return scan, errors, signatures


def is_error_line(text: str) -> bool:
    """A line that is not a wrapper marker counts as an error: it looks like one (``ERROR_ANY_RE``) and no logger
    wrote it at a level below ERROR (:func:`below_error_level`)."""
    return ERROR_ANY_RE.search(text) is not None and not below_error_level(text)


def looks_like_error(text: str) -> bool:
    """``ERROR_LINE_RE or SHM_RE or NCCL_RE`` matches ``text``."""
    return ERROR_ANY_RE.search(text) is not None


def may_have_signature(text: str) -> bool:
    """False when none of ``SHM_RE``, ``NCCL_RE``, ``ROBOT_RE``, ``RLINF_FAILURE`` can match ``text``."""
    return bool(lines_with([text], SIGNATURE_WORDS, fold=True))


# --- the scan (diagnosis, pending reasons, run check): incremental, stored per Pod instance -------------------

# Bounds of a :class:`ScanState` (its JSON stays a few KiB whatever the log's size):
KEEP_LINE = 500  # characters kept of every stored line (markers, first errors, signature and pattern hits)
MAX_MARKERS = 100  # markers kept of the last run (a run prints ~15); past it the oldest that is neither the first
#                    nor the last of its key is dropped, so first() / last() / has() stay exact
# First-error lines kept: at most one per kept marker plus the run's first (each kept once however many markers
# share it). So a state holds at most ~(2 * MAX_MARKERS + MAX_PATTERNS + 10) lines of KEEP_LINE characters.
MAX_PATTERNS = 50  # user patterns (the run check's) tracked per log; more are never matched
MAX_PARTIAL = 1 << 16  # characters kept of an unfinished last line (runtimes hand over whole lines; see feed())
STATE_VERSION = 1  # a stored state of another version is dropped and the log scanned again

# The diagnosis's text signatures (seed 05): finding code, pattern. The first line of the last run matching each.
SIGNATURES: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("shm_or_disk", SHM_RE),
    ("nccl", NCCL_RE),
    ("robot", ROBOT_RE),
    ("rlinf_failure", RLINF_FAILURE),
)
# What str.splitlines() splits on (a line break in the log).
LINE_BREAKS = "\n\r\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029"


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
        return _failed(self.key, self.values)


def _failed(key: str, values: dict[str, str]) -> bool:
    if MARKER_KIND[key] == ERROR:
        return True
    return key in ("run_exit", "worker_exit") and values.get("code", "0") != "0"


@dataclass
class LogScan:
    """What the scan of a Worker's log found (:meth:`ScanState.scan`; :func:`scan_log` for a whole text).

    ``markers`` belong to the last run in the log (from the last ``RLINF_NODE_RANK`` line on; earlier runs of a
    restarted container are ignored). ``pattern_hits`` maps each requested pattern name to its first matching
    ``(line_no, line)`` in the whole log, in log order. Counts from ray_check.py and RLinf:
    ``check_required``/``check_alive_max`` (None when not printed), ``rlinf_waiting`` = last ``(n, k)``,
    ``rlinf_nodes`` = N of ``RLinf is running on a cluster``. ``signature_hits``: ``SIGNATURES`` code -> first
    ``(line_no, line)`` of the last run matching it; ``head_wait_address``: the address of the last ``Waiting for
    head to be reachable at ...`` line of the run. Stored lines are cut at ``KEEP_LINE`` characters.
    """

    line_count: int = 0
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
    signature_hits: dict[str, tuple[int, str]] = field(default_factory=dict)
    head_wait_address: str = ""
    first_error: tuple[int, str] | None = None  # the first error-looking line of the last run
    errors_after: dict[int, tuple[int, str] | None] = field(default_factory=dict, repr=False)  # marker line -> ...

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
        """First error-looking line after ``line_no`` (1-based) within the last run, the wrappers' routine lines
        excluded; a failed marker counts as an error. Kept for 0 (any line before the run) and for the line of
        every kept marker (the stages the timeline, the findings and the page ask about); for another line, the
        first error after the nearest kept marker before it when that lies after ``line_no``, else None."""
        if line_no < self.segment_start:
            return self.first_error
        if line_no in self.errors_after:
            return self.errors_after[line_no]
        before = [m.line_no for m in self.markers if m.line_no <= line_no]
        hit = self.errors_after.get(before[-1]) if before else self.first_error
        return hit if hit is not None and hit[0] > line_no else None


class ScanState:
    """The scan of one log so far, fed in chunks and stored as JSON (``jobs.models.PodLogScan``).

    ``feed(a); feed(b)`` then :meth:`scan` gives what ``feed(a + b)`` and :func:`scan_log` of ``a + b`` give, for
    any cut (a line split across chunks included): lines are split exactly as ``str.splitlines`` splits the whole
    text, an unfinished last line waits in ``partial`` for the next chunk (and is scanned as the last line by
    :meth:`scan`). Only what the findings and the checks read is kept: the last run's markers with the first error
    after each, its counters and first signature lines, and the first hit of every tracked pattern; bounded by
    ``KEEP_LINE``, ``MAX_MARKERS``, ``MAX_PATTERNS`` and ``MAX_PARTIAL``. ``patterns`` are the user regexes to
    track (invalid ones are matched as plain text); a pattern not tracked from the start needs a new scan
    (:meth:`tracks`)."""

    def __init__(self, patterns: Iterable[str] = ()) -> None:
        self.lines = 0  # complete lines fed
        self.partial = ""
        self.patterns: dict[str, list | None] = {p: None for p in list(dict.fromkeys(patterns))[:MAX_PATTERNS]}
        self.links: dict[str, list[str]] = {}  # the first W&B / SwanLab run addresses of the log (run_links)
        self._new_run(1)

    def _new_run(self, start: int) -> None:
        self.segment_start = start
        self.markers: list[list] = []  # [key, line_no, text, values, index in errors of the first error after it]
        self.errors: list[list] = []  # [line_no, text] of the first errors the run's markers point to
        self.first_error: int | None = None  # index in errors
        self.open = 0  # markers before this index have their first error
        self.head_wait = self.domain_wait = 0
        self.check_required: int | None = None
        self.check_alive_max: int | None = None
        self.check_passed = self.check_timeout = False
        self.rlinf_waiting: list | None = None
        self.rlinf_waiting_line: list | None = None
        self.rlinf_nodes: int | None = None
        self.rlinf_cluster_line: list | None = None
        self.signatures: dict[str, list] = {}
        self.head_address = ""

    # --- JSON ---------------------------------------------------------------------------------------------

    _FIELDS = {
        "n": "lines",
        "p": "partial",
        "seg": "segment_start",
        "mk": "markers",
        "e0": "first_error",
        "er": "errors",
        "open": "open",
        "hw": "head_wait",
        "dw": "domain_wait",
        "cr": "check_required",
        "ca": "check_alive_max",
        "cp": "check_passed",
        "ct": "check_timeout",
        "rw": "rlinf_waiting",
        "rwl": "rlinf_waiting_line",
        "rn": "rlinf_nodes",
        "rcl": "rlinf_cluster_line",
        "sig": "signatures",
        "ha": "head_address",
        "lk": "links",
    }

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"v": STATE_VERSION, "pat": [[p, hit] for p, hit in self.patterns.items()]}
        out.update({key: getattr(self, attr) for key, attr in self._FIELDS.items()})
        return out

    @classmethod
    def from_json(cls, data: Any) -> ScanState | None:
        """The state stored as :meth:`to_json` gave it; None when ``data`` is not one (another version)."""
        if not isinstance(data, dict) or data.get("v") != STATE_VERSION:
            return None
        state = cls()
        try:
            state.patterns = {str(p): hit for p, hit in data.get("pat") or []}
            for key, attr in cls._FIELDS.items():
                if key in data:
                    setattr(state, attr, data[key])
        except (TypeError, ValueError):
            return None
        return state

    def copy(self) -> ScanState:
        return ScanState.from_json(json_copy(self.to_json()))  # type: ignore[return-value]

    def tracks(self, patterns: Iterable[str]) -> bool:
        """Whether every one of ``patterns`` (up to ``MAX_PATTERNS``) was tracked from the log's start."""
        return all(p in self.patterns for p in list(dict.fromkeys(patterns))[:MAX_PATTERNS])

    # --- feeding ------------------------------------------------------------------------------------------

    def feed(self, text: str) -> ScanState:
        """Scan the next ``text`` of the log (any cut; whole lines from ``Runtime.read_log_from``)."""
        if not text:
            return self
        data = self.partial + text
        if data[-1] not in LINE_BREAKS or data[-1] == "\r":  # unfinished (a "\r" may be half of a "\r\n")
            end = len(data) - 1 if data[-1] == "\r" else len(data)
            cut = max(data.rfind(c, 0, end) for c in LINE_BREAKS) + 1  # where the last line starts
            self.partial = data[cut:][:MAX_PARTIAL]
            data = data[:cut]
        else:
            self.partial = ""
        self.feed_lines(data.splitlines())
        return self

    def feed_lines(self, lines: list[str]) -> ScanState:
        """Scan the next complete ``lines`` (without their line breaks)."""
        if not lines:
            return self
        base = self.lines
        hay = "\n".join(lines)  # searched by the patterns and the prefilters alike
        self._match_patterns(lines, hay, base)
        run_links.collect(self.links, hay)
        scan, errors, signatures = candidates(lines, hay)
        for idx in sorted(scan | errors | signatures):
            self._line(base + idx + 1, lines[idx], idx in scan, idx in errors, idx in signatures)
        self.lines += len(lines)
        return self

    def _match_patterns(self, lines: list[str], hay: str, base: int) -> None:
        """Record the first line of ``lines`` (``hay``: joined by ``\\n``) each pattern not seen yet matches."""
        for pattern, hit in self.patterns.items():
            if hit is not None:
                continue
            # a literal such as the default progress pattern "Global Step": one find over the text
            if user_patterns.is_literal(pattern):
                at = hay.find(pattern)
                found = hay.count("\n", 0, at) if at != -1 else None
            else:
                regex, first = user_patterns.user_regex(pattern), 0
                # every match holds the prefix: no line before its first can match
                if prefix := user_patterns.literal_prefix(pattern):
                    at = hay.find(prefix)
                    first = hay.count("\n", 0, at) if at != -1 else len(lines)
                found = next((i for i in range(first, len(lines)) if regex.search(lines[i])), None)
            if found is not None:
                self.patterns[pattern] = [base + found + 1, lines[found][:KEEP_LINE]]

    def _line(self, line_no: int, text: str, scan: bool, errors: bool, signatures: bool) -> None:
        found = match_marker(text) if scan else None
        if found is not None and found[0] == "rank":  # a restarted container appends a new run
            self._new_run(line_no)
        if scan:
            self._count(line_no, text, found)
        if errors and text.strip() and not BENIGN_RE.search(text):
            if _failed(*found) if found is not None else is_error_line(text):
                self._error(line_no, text)
        if signatures and text.strip():
            for code, regex in SIGNATURES:
                if code not in self.signatures and regex.search(text):
                    self.signatures[code] = [line_no, text[:KEEP_LINE]]

    def _count(self, line_no: int, text: str, found: tuple[str, dict[str, str]] | None) -> None:
        if m := HEAD_WAIT_ATTEMPT.search(text):
            self.head_wait += 1
            self.head_address = m["address"][:KEEP_LINE]
        elif DOMAIN_WAIT_ATTEMPT.search(text):
            self.domain_wait += 1
        elif found is not None:
            self._add_marker(found[0], line_no, text, found[1])
        elif m := CHECK_REQUIRED.search(text):
            self.check_required = int(m["n"])
        elif m := CHECK_READY.search(text):
            self.check_passed = True
            self.check_required = int(m["n"])
            self.check_alive_max = max(self.check_alive_max or 0, int(m["a"]))
        elif m := CHECK_TIMEOUT.search(text):
            self.check_timeout = True
            self.check_required = int(m["n"])
        elif m := CHECK_COUNT.search(text) or CHECK_FOUND.search(text):
            self.check_alive_max = max(self.check_alive_max or 0, int(m["a"]))
        elif m := RLINF_WAITING.search(text):
            self.rlinf_waiting = [int(m["n"]), int(m["k"])]
            self.rlinf_waiting_line = [line_no, text[:KEEP_LINE]]
        elif m := RLINF_CLUSTER.search(text):
            self.rlinf_nodes = int(m["n"])
            self.rlinf_cluster_line = [line_no, text[:KEEP_LINE]]

    def _add_marker(self, key: str, line_no: int, text: str, values: dict[str, str]) -> None:
        self.markers.append([key, line_no, text[:KEEP_LINE], values, None])
        if len(self.markers) <= MAX_MARKERS:
            return
        first: dict[str, int] = {}
        last: dict[str, int] = {}
        for i, m in enumerate(self.markers):
            first.setdefault(m[0], i)
            last[m[0]] = i
        drop = next(i for i, m in enumerate(self.markers) if i not in (first[m[0]], last[m[0]]))
        del self.markers[drop]
        if drop < self.open:
            self.open -= 1

    def _error(self, line_no: int, text: str) -> None:
        if self.first_error is not None and self.open == len(self.markers):
            return  # nobody waits for an error
        self.errors.append([line_no, text[:KEEP_LINE]])
        index = len(self.errors) - 1
        if self.first_error is None:
            self.first_error = index
        while self.open < len(self.markers) and self.markers[self.open][1] < line_no:
            self.markers[self.open][4] = index
            self.open += 1
        if len(self.errors) > MAX_MARKERS + 1:  # errors of dropped markers
            used = sorted({self.first_error, *(m[4] for m in self.markers if m[4] is not None)})
            where = {old: new for new, old in enumerate(used)}
            self.errors = [self.errors[i] for i in used]
            self.first_error = where[self.first_error]
            for m in self.markers:
                if m[4] is not None:
                    m[4] = where[m[4]]

    # --- reading ------------------------------------------------------------------------------------------

    def scan(self, patterns: dict[str, str] | None = None) -> LogScan:
        """What the log scanned so far shows (its unfinished last line counted as a line); ``patterns``: name ->
        pattern of the tracked ones to report in ``pattern_hits``."""
        state = self
        if self.partial:
            state = self.copy()
            state.partial = ""
            state.feed_lines(self.partial.splitlines())
        hits = {}
        for name, pattern in (patterns or {}).items():
            hit = state.patterns.get(pattern)
            if hit is not None:
                hits[name] = (hit[0], hit[1])
        markers = []
        errors_after: dict[int, tuple[int, str] | None] = {}
        for key, line_no, text, values, err in state.markers:
            markers.append(Marker(key, line_no, text, MARKER_KIND[key], dict(values)))
            errors_after[line_no] = _pair(state.errors[err]) if err is not None else None
        return LogScan(
            line_count=state.lines,
            markers=markers,
            segment_start=state.segment_start,
            head_wait_attempts=state.head_wait,
            domain_wait_attempts=state.domain_wait,
            check_required=state.check_required,
            check_alive_max=state.check_alive_max,
            check_passed=state.check_passed,
            check_timeout=state.check_timeout,
            rlinf_waiting=_pair(state.rlinf_waiting),
            rlinf_waiting_line=_pair(state.rlinf_waiting_line),
            rlinf_nodes=state.rlinf_nodes,
            rlinf_cluster_line=_pair(state.rlinf_cluster_line),
            pattern_hits=dict(sorted(hits.items(), key=lambda item: item[1][0])),  # in log order
            signature_hits={code: (hit[0], hit[1]) for code, hit in state.signatures.items()},
            head_wait_address=state.head_address,
            first_error=_pair(state.errors[state.first_error]) if state.first_error is not None else None,
            errors_after=errors_after,
        )


def _pair(value: list | None) -> Any:
    return (value[0], value[1]) if value else None


def json_copy(data: Any) -> Any:
    """A deep copy of JSON-shaped ``data`` (lists, dicts, scalars)."""
    if isinstance(data, dict):
        return {k: json_copy(v) for k, v in data.items()}
    if isinstance(data, list):
        return [json_copy(v) for v in data]
    return data


def match_marker(text: str) -> tuple[str, dict[str, str]] | None:
    """The first wrapper marker (``MARKERS`` order) ``text`` holds: ``(key, regex groups)``, else None."""
    if not text or not MARKER_PREFILTER.search(text):
        return None
    for key, regex, _ in MARKERS:
        m = regex.search(text)
        if m:
            return key, {k: v for k, v in m.groupdict().items() if v is not None}
    return None


def scan_log(log: str | Iterable[str], patterns: dict[str, str] | None = None) -> LogScan:
    """Scan a whole Worker log (text or lines) in one go: :class:`ScanState` fed once. ``patterns`` maps names to
    user regexes (invalid regexes are matched as plain text). Never raises for odd input."""
    state = ScanState((patterns or {}).values())
    if isinstance(log, str):
        state.feed(log)
    else:
        state.feed_lines([str(line).rstrip("\r\n") for line in log])
    return state.scan(patterns)
