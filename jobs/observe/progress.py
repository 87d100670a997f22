"""Progress at a glance: the step a job's training reached, its total, its rate and what is left.

The figure comes from what the status sync already reads, with no change to the training script and no log read
of its own: the sync's per-Pod log scan (``jobs.observe.sync_fetch``) hands every newly read piece of a Worker's
log to :func:`fold_step`, which keeps the last ``Global Step`` line's step (and total) in the Pod's stored
signals; the sync's diff (``jobs.observe.sync_rows.diff``) turns them into the Job's ``progress_*`` fields with
:func:`job_fields`. Pages, the API and the CLI read those fields only (:func:`progress_of`, :func:`progress_text`).

Lines understood (rlinf.md 7, "Log lines RLark Console can match"; seed 02-confirm-job-running, check 5):

- embodied RLinf's Metric Table ``│ Global Step:    1/<max_steps> │ Progress: … │   0.1%``;
- reasoning/SFT's tqdm bar ``Global Step:  10%|█   | 12/120 [00:10<01:30, 1.2it/s]``;
- the demo workload's ``Global Step: k/N | ...`` and a bare ``Global Step 7 | loss=...``.

The total is the line's own (``STEPS`` overrides ``runner.max_steps``, rlinf.md 4), else ``runner.max_steps`` of
the attached RLinf config (a value <= 0 means "from max_epochs", which gives no step count: unknown). The rate
(steps per minute) is measured between two syncs that saw the step move, smoothed; without a total or a rate no
time left is shown, never a made-up one.

A job whose logs never showed a ``Global Step`` line takes its step from its TensorBoard scalars instead
(``jobs.observe.progress_tensorboard``: the ``global_step`` scalar, else the highest event step).
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.utils.translation import gettext as _

from jobs.jobspec.rlinf import load_config
from jobs.observe import progress_tensorboard

MARK = "Global Step"
MAX_STEP = 10**12  # a bigger number in a log line is not a step count
MAX_LINE = 1000  # characters of the last progress line looked at
MAX_TRIES = 64  # "Global Step" mentions without a number looked past, from the end, before giving up
SMOOTHING = 0.5  # weight of the newest measured rate against the stored one
MIN_RATE_SECONDS = 5.0  # a rate is measured over at least this window: two syncs close together give none
_NUM = r"(\d{1,13})"
TQDM = re.compile(r"Global Step:?\s*\d{1,3}%\|[^|\n]{0,200}\|\s*" + _NUM + r"\s*/\s*" + _NUM)
SLASH = re.compile(r"Global Step:?\s*" + _NUM + r"\s*/\s*" + _NUM)
BARE = re.compile(r"Global Step:?\s*" + _NUM + r"(?![\d%])")
_BREAKS = re.compile(r"[\n\r]")


def parse_step(text: str) -> tuple[int, int | None] | None:
    """The last ``Global Step`` line of ``text``: ``(step, total or None)``; None when it has no such line (among
    the last :data:`MAX_TRIES` mentions), or the step is out of bounds (> 10**12). A total of 0 or below the step
    is no total."""
    end = len(text)
    for _attempt in range(MAX_TRIES):
        at = text.rfind(MARK, 0, end)
        if at < 0:
            break
        stop = _BREAKS.search(text, at, at + MAX_LINE)
        line = text[at : stop.start() if stop else at + MAX_LINE]
        found = _match(line)
        if found is not None:
            return found
        end = at  # a "Global Step" without a number (a header): look further back
    return None


def _match(line: str) -> tuple[int, int | None] | None:
    m = TQDM.match(line) or SLASH.match(line)
    if m is not None:
        step, total = int(m[1]), int(m[2])
        if step > MAX_STEP or total > MAX_STEP:
            return None
        return step, (total if total >= max(step, 1) else None)
    m = BARE.match(line)
    if m is None or int(m[1]) > MAX_STEP:
        return None
    return int(m[1]), None


def fold_step(signals: dict[str, Any], text: str) -> dict[str, Any]:
    """``signals`` (a Pod's merged log signals) with ``"step": [step, total|None]`` of the last ``Global Step``
    line in the newly read ``text``; the stored one stays when ``text`` has none. Returns ``signals``."""
    if MARK in text and (found := parse_step(text)) is not None:
        signals["step"] = list(found)
    return signals


_TOTALS: dict[str, int | None] = {}  # digest of a config text -> its total (the texts themselves are not kept)
MAX_TOTALS = 256


def config_total(config: str) -> int | None:
    """``runner.max_steps`` of an attached RLinf config (YAML text) when it is a positive integer, else None
    (none attached, invalid, or ``-1``: the steps then follow ``max_epochs`` and the data, unknown here). Each
    text is parsed once per process (at most :data:`MAX_TOTALS` remembered, by digest)."""
    if not config.strip():
        return None
    key = hashlib.blake2b(config.encode("utf-8", "replace"), digest_size=16).hexdigest()
    if key not in _TOTALS:
        if len(_TOTALS) >= MAX_TOTALS:
            _TOTALS.clear()
        _TOTALS[key] = _read_total(config)
    return _TOTALS[key]


def _read_total(config: str) -> int | None:
    data, problems = load_config(config)
    runner = data.get("runner") if data and not problems else None
    value = runner.get("max_steps") if isinstance(runner, dict) else None
    if isinstance(value, str) and value.strip().isdigit():
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int) or not 0 < value <= MAX_STEP:
        return None
    return value


def _seen_step(tasks: list, pods_by_task: dict[str, list], signals: dict[tuple[int, str], dict]) -> list | None:
    """The highest ``[step, total]`` among the job's Pods whose logs were just read (the Header's first)."""
    best = None
    for task in sorted(tasks, key=lambda t: not t.head):
        for info in pods_by_task.get(task.name, []):
            step = (signals.get((task.pk, info.name)) or {}).get("step")
            if isinstance(step, list) and len(step) == 2 and (best is None or step[0] > best[0]):
                best = step
    return best


def job_fields(
    job, tasks: list, pods_by_task: dict[str, list], signals: dict, now: datetime, rows: dict | None = None
) -> dict[str, Any]:
    """The ``progress_*`` fields of ``job`` that the log signals just read change (``{}``: nothing new).

    ``tasks``: the job's Tasks; ``pods_by_task``: Task name -> reported Pods; ``signals``: (task id, Pod name) ->
    signals just read; ``rows``: Task id -> Pod name -> Pod row (given: a job whose logs never showed a
    ``Global Step`` line takes its step from its TensorBoard scalars, ``jobs.observe.progress_tensorboard``).
    A lower step than the stored one is a new run: its rate starts over. The rate, in steps per
    minute, is the step's advance since the stored base (``progress_base_step`` at ``progress_base_at``) over the
    minutes between, averaged with the stored one; a window under :data:`MIN_RATE_SECONDS` (two syncs that
    overlapped, or a burst of log lines read twice in a row) moves the step but keeps the base and the rate."""
    seen = _seen_step(tasks, pods_by_task, signals)
    if seen is None and rows is not None and not progress_tensorboard.logged_step(tasks, rows, signals):
        seen = progress_tensorboard.seen_step(job, tasks, rows)
    if seen is None:
        return {}
    step, total = int(seen[0]), seen[1]
    total = total if total is not None else config_total(job.rlinf_config or "")
    old = job.progress_step
    if old == step and job.progress_total == total:
        return {}
    fields: dict[str, Any] = {"progress_step": step, "progress_total": total}
    if old == step:
        return fields
    fields["progress_updated_at"] = now
    base_step = job.progress_base_step if job.progress_base_step is not None else old
    base_at = job.progress_base_at or job.progress_updated_at
    if old is None or base_step is None or base_at is None or step < old:  # a first step, or a new run
        fields.update(progress_rate=None, progress_base_step=step, progress_base_at=now)
        return fields
    seconds = (now - base_at).total_seconds()
    if seconds >= MIN_RATE_SECONDS and step > base_step:
        measured = (step - base_step) / (seconds / 60)
        rate = measured if job.progress_rate is None else SMOOTHING * measured + (1 - SMOOTHING) * job.progress_rate
        fields.update(progress_rate=rate, progress_base_step=step, progress_base_at=now)
    return fields


@dataclass(frozen=True)
class Progress:
    """A job's progress as the pages, the API and the CLI show it: step, total (None: unknown), rate in steps per
    minute (None: unknown), seconds left (None unless running with a total and a rate), when the step was seen."""

    step: int
    total: int | None
    rate: float | None
    eta_seconds: int | None
    updated_at: datetime | None
    running: bool = True  # the job runs now: only then is a rate shown in the text

    def to_dict(self) -> dict[str, Any]:
        """The API's ``progress`` object: ``{step, total, ratePerMinute, etaSeconds, updatedAt, text}``."""
        return {
            "step": self.step,
            "total": self.total,
            "ratePerMinute": round(self.rate, 3) if self.rate is not None else None,
            "etaSeconds": self.eta_seconds,
            "updatedAt": self.updated_at,
            "text": text_of(self),
        }


def progress_of(job) -> Progress | None:
    """``job``'s stored progress, or None before its first step was seen. No query."""
    if job.progress_step is None:
        return None
    step, total, rate = job.progress_step, job.progress_total, job.progress_rate
    eta = None
    running = job.phase == "Running" and not job.stopped
    if running and total is not None and rate and rate > 0 and step < total:
        eta = round((total - step) / rate * 60)
    return Progress(step, total, rate, eta, job.progress_updated_at, running)


def _number(n: int) -> str:
    return f"{n:,}"


def rate_text(rate: float) -> str:
    """``3.1 steps/min`` (two decimals under one step a minute); zh ``3.1 步/分钟``."""
    shown = f"{rate:.1f}" if rate >= 1 else f"{rate:.2f}"
    return _("%(rate)s steps/min") % {"rate": shown}


def eta_text(seconds: int) -> str:
    """``2 h 10 m`` / ``10 m`` / ``3 d 4 h`` / ``under 1 m`` (zh ``2 小时 10 分`` ...); to the nearest minute."""
    minutes = round(seconds / 60)
    if seconds < 60:
        return _("under 1 m")
    days, rest = divmod(minutes, 1440)
    hours, mins = divmod(rest, 60)
    if days:
        return _("%(d)d d %(h)d h") % {"d": days, "h": hours}
    if hours:
        return _("%(h)d h %(m)d m") % {"h": hours, "m": mins}
    return _("%(m)d m") % {"m": mins}


def text_of(progress: Progress) -> str:
    """``step 1,200 / 10,000 · 2 h 10 m left``; without a total ``step 1,200 · 3.1 steps/min`` (the rate only
    while the job runs); in the active language (zh ``第 1,200 / 10,000 步 · 剩余 2 小时 10 分``)."""
    if progress.total is not None:
        text = _("step %(step)s / %(total)s") % {"step": _number(progress.step), "total": _number(progress.total)}
        if progress.eta_seconds is not None:
            return _("%(progress)s · %(eta)s left") % {"progress": text, "eta": eta_text(progress.eta_seconds)}
        return text
    text = _("step %(step)s") % {"step": _number(progress.step)}
    if progress.rate and progress.running:
        return f"{text} · {rate_text(progress.rate)}"
    return text


def progress_text(job) -> str:
    """The one line the job list and the Overview show for ``job``; "" before its first step. No query."""
    progress = progress_of(job)
    return text_of(progress) if progress is not None else ""


def percent_of(job) -> int | None:
    """0..100 of the total for a progress bar, or None when the total is unknown."""
    if job.progress_step is None or not job.progress_total:
        return None
    return min(100, int(100 * job.progress_step / job.progress_total))
