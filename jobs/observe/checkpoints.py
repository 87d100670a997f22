"""The Checkpoints tab and the resume from a checkpoint (seed 03: "需要保留或恢复训练时，在停止前按保留并恢复 RLinf 训练
验证 checkpoint 完整性"; the seeds warn that Start "重新创建进程，不等同于从 checkpoint 恢复").

:func:`job_checkpoints` lists every ``global_step_<N>`` of the job's checkpoint directory
(``jobs.jobspec.checkpoints.checkpoint_dir``: the Header's ``checkpointDir``, else the attached RLinf config's) for
the current run and the earlier ones (``Job.runs``). A directory with ``$RLARK_RUN_ID`` is read once per run, with
that run's id in its place (``jobs.observe.run_prefix``); a directory without it is shared by every run, and each
checkpoint is counted to the run that was going when it was written. The scan is
:mod:`jobs.observe.checkpoint_scan` (its docstring defines complete / incomplete / being written): on the local
runtime on this host, through the hostPath mount that covers the directory; elsewhere inside a running Worker whose
hostPath or PVC mount covers it (``jobs.observe.worker_script``). Bounded (the scan's own limits, one exec of at
most :data:`MAX_OUTPUT` bytes and :data:`TIMEOUT` s) and cached :data:`CACHE_SECONDS` per job, run and directory.

:func:`resume` starts a new run of the job from a complete checkpoint (``jobs.control.controller.resume``): the
run script gets ``RLARK_RESUME_DIR`` and, for an RLinf command, ``runner.resume_dir=<path>``
(``jobs.jobspec.checkpoints.resume_run_script``). The checkpoint is read again (not from the cache) before it is
accepted. Nothing here renames, moves or writes a checkpoint.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from django.core.cache import cache
from django.utils import timezone
from django.utils.dateparse import parse_datetime
from django.utils.translation import gettext_noop

from jobs.control import controller
from jobs.jobspec import checkpoints as spec
from jobs.jobspec.mounts import host_path_for, persistent_mount_for
from jobs.observe import checkpoint_scan
from jobs.observe.run_prefix import current_run_id, uses_run_id, with_run_id
from jobs.observe.worker_script import first_answer, running_pods
from rlark_console.language import translate

log = logging.getLogger("rlark.checkpoints")
# On Kubernetes the scan runs inside a running Worker: once the job is stopped no Worker can read the checkpoints
# again, so the last listing a Worker read is kept this long and shown (with its time) and a resume chooses from it;
# a stopped job writes nothing, so what was complete stays complete.
LAST_READ_SECONDS = 7 * 24 * 3600
CACHE_SECONDS = 10
MAX_OUTPUT = 512 << 10  # bytes read from the Worker's scan
TIMEOUT = 30.0  # seconds the Worker's scan may take
MAX_RUNS = 20  # earlier runs whose directories are read
SCRIPT = Path(checkpoint_scan.__file__).read_text(encoding="utf-8")
COMPLETE, INCOMPLETE, BEING_WRITTEN = "complete", "incomplete", "being_written"
STATE_LABELS = {
    COMPLETE: gettext_noop("complete"),
    INCOMPLETE: gettext_noop("incomplete"),
    BEING_WRITTEN: gettext_noop("being written"),
}
REASON_TEXT = {
    "no_actor": gettext_noop("no actor/ sub-directory"),
    "empty": gettext_noop("no files"),
    "empty_file": gettext_noop("zero-byte file {path}: the save was cut off"),
    "temp_file": gettext_noop("leftover temporary file {path}: the save was cut off"),
    "no_dcp_metadata": gettext_noop("{path} has no .metadata: the save was cut off"),
    "not_verified": gettext_noop("too many files to verify within the scan's limits"),
}
LISTING_REASONS = {
    "unset": gettext_noop(
        "This job has no checkpoint directory: set checkpointDir on the Header task, or attach an RLinf config"
        " whose runner.logger.log_path (or runner.output_dir) is an absolute path."
    ),
    "no_mount": gettext_noop("No hostPath or PVC mount covers the checkpoint directory, so it cannot be read."),
    "no_worker": gettext_noop(
        "The checkpoint directory is on the cluster and no running Worker mounts it: the list is shown while a Worker"
        " runs."
    ),
    "no_run": gettext_noop("The current run has no Header Pod yet."),
}


class CheckpointRefused(ValueError):
    """A resume the console refuses; ``msgid`` (English, translated by :meth:`message`) and ``params``; ``field``
    names the request field at fault."""

    field = "checkpoint"

    def __init__(self, msgid: str, **params: Any):
        super().__init__(msgid.format(**params))
        self.msgid, self.params = msgid, params

    def message(self, lang: str) -> str:
        """The reason in ``lang`` (``en`` or ``zh-hans``)."""
        labels = set(STATE_LABELS.values())  # a state parameter is rendered in the same language
        params = {k: translate(v, lang) if v in labels else v for k, v in self.params.items()}
        return translate(self.msgid, lang).format(**params)


class RunScriptRefused(CheckpointRefused):
    """The resume's run script is refused (empty, or larger than the validator's limit)."""

    field = "runScript"


@dataclass
class Checkpoint:
    """One ``global_step_<step>`` directory: ``path`` (container path), the run it belongs to (``run_id``,
    ``attempt``, ``current``), ``size`` (bytes), ``files``, ``written_at`` (newest change, aware UTC), ``state``
    (complete | incomplete | being_written), ``reasons`` (codes of :data:`REASON_TEXT`, ``code:path``), ``list_sha``
    (sha256 of its file list)."""

    path: str
    step: int
    run_id: str
    attempt: int | None
    current: bool
    size: int
    files: int
    written_at: datetime
    state: str
    reasons: list[str] = field(default_factory=list)
    list_sha: str = ""

    def reason_texts(self, lang: str) -> list[str]:
        """The reasons as sentences in ``lang``."""
        out = []
        for reason in self.reasons:
            code, _, path = reason.partition(":")
            out.append(translate(REASON_TEXT.get(code, code), lang).format(path=path))
        return out

    def to_dict(self, lang: str) -> dict[str, Any]:
        """The API shape: ``{path, step, runId, attempt, current, sizeBytes, files, writtenAt (ISO 8601), state,
        stateLabel, reasons: [text], listSha256}``."""
        return {
            "path": self.path,
            "step": self.step,
            "runId": self.run_id,
            "attempt": self.attempt,
            "current": self.current,
            "sizeBytes": self.size,
            "files": self.files,
            "writtenAt": self.written_at.isoformat(),
            "state": self.state,
            "stateLabel": translate(STATE_LABELS[self.state], lang),
            "reasons": self.reason_texts(lang),
            "listSha256": self.list_sha,
        }


@dataclass
class Listing:
    """The job's checkpoints, newest step first within each run, current run first: ``directory`` (as configured;
    may hold ``$RLARK_RUN_ID``), ``source`` (``template`` | ``rlinf`` | ""), ``reason`` (a :data:`LISTING_REASONS`
    code when nothing could be read), ``run_id`` (the current run's), ``truncated`` (a scan limit was reached),
    ``as_of`` (when it was read)."""

    directory: str
    source: str
    reason: str = ""
    run_id: str = ""
    checkpoints: list[Checkpoint] = field(default_factory=list)
    truncated: bool = False
    as_of: datetime | None = None

    def latest_complete(self) -> Checkpoint | None:
        """The complete checkpoint written last (the higher step, then the current run's, on a tie); None when
        there is none."""
        done = [c for c in self.checkpoints if c.state == COMPLETE]
        return max(done, key=lambda c: (c.written_at, c.step, c.current), default=None)

    def find(self, path: str) -> Checkpoint | None:
        """The checkpoint whose container path is ``path`` (a trailing ``/`` ignored)."""
        wanted = path.rstrip("/")
        return next((c for c in self.checkpoints if c.path == wanted), None)

    def to_dict(self, lang: str) -> dict[str, Any]:
        """The API shape: ``{directory, source, reason, reasonText, runId, truncated, asOf, latestComplete (path or
        null), checkpoints: [Checkpoint.to_dict]}``."""
        latest = self.latest_complete()
        return {
            "directory": self.directory,
            "source": self.source,
            "reason": self.reason,
            "reasonText": translate(LISTING_REASONS[self.reason], lang) if self.reason else "",
            "runId": self.run_id,
            "truncated": self.truncated,
            "asOf": self.as_of.isoformat() if self.as_of else None,
            "latestComplete": latest.path if latest else None,
            "checkpoints": [c.to_dict(lang) for c in self.checkpoints],
        }


@dataclass(frozen=True)
class _Run:
    run_id: str
    attempt: int | None
    started: datetime | None
    current: bool


def _runs(job) -> list[_Run]:
    """The current run, then the earlier ones newest first (at most :data:`MAX_RUNS`)."""
    runs = [_Run(current_run_id(job), job.attempt, job.started_at, True)]
    for entry in reversed([r for r in job.runs or [] if isinstance(r, dict)][-MAX_RUNS:]):
        started = parse_datetime(str(entry.get("startedAt") or "")) if entry.get("startedAt") else None
        runs.append(_Run(str(entry.get("runId") or ""), entry.get("attempt"), started, False))
    return runs


def _roots(directory: str, runs: list[_Run]) -> list[tuple[str, _Run | None]]:
    """``(container root, run)`` to scan: one per run with an id when the directory names the run id, else the
    directory itself (``None``: runs told apart by time)."""
    if not uses_run_id(directory):
        return [(directory, None)]
    return [(with_run_id(directory, r.run_id), r) for r in runs if r.run_id]


def _by_time(runs: list[_Run], written: datetime) -> _Run:
    """The run that was going when a checkpoint of a shared directory was written: the newest started before it
    (the oldest run when none was)."""
    started = [r for r in runs if r.started is not None and r.started <= written]
    return max(started, key=lambda r: r.started) if started else runs[-1]


def _templates(job) -> list[dict]:
    templates = [t for t in job.spec_section.get("tasks") or [] if isinstance(t, dict)]
    return sorted(templates, key=lambda t: t.get("head") is not True)


def _scan_local(templates: list[dict], roots: list[str]) -> tuple[dict | None, dict[str, str]]:
    """Scan on this host; ``(result, host root -> container root)``; None when no hostPath covers a root."""
    hosts: dict[str, str] = {}
    for root in roots:
        host = next((h for t in templates if (h := host_path_for(t, root)) is not None), None)
        if host is not None:
            hosts[host] = root
    if not hosts:
        return None, {}
    return checkpoint_scan.scan(list(hosts)), hosts


def _scan_remote(job, templates: list[dict], roots: list[str]) -> tuple[dict | None, str]:
    """Scan inside a running Worker of a template whose hostPath/PVC mount covers the first root; ``(result,
    reason)``."""
    names = [str(t.get("name")) for t in templates if roots and persistent_mount_for(t, roots[0])]
    if not names:
        return None, "no_mount"
    argv = ["python3", "-c", SCRIPT, json.dumps(roots)]
    tasks = job.tasks.filter(template_name__in=names).select_related("cluster")
    result = first_answer(
        running_pods(tasks), argv, checkpoint_scan.MARKER, checkpoint_scan.decode,
        log=log, what="checkpoint scan", timeout=TIMEOUT, max_output=MAX_OUTPUT,
    )  # fmt: skip
    return (result, "") if result is not None else (None, "no_worker")


def _scan(job, directory: str, roots: list[str]) -> tuple[dict | None, dict[str, str], str]:
    """``(scan result, scanned root -> container root, reason)`` through the runtime of the Header's cluster."""
    templates = _templates(job)
    head = job.tasks.select_related("cluster").filter(head=True).first() or job.tasks.select_related("cluster").first()
    if head is not None and head.cluster.runtime != "local":
        result, reason = _scan_remote(job, templates, roots)
        return result, {r: r for r in roots}, reason
    result, hosts = _scan_local(templates, roots)
    return result, hosts, "" if result is not None else "no_mount"


def _cache_key(job, directory: str, runs: list[_Run]) -> str:
    ident = json.dumps([job.pk, job.attempt, directory, [r.run_id for r in runs]])
    return "rlark:checkpoints:" + hashlib.sha256(ident.encode()).hexdigest()


def job_checkpoints(job, *, fresh: bool = False) -> Listing:
    """The job's checkpoints (module docstring); ``fresh`` skips the cache (a resume checks what is on disk now)."""
    directory, source = spec.checkpoint_dir(job.spec_section, job.rlinf_config)
    if not directory:
        return Listing("", "", reason="unset")
    runs = _runs(job)
    roots = _roots(directory, runs)
    listing = Listing(directory, source, run_id=runs[0].run_id)
    if not roots:
        listing.reason = "no_run"
        return listing
    key = _cache_key(job, directory, runs)
    cached = None if fresh else cache.get(key)
    if cached is None:
        result, mapping, reason = _scan(job, directory, [r for r, _run in roots])
        cached = {"result": result, "mapping": mapping, "reason": reason, "asOf": timezone.now().isoformat()}
        if result is not None:
            cache.set(key + ":last", cached, LAST_READ_SECONDS)
        elif reason == "no_worker" and (last := cache.get(key + ":last")) is not None:
            cached = last  # a stopped job on Kubernetes: its checkpoints as the last read saw them (asOf says when)
        cache.set(key, cached, CACHE_SECONDS)
    listing.as_of = parse_datetime(cached["asOf"])
    if cached["result"] is None:
        listing.reason = cached["reason"]
        return listing
    run_of_root = {root: run for root, run in roots}
    for item in cached["result"].get("roots") or []:
        container_root = cached["mapping"].get(item.get("root"), "")
        for c in item.get("checkpoints") or []:
            written = datetime.fromtimestamp(float(c.get("mtime") or 0), tz=UTC)
            run = run_of_root.get(container_root) or _by_time(runs, written)
            listing.checkpoints.append(
                Checkpoint(
                    path=f"{container_root.rstrip('/')}/{os.path.basename(str(c.get('name')))}",
                    step=int(c.get("step") or 0),
                    run_id=run.run_id,
                    attempt=run.attempt,
                    current=run.current,
                    size=int(c.get("size") or 0),
                    files=int(c.get("files") or 0),
                    written_at=written,
                    state=str(c.get("state")) if c.get("state") in STATE_LABELS else INCOMPLETE,
                    reasons=[str(r)[:300] for r in c.get("reasons") or []],
                    list_sha=str(c.get("listSha") or ""),
                )
            )
    listing.checkpoints.sort(key=lambda c: (not c.current, -(c.attempt or 0), -c.step))
    listing.truncated = bool(cached["result"].get("truncated"))
    return listing


# --- resume -------------------------------------------------------------------------------------------------------


def choose(job, choice: str) -> Checkpoint:
    """The complete checkpoint ``choice`` names (a container path, or ``latest``), read afresh. Raises
    :class:`CheckpointRefused` when there is none, it is unknown, incomplete or being written."""
    choice = str(choice or "").strip()
    if not choice or len(choice) > spec.MAX_PATH_CHARS:
        raise CheckpointRefused(gettext_noop('Name a checkpoint: its path, or "latest".'))
    listing = job_checkpoints(job, fresh=True)
    if choice == "latest":
        latest = listing.latest_complete()
        if latest is None:
            raise CheckpointRefused(gettext_noop("This job has no complete checkpoint to resume from."))
        return latest
    found = listing.find(choice)
    if found is None:
        raise CheckpointRefused(gettext_noop("{path} is not a checkpoint of this job."), path=choice)
    if found.state != COMPLETE:
        raise CheckpointRefused(
            gettext_noop("{path} is {state}: only a complete checkpoint can be resumed from."),
            path=found.path,
            state=STATE_LABELS[found.state],
        )
    return found


def resume_script(job, checkpoint: Checkpoint) -> str:
    """The Header's run script as the resume would run it (``runner.resume_dir`` appended for an RLinf command)."""
    run_script = str(spec.header_template(job.spec_section).get("runScript") or "")
    return spec.resume_run_script(run_script, checkpoint.path)


def resume(job, choice: str, run_script: str | None = None, actor=None, request=None):
    """Start a new run of ``job`` from the complete checkpoint ``choice`` (:func:`choose`) with ``run_script`` (the
    user's edit; :func:`resume_script` when None). Returns the job. Raises :class:`CheckpointRefused` (also for a
    run script that is empty or larger than the validator's limit)."""
    checkpoint = choose(job, choice)
    script = resume_script(job, checkpoint) if run_script is None else str(run_script)
    if not script.strip():
        raise RunScriptRefused(gettext_noop("The run script is empty."))
    if len(script.encode()) > controller.MAX_RUN_SCRIPT_BYTES:
        raise RunScriptRefused(
            gettext_noop("The run script is larger than {limit} bytes."), limit=controller.MAX_RUN_SCRIPT_BYTES
        )
    return controller.resume(
        job,
        directory=checkpoint.path,
        step=checkpoint.step,
        from_run=checkpoint.run_id,
        run_script=script,
        actor=actor,
        request=request,
    )
