"""Progress from TensorBoard scalars, for a job whose logs never showed a ``Global Step`` line.

RLinf's metric logger writes every training metric with ``step=global_step`` to TensorBoard event files under
``<log_path>/tensorboard/`` (rlinf.md 7, "Where outputs land and how progress shows": the same global step names
the checkpoints ``global_step_<N>``; the head template's ``tensorBoardDir`` points there or at its parent).
When no Worker's log showed a ``Global Step`` line (``jobs.observe.progress``), the step is:

- the latest value of the scalar ``global_step`` (a tag whose last path part is ``global_step``, e.g.
  ``train/global_step``) when the files hold one,
- else the highest event step among the scalars.

The total stays ``runner.max_steps`` of the attached config (``progress.config_total``). With ``max_steps: -1``
RLinf counts the steps from ``max_epochs`` times the batches of one epoch, which depend on the dataset's size
(math_qwen2.5-1.5b-grpo-megatron-pipeline.yaml: ``max_epochs: 5``, ``max_steps: -1``): the console cannot know
it, so no total (and no time left) is shown.

Only what the console can read on this machine counts: the local runtime's hostPath mounts
(``jobs.observe.metrics.tensorboard_source`` does the same for the Metrics tab), found here from the rows the sync
already holds, without a query. Cost bounds (the sync runs every few seconds for every running job): a job's
files are looked at once per :data:`READ_INTERVAL` seconds at most; each file is read on from the byte offset
already parsed (a file that shrank is read from its start), at most :data:`MAX_BYTES` per look in all and
:data:`MAX_FILES` files. The per-file offsets live in a module-level map bounded to :data:`MAX_JOBS` jobs (per
process; after a restart the files are read again from the start, in bounded pieces).

TFRecord framing (length, masked CRC32C, data, masked CRC32C) is read here because tensorboard's own record
reader without TensorFlow cannot start at an offset (``PyRecordReader_New`` rejects ``start_offset``); the CRC and
the ``Event`` protobuf are tensorboard's.
"""

from __future__ import annotations

import os
import struct
import time
from dataclasses import dataclass, field
from typing import Any

from jobs.jobspec.mounts import host_path_for
from jobs.observe.run_prefix import uses_run_id, with_run_id

READ_INTERVAL = 30.0  # seconds between two looks at one job's event files
MAX_BYTES = 8 << 20  # bytes parsed per look, over all the job's files
MAX_FILES = 64  # event files followed per job (the newest names first)
MAX_JOBS = 512  # jobs whose file offsets are remembered
MAX_RECORD = 64 << 20  # a record longer than this is no event (a corrupt length): the file is not read further
MAX_DEPTH = 4  # directory levels searched below tensorBoardDir
TAG = "global_step"


@dataclass
class FileState:
    """What was parsed of one event file: ``offset`` (bytes of whole records read), ``step`` (highest event step
    of a scalar, None: none yet), ``global_step`` ((event step, value) of the newest ``global_step`` scalar)."""

    offset: int = 0
    step: int | None = None
    global_step: tuple[int, int] | None = None
    broken: bool = False  # a corrupt length header: the rest of the file is not read


@dataclass
class JobState:
    """One job's followed directory, when it was last looked at (``time.monotonic()``) and its files' states."""

    directory: str
    looked_at: float = float("-inf")
    files: dict[str, FileState] = field(default_factory=dict)
    bytes_read: int = 0  # bytes parsed by the last look (for tests and the bench)


_JOBS: dict[int, JobState] = {}


def forget(job_id: int | None = None) -> None:
    """Drop the remembered offsets of one job (or of all)."""
    if job_id is None:
        _JOBS.clear()
    else:
        _JOBS.pop(job_id, None)


def host_dir(job, tasks: list, rows: dict[int, dict[str, Any]]) -> str | None:
    """The head template's ``tensorBoardDir`` of the current run on this machine, or None (unset, not the local
    runtime, no Header Pod yet for a ``$RLARK_RUN_ID`` path, no hostPath mount, not a directory). ``tasks``: the
    job's Tasks with their cluster attached; ``rows``: Task id -> Pod name -> Pod row. No query."""
    templates = [t for t in job.spec_section.get("tasks") or [] if isinstance(t, dict)]
    ordered = sorted(templates, key=lambda t: t.get("head") is not True)
    tb_dir = next((str(t.get("tensorBoardDir")) for t in ordered if t.get("tensorBoardDir")), "")
    head = next((t for t in tasks if t.head), tasks[0] if tasks else None)
    if not tb_dir or head is None or head.cluster.runtime != "local":
        return None
    if uses_run_id(tb_dir):
        pods = [p for p in rows.get(head.pk, {}).values() if p.ordinal == 0 and p.uid]
        newest = max(pods, key=lambda p: (p.created_at is not None, p.created_at or 0, p.pk or 0), default=None)
        if newest is None:
            return None
        tb_dir = with_run_id(tb_dir, newest.uid)
    host = next((h for t in ordered if (h := host_path_for(t, tb_dir)) is not None), None)
    return host if host is not None and os.path.isdir(host) else None


def event_files(directory: str) -> list[str]:
    """Event files (``*tfevents*``) under ``directory`` (at most :data:`MAX_DEPTH` levels down), the
    :data:`MAX_FILES` newest by name (TensorBoard names carry the creation time), as paths relative to it."""
    found: list[str] = []
    base = directory.rstrip(os.sep).count(os.sep)
    for root, dirs, files in os.walk(directory):
        if root.count(os.sep) - base >= MAX_DEPTH:
            dirs[:] = []
        found.extend(os.path.relpath(os.path.join(root, f), directory) for f in files if "tfevents" in f)
        if len(found) > 16 * MAX_FILES:
            break
    found.sort(key=lambda p: (os.path.basename(p), p))
    return found[-MAX_FILES:]


def read_on(state: JobState) -> None:
    """Parse what was appended to the job's event files since the last look, :data:`MAX_BYTES` in all."""
    budget = MAX_BYTES
    state.bytes_read = 0
    names = event_files(state.directory)
    state.files = {n: state.files.get(n) or FileState() for n in names}
    for name in names:
        if budget <= 0:
            break
        used = _read_file(os.path.join(state.directory, name), state.files[name], budget)
        budget -= used
        state.bytes_read += used


def _read_file(path: str, fs: FileState, budget: int) -> int:
    """Whole records of ``path`` from ``fs.offset``, at most ``budget`` bytes (a half-written record at the end
    waits for the next look). Returns the bytes read."""
    try:
        size = os.path.getsize(path)
        if size < fs.offset:  # the file was replaced or truncated: start over
            fs.offset, fs.step, fs.global_step, fs.broken = 0, None, None, False
        if fs.broken or size == fs.offset:
            return 0
        with open(path, "rb") as f:
            f.seek(fs.offset)
            data = f.read(min(budget, size - fs.offset))
    except OSError:
        return 0
    at = 0
    while len(data) - at >= 12:
        (length,) = struct.unpack_from("<Q", data, at)
        (length_crc,) = struct.unpack_from("<I", data, at + 8)
        if _crc(data[at : at + 8]) != length_crc or length > MAX_RECORD:
            fs.broken = True
            break
        end = at + 12 + length + 4
        if end > len(data):
            if 16 + length > MAX_BYTES and fs.offset + end <= size:
                at = end  # a record no look could hold (an image, say): stepped over unread
            break  # half-written, or past this look's budget
        record = data[at + 12 : at + 12 + length]
        (record_crc,) = struct.unpack_from("<I", data, end - 4)
        if _crc(record) == record_crc:
            _fold_event(fs, record)
        at = end  # a record with a bad data CRC is skipped, as TensorBoard does
    fs.offset += at
    return at


def _crc(data: bytes) -> int:
    from tensorboard.compat.tensorflow_stub.pywrap_tensorflow import masked_crc32c

    return masked_crc32c(data)


def _fold_event(fs: FileState, record: bytes) -> None:
    from google.protobuf.message import DecodeError
    from tensorboard.compat.proto.event_pb2 import Event

    try:
        event = Event.FromString(record)
    except DecodeError:
        return
    if not event.HasField("summary"):
        return
    step = int(event.step)
    for value in event.summary.value:
        number = _scalar(value)
        if number is None:
            continue
        fs.step = step if fs.step is None else max(fs.step, step)
        if value.tag.rsplit("/", 1)[-1] == TAG and 0 <= number <= 10**12:
            if fs.global_step is None or step >= fs.global_step[0]:
                fs.global_step = (step, int(number))


def _scalar(value) -> float | None:
    """A summary value's number: ``simple_value`` (tensorboardX, torch) or a one-element tensor (TF2 style)."""
    if value.HasField("simple_value"):
        return float(value.simple_value)
    if value.HasField("tensor") and (value.tensor.float_val or value.tensor.double_val or value.tensor.int64_val):
        values = list(value.tensor.float_val or value.tensor.double_val or value.tensor.int64_val)
        return float(values[0]) if len(values) == 1 else None
    if value.HasField("tensor") and value.tensor.tensor_content:
        from tensorboard.util import tensor_util

        array = tensor_util.make_ndarray(value.tensor)
        return float(array.item()) if array.size == 1 else None
    return None


def step_of(state: JobState) -> int | None:
    """The job's step from its files: the newest ``global_step`` scalar, else the highest scalar event step."""
    tagged = [fs.global_step for fs in state.files.values() if fs.global_step is not None]
    if tagged:
        return max(tagged)[1]
    steps = [fs.step for fs in state.files.values() if fs.step is not None]
    return max(steps) if steps else None


def seen_step(job, tasks: list, rows: dict[int, dict[str, Any]], clock=time.monotonic) -> list | None:
    """``[step, None]`` from the job's TensorBoard scalars (the total comes from the config), None when there is
    none to read (or the job is neither pending nor running). Looks at the files at most every
    :data:`READ_INTERVAL` seconds (``clock``: monotonic seconds); in between the last look's step is given again."""
    if job.phase not in ("Pending", "Running") or job.stopped:  # the phase before this sync's change
        return None
    state = _JOBS.get(job.pk)
    now = clock()
    if state is not None and now - state.looked_at < READ_INTERVAL:
        step = step_of(state)
        return [step, None] if step is not None else None
    directory = host_dir(job, tasks, rows)
    if directory is None:
        _JOBS.pop(job.pk, None)
        return None
    if state is None or state.directory != directory:
        if len(_JOBS) >= MAX_JOBS:
            _JOBS.pop(next(iter(_JOBS)))
        state = _JOBS[job.pk] = JobState(directory)
    state.looked_at = now
    read_on(state)
    step = step_of(state)
    return [step, None] if step is not None else None


def logged_step(tasks: list, rows: dict[int, dict[str, Any]], signals: dict) -> bool:
    """Whether any Pod's log of the job (its ``tasks``) showed a ``Global Step`` line: in its stored or its newly
    read signals (``signals``: (task id, Pod name) -> signals)."""
    ids = {t.pk for t in tasks}
    if any(isinstance(s, dict) and s.get("step") and key[0] in ids for key, s in signals.items()):
        return True
    return any(
        ((row.container_state or {}).get("signals") or {}).get("step") for i in ids for row in rows.get(i, {}).values()
    )
