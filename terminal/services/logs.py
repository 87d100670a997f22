"""Log tailing for the Logs tab: which Pods a job has, the last lines of a Pod's ``main``
container, and resuming from a cursor without duplicates or gaps.

Sources of the rules:
- seed 02-confirm-job-running: the ``main`` container, last **1000** lines per Pod, "Live"
  refreshes every **5 s**.
- upstream-rlark 8.4 + "RLark Console goes further": previous container instance, merged
  view, timestamps, follow with resume, server-side download ``<job>-<role>-<pod>-<timestamp>.log``.
- peers 3.1 L1 (previous instance), L6 (no low cap: full download), L9 (resume, no dups/gaps),
  L11 (batched, per-stream cap with a visible "throttled" notice).

Cursor model: a container instance's log is identified by ``<pod uid>:<restart count>``
(:attr:`LogTarget.identity`). Within one identity the log only grows, so a cursor is
``(identity, byte offset just after the last complete line, number of complete lines)``.
Resuming reads bytes from the offset: nothing before it is sent twice and nothing after it is
skipped. A different identity (Pod re-created or container restarted), or a log shorter than
the offset (rotation), restarts from the tail and is reported as ``reset``.

Runtimes are used through ``Runtime.stream_log``; if a runtime's ``stream_log`` also accepts
``offset=<bytes>`` (skip that many bytes server-side) or ``timestamps=True`` (RFC 3339 prefix
per line, Kubernetes-style) those are used.
"""

from __future__ import annotations

import collections
import dataclasses
import itertools
import re
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

from clusters.runtime.base import PodNotFound, Runtime, RuntimeFailure
from jobs.control import log_archive
from jobs.models import Job, Pod
from jobs.observe.headline import worker_phase_of
from rlark_console import ansi
from terminal.services.runtimes import accepts, runtime_for

TAIL_LINES = 1000  # seed 02: last 1000 lines per Pod
LIVE_INTERVAL = 5.0  # seed 02: "Live" refreshes every 5 s
MAX_LINES_PER_POLL = 5000  # peers L11: per-stream cap per refresh; the rest follows next refresh
MAX_LINE_BYTES = 64 * 1024  # a longer line is cut (the remainder becomes the next line)
TERMINAL_PHASES = {"Succeeded", "Failed"}
ENDED_JOB_PHASES = ("Succeeded", "Failed", "Stopped")


def stream_ended(layout: Layout, targets: list[LogTarget]) -> bool:
    """The live stream has nothing more to give: the job has ended and none of its Workers can still
    write, each is gone from the runtime or finished (Succeeded, Failed, or Stopped by the console)."""
    return layout.ended and all(not t.exists or t.phase in TERMINAL_PHASES or t.phase == "Stopped" for t in targets)


_TS_RE = re.compile(rb"^(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?(?:Z|[+-]\d\d:\d\d)) ")


@dataclasses.dataclass(frozen=True)
class TaskRef:
    """One Task of a job as plain data (loaded from the database)."""

    name: str
    template: str
    label: str
    namespace: str
    cluster: object  # clusters.models.Cluster
    rank_start: int
    order: int


@dataclasses.dataclass(frozen=True)
class PodRef:
    """A Pod the status sync last recorded in the database."""

    name: str
    task: str
    ordinal: int
    uid: str
    phase: str
    restart_count: int


@dataclasses.dataclass(frozen=True)
class Layout:
    """A job's Tasks and recorded Pods (database only; no runtime calls)."""

    job: str
    tasks: tuple[TaskRef, ...]
    pods: tuple[PodRef, ...]
    ended: bool = False  # the job is Succeeded, Failed or Stopped (its run is over)
    job_phase: str = ""  # the job's phase and ``stopped``: a Worker's shown state depends on them
    stopped: bool = False


@dataclasses.dataclass(frozen=True)
class LogTarget:
    """One Worker Pod whose ``main`` log can be shown.

    ``exists`` is False when the runtime answered and the Pod was not among the job's Pods
    (deleted); ``restart_count`` >= 1 means a previous container instance exists (L1).
    """

    pod: str
    task: str
    role: str
    role_label: str
    namespace: str
    cluster: object
    ordinal: int
    rank: int
    phase: str
    uid: str
    restart_count: int
    exists: bool = True
    archive: str = ""  # the job's log archive directory (jobs.control.log_archive; "" = none)
    containers: tuple = ()  # clusters.runtime.containers.ContainerInfo of the Pod; () = main only
    container: str = "main"  # the container whose log this target reads
    shown_phase: str = ""  # the Worker's state as every tab shows it (jobs.observe.headline.worker_phase_of)

    def with_container(self, name: object) -> LogTarget:
        """This Pod's target for container ``name`` (one of :attr:`containers`); ``main`` for anything else."""
        names = {c.name for c in self.containers}
        if not isinstance(name, str) or name == self.container or name not in names:
            return self
        restarts = next(c.restart_count for c in self.containers if c.name == name)
        return dataclasses.replace(
            self, container=name, restart_count=restarts if name != "main" else self.restart_count
        )

    def archive_path(self, previous: bool) -> Path | None:
        """The archived full log of the current or previous instance, if one was kept (``main`` only)."""
        if not self.archive or self.container != "main":
            return None

        return log_archive.find("", self.pod, previous, base=Path(self.archive))

    @property
    def identity(self) -> str:
        """Log identity of the current container instance: ``<uid or pod>:<restarts>`` (``<uid>/<container>:...``
        for a container other than ``main``)."""
        return f"{self._who()}:{self.restart_count}"

    def _who(self) -> str:
        who = self.uid or self.pod
        return who if self.container == "main" else f"{who}/{self.container}"

    def identity_for(self, previous: bool) -> str:
        """Identity of the current (``previous=False``) or previous container instance."""
        if previous:
            return f"{self._who()}:{self.restart_count - 1}:previous"
        return self.identity

    @property
    def has_previous(self) -> bool:
        return self.exists and self.restart_count >= 1

    def as_dict(self) -> dict:
        """JSON shape sent to the page."""
        return {
            "pod": self.pod,
            "role": self.role,
            "roleLabel": self.role_label,
            "rank": self.rank,
            "phase": self.phase,
            "shownPhase": self.shown_phase or self.phase,  # the picker labels it with jobs.observe.state_words
            "restarts": self.restart_count,
            "exists": self.exists,
            "hasPrevious": self.has_previous,
            "id": self.identity,
            "containers": [c.as_dict() for c in self.containers],
        }


@dataclasses.dataclass
class LogCursor:
    """Where a reader stopped: identity, byte offset after the last complete line, lines read."""

    identity: str
    offset: int = 0
    line: int = 0

    def as_dict(self) -> dict:
        return {"id": self.identity, "off": self.offset, "n": self.line}

    @classmethod
    def from_dict(cls, data: object) -> LogCursor | None:
        """Parse a cursor the page sent back; None if malformed (the tail is re-read)."""
        if not isinstance(data, dict):
            return None
        ident, off, n = data.get("id"), data.get("off"), data.get("n")
        if not isinstance(ident, str) or not isinstance(off, int) or not isinstance(n, int) or off < 0 or n < 0:
            return None
        return cls(ident[:200], off, n)


@dataclasses.dataclass
class LogBatch:
    """Lines read for one Pod. ``first`` is the 0-based line number of ``lines[0]`` within the
    container instance; ``reset`` means earlier lines the page holds belong to another instance;
    ``more`` means the per-refresh cap was hit and more lines are waiting (throttled)."""

    pod: str
    identity: str
    first: int
    lines: list[str]
    stamps: list[str | None]
    cursor: LogCursor
    reset: bool = False
    more: bool = False
    rotated: bool = False  # the file was replaced under the cursor; earlier lines are gone
    rendered: list[dict] | None = None  # payload() computed off the event loop

    def payload(self) -> list[dict]:
        """Lines as sent to the page: ``n`` line number, ``t`` text, ``h`` safe HTML (ANSI only),
        ``ts`` timestamp when the runtime gives one."""
        out = []
        for i, (line, ts) in enumerate(zip(self.lines, self.stamps, strict=True)):
            item: dict = {"n": self.first + i, "t": ansi.strip_ansi(line)}
            if ansi.has_ansi(line):
                item["h"] = ansi.to_html(line)
            if ts:
                item["ts"] = ts
            out.append(item)
        return out


def load_layout(job) -> Layout:
    """Tasks and recorded Pods of ``job`` (``jobs.models.Job``). Database access only."""

    tasks = tuple(
        TaskRef(
            name=t.name,
            template=t.template_name,
            label=t.display_role or t.template_name,
            namespace=t.namespace,
            cluster=t.cluster,
            rank_start=t.rank_start,
            order=t.order,
        )
        for t in job.tasks.select_related("cluster").order_by("order", "name")
    )
    pods = tuple(
        PodRef(p.name, p.task.name, p.ordinal, p.uid, p.phase, p.restart_count)
        for p in Pod.objects.filter(task__job=job).select_related("task").order_by("task__order", "ordinal")
    )
    ended = job.phase in ENDED_JOB_PHASES or bool(job.stopped)
    return Layout(job.name, tasks, pods, ended=ended, job_phase=job.phase, stopped=bool(job.stopped))


def ended_reason(layout: Layout, pod: str) -> str:
    """Why Worker ``pod`` of an ended job cannot be reached (the bastion's and the WebTerminal's one sentence):
    ``"job <job> has finished (phase <phase>): Worker <pod> no longer runs"``, or ``... is stopped ...``; "" while
    the job has not ended (then a missing Pod may simply not exist yet)."""
    if layout.stopped or layout.job_phase == "Stopped":
        return f"job {layout.job} is stopped: Worker {pod} no longer runs; start the job again to reach it"
    if layout.job_phase in ENDED_JOB_PHASES:
        return f"job {layout.job} has finished (phase {layout.job_phase}): Worker {pod} no longer runs"
    return ""


def load_layout_named(job_name: str) -> Layout | None:
    """:func:`load_layout` for the job called ``job_name``; None if it was deleted."""

    job = Job.objects.filter(name=job_name).first()
    return load_layout(job) if job is not None else None


def resolve_targets(layout: Layout) -> tuple[list[LogTarget], list[str]]:
    """The job's Pods as the runtimes report them now, plus recorded Pods that are gone.

    Returns ``(targets, warnings)``; a runtime that cannot be reached adds a warning and its
    recorded Pods are listed as they were last seen. Blocking (runtime calls).
    """
    by_task = {t.name: t for t in layout.tasks}
    targets: dict[str, LogTarget] = {}
    warnings: list[str] = []
    answered: set[str] = set()  # task names whose runtime answered
    groups: dict[tuple[int, str], list[TaskRef]] = {}
    for t in layout.tasks:
        groups.setdefault((getattr(t.cluster, "pk", 0), t.namespace), []).append(t)
    for (_, namespace), refs in groups.items():
        try:
            pods = runtime_for(refs[0].cluster).list_pods(namespace, layout.job)
        except RuntimeFailure as exc:
            warnings.append(str(exc))
            continue
        answered.update(r.name for r in refs)
        for p in pods:
            task = by_task.get(p.task)
            if task is None:
                continue
            target = _target(layout.job, task, p.name, p.ordinal, p.phase, p.uid, p.container.restart_count)
            targets[p.name] = dataclasses.replace(target, containers=tuple(p.containers))
    for p in layout.pods:
        task = by_task.get(p.task)
        if task is None or p.name in targets:
            continue
        targets[p.name] = _target(
            layout.job, task, p.name, p.ordinal, p.phase, p.uid, p.restart_count, exists=task.name not in answered
        )
    order = {t.name: t.order for t in layout.tasks}
    shown = [
        dataclasses.replace(t, shown_phase=worker_phase_of(layout.job_phase, layout.stopped, t.phase))
        for t in targets.values()
    ]
    return sorted(shown, key=lambda t: (order.get(t.task, 0), t.task, t.ordinal)), warnings


def _chunks(
    runtime: Runtime, target: LogTarget, previous: bool, offset: int = 0, timestamps: bool = True
) -> tuple[Iterator[bytes], int, bool]:
    """Byte chunks of the log, how many leading bytes the caller still has to skip, and whether
    lines carry a runtime timestamp prefix (asked for when ``timestamps`` and the runtime can; the full
    download asks for none: it is the log as the Worker wrote it)."""
    kwargs: dict = {"previous": previous}
    if target.container != "main" and accepts(runtime.stream_log, "container"):
        kwargs["container"] = target.container
    stamped = timestamps and accepts(runtime.stream_log, "timestamps")
    if stamped:
        kwargs["timestamps"] = True
    skip = offset
    archived = target.archive_path(previous)
    if archived is not None and not target.exists:
        return _file_chunks(archived), skip, False
    if offset and accepts(runtime.stream_log, "offset"):
        kwargs["offset"] = offset
        skip = 0
    chunks = iter(runtime.stream_log(target.namespace, target.pod, **kwargs))
    if archived is None:
        return chunks, skip, stamped
    try:
        first = next(chunks)
    except StopIteration:
        return iter(()), skip, stamped
    except PodNotFound:  # gone since the layout was read: the sync's archive has its last lines
        return _file_chunks(archived), offset, False
    return itertools.chain([first], chunks), skip, stamped


def _target(
    job: str, task: TaskRef, pod: str, ordinal: int, phase: str, uid: str, restarts: int, exists: bool = True
) -> LogTarget:
    """The LogTarget of Pod ``pod`` of ``task`` (rank = the Task's rank start + ordinal)."""
    return LogTarget(
        pod=pod,
        task=task.name,
        role=task.template,
        role_label=task.label,
        namespace=task.namespace,
        cluster=task.cluster,
        ordinal=ordinal,
        rank=task.rank_start + ordinal,
        phase=phase,
        uid=uid,
        restart_count=restarts,
        exists=exists,
        archive=_archive(job, pod),
    )


def _archive(job: str, pod: str) -> str:
    """The job's log archive directory (``jobs.control.log_archive.job_dir``)."""

    return str(log_archive.job_dir(job))


def _file_chunks(path: Path, size: int = 64 * 1024) -> Iterator[bytes]:
    """An archived log's uncompressed bytes in chunks (constant memory)."""

    return log_archive.chunks(path, size)


def _split(raw: bytes, stamped: bool) -> tuple[str, str | None]:
    """Decode one raw line and split off a runtime timestamp prefix if there is one."""
    stamp = None
    if stamped:
        m = _TS_RE.match(raw)
        if m:
            stamp = m.group(1).decode()
            raw = raw[m.end() :]
    if raw.endswith(b"\r"):
        raw = raw[:-1]
    return raw.decode("utf-8", "replace"), stamp


def _blocks(chunks: Iterator[bytes], skip: int, final: bool) -> Iterator[tuple[list[bytes], int] | None]:
    """Complete lines after ``skip`` bytes, in blocks: ``(lines, bytes consumed including newlines)``.

    Splitting happens per chunk in C (``bytes.split``), so a 100k-line log is cheap. A partial line
    longer than :data:`MAX_LINE_BYTES` is cut into a line of its own. Yields None first if the log
    is shorter than ``skip`` (rotated or truncated). A last line without newline is yielded only
    when ``final`` (the container has ended).
    """
    buf = b""
    for chunk in chunks:
        if skip:
            if len(chunk) <= skip:
                skip -= len(chunk)
                continue
            chunk = chunk[skip:]
            skip = 0
        buf += chunk
        cut = buf.rfind(b"\n")
        if cut >= 0:
            yield buf[:cut].split(b"\n"), cut + 1
            buf = buf[cut + 1 :]
        while len(buf) >= MAX_LINE_BYTES:
            yield [buf[:MAX_LINE_BYTES]], MAX_LINE_BYTES
            buf = buf[MAX_LINE_BYTES:]
    if skip:
        yield None
        return
    if final and buf:
        yield [buf], len(buf)


def read_tail(
    runtime: Runtime, target: LogTarget, previous: bool = False, tail: int = TAIL_LINES, final: bool | None = None
) -> LogBatch:
    """The last ``tail`` lines of the container instance and a cursor at its end.

    Reads the whole log once in constant memory (a deque of ``tail`` lines). Raises
    PodNotFound when the Pod is gone and RuntimeFailure(reason="not_found") when there is no
    previous instance.
    """
    if final is None:
        final = previous or target.phase in TERMINAL_PHASES
    identity = target.identity_for(previous)
    chunks, _, stamped = _chunks(runtime, target, previous)
    window: collections.deque[bytes] = collections.deque(maxlen=tail)
    offset = count = 0
    for block in _blocks(chunks, 0, final):
        assert block is not None
        lines, size = block
        window.extend(lines)
        offset += size
        count += len(lines)
    decoded = [_split(raw, stamped) for raw in window]
    return LogBatch(
        pod=target.pod,
        identity=identity,
        first=count - len(window),
        lines=[d[0] for d in decoded],
        stamps=[d[1] for d in decoded],
        cursor=LogCursor(identity, offset, count),
        reset=True,
    )


OLDER_LINES = 5000  # lines one "load older" request brings


def read_before(
    runtime: Runtime, target: LogTarget, before: int, previous: bool = False, count: int = OLDER_LINES
) -> LogBatch:
    """The ``count`` lines (at most :data:`OLDER_LINES`) just before line ``before`` of the container
    instance ("load older"): ``first`` is the line number of the first one, ``lines`` may be
    empty when ``before`` is 0. Reads the log once in constant memory; the cursor is not advanced
    (``cursor`` is a copy at ``before``'s line, never used to resume)."""
    count = max(0, min(count, OLDER_LINES))
    before = max(0, before)
    start = max(0, before - count)
    final = previous or target.phase in TERMINAL_PHASES
    identity = target.identity_for(previous)
    chunks, _, stamped = _chunks(runtime, target, previous)
    raws: list[bytes] = []
    seen = 0
    gen = _blocks(chunks, 0, final)
    try:
        for block in gen:
            assert block is not None
            lines, _size = block
            lo, hi = max(start - seen, 0), min(before - seen, len(lines))
            if lo < hi:
                raws += lines[lo:hi]
            seen += len(lines)
            if seen >= before:
                break
    finally:
        gen.close()
    return _decoded_batch(target.pod, identity, start, raws, stamped, LogCursor(identity, 0, start))


def _decoded_batch(
    pod: str, identity: str, first: int, raws: list[bytes], stamped: bool, cursor: LogCursor, **extra
) -> LogBatch:
    """A LogBatch of raw lines, decoded; ``received_at`` in ``extra`` stamps lines without a timestamp."""
    received_at = extra.pop("received_at", None)
    decoded = [_split(raw, stamped) for raw in raws]
    return LogBatch(
        pod, identity, first, [d[0] for d in decoded], [d[1] or received_at for d in decoded], cursor, **extra
    )


def read_since(
    runtime: Runtime,
    target: LogTarget,
    cursor: LogCursor,
    previous: bool = False,
    max_lines: int | None = None,
    received_at: str | None = None,
) -> LogBatch:
    """Lines written after ``cursor`` (at most ``max_lines``, default :data:`MAX_LINES_PER_POLL`;
    ``more`` when capped).

    A cursor of another identity or beyond the end of the log gives :func:`read_tail` with
    ``reset``. ``received_at`` (ISO time) stamps lines the runtime gave no timestamp for.
    """
    identity = target.identity_for(previous)
    if cursor.identity != identity:
        return read_tail(runtime, target, previous)
    max_lines = max_lines or MAX_LINES_PER_POLL
    final = previous or target.phase in TERMINAL_PHASES
    chunks, skip, stamped = _chunks(runtime, target, previous, cursor.offset)
    raws: list[bytes] = []
    offset, count, more = cursor.offset, cursor.line, False
    gen = _blocks(chunks, skip, final)
    try:
        for block in gen:
            if block is None:  # shorter than the cursor: the log rotated (or was truncated)
                return dataclasses.replace(read_tail(runtime, target, previous), rotated=True)
            lines, size = block
            room = max_lines - len(raws)
            if len(lines) > room:
                taken = lines[:room]
                raws += taken
                offset += sum(len(x) + 1 for x in taken)
                count += len(taken)
                more = True
                break
            raws += lines
            offset += size
            count += len(lines)
    finally:
        gen.close()
    return _decoded_batch(
        target.pod,
        identity,
        cursor.line,
        raws,
        stamped,
        LogCursor(identity, offset, count),
        more=more,
        received_at=received_at,
    )


def empty_state(target: LogTarget, previous: bool, error: Exception | None = None) -> tuple[str, str]:
    """``(state, message)`` for a Pod without lines to show (English source; translated by the page).

    States: ``gone`` (Pod deleted), ``no-previous``, ``pending`` (not started), ``empty``
    (started, nothing written yet), ``error`` (runtime failure).
    """
    if isinstance(error, PodNotFound) or not target.exists:
        return "gone", f"Pod {target.pod} no longer exists; its logs are no longer available."
    if previous and (not target.has_previous or (isinstance(error, RuntimeFailure) and error.reason == "not_found")):
        return "no-previous", f"{target.pod} has no previous container instance."
    if error is not None:
        return "error", f"error fetching logs: {error}"
    if target.phase == "Pending":
        return "pending", f"Pod {target.pod} is Pending; no logs yet."
    return "empty", f"{target.pod} has not written any log lines yet."


def download_filename(job: str, role: str, pod: str, when: datetime | None = None, previous: bool = False) -> str:
    """``<job>-<role>-<pod>-<timestamp>.log`` (peers L8), timestamp UTC ``YYYYmmddTHHMMSSZ``.

    ``previous`` appends ``-previous`` to the pod part. Characters outside ``[A-Za-z0-9._-]``
    become ``_`` so the header value is always safe.
    """
    when = when or datetime.now(UTC)
    pod_part = f"{pod}-previous" if previous else pod
    parts = [re.sub(r"[^A-Za-z0-9._-]", "_", p) for p in (job, role, pod_part)]
    return f"{'-'.join(parts)}-{when.astimezone(UTC):%Y%m%dT%H%M%SZ}.log"


def open_download(target: LogTarget, previous: bool = False) -> tuple[bytes, Iterator[bytes]]:
    """Start streaming the full log: ``(first chunk, rest)``. The first chunk is read eagerly so
    PodNotFound / missing previous instance are raised before a response is started."""
    runtime = runtime_for(target.cluster)
    it, skip, _stamped = _chunks(runtime, target, previous, timestamps=False)
    first = next(it, b"")
    return first[skip:] if skip else first, it
