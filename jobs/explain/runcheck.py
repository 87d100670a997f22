"""The five-point run check of seed 02-confirm-job-running, with evidence, and its Markdown run record.

Statuses: ``met`` / ``not_met`` / ``to_confirm`` = 符合预期 / 未符合 / 待确认 (seed 02). The five checks:

1. Job created and config matches the stored YAML: the Tasks the controller derived equal ``spec.tasks[]``
   (names, replicas, head, rank start; ``jobs.jobspec.layout.task_layout``), and the Job is not stopped.
2. Pods as planned: per role actual Pods = replicas, every Pod on a node whose labels match the role's
   ``nodeSelector``, header exactly 1 Pod, total = ``cluster.num_nodes`` when an RLinf config is attached, no
   unexplained Pending, failure or restart.
3. Ray formed: every Worker logged ``RLINF_NODE_RANK: <n>`` equal to its expected rank (in ``0..total-1``) and
   connected (``Head is reachable at ...``), the head's check counted the expected nodes (``Cluster is ready: A
   nodes available (required: N).``), no ``Warning: Ray cluster check failed, proceeding anyway.``, the run script
   started (upstream-rlark 5; rlinf.md 3).
4. The application reported its versions/config: every user pattern matched a log line (default RLinf's ``RLinf is
   running on a cluster with N nodes``, whose N must equal ``cluster.num_nodes``).
5. Progress and persisted output: the progress pattern (default ``Global Step``) appeared, and the output path
   exists and is readable (local runtime: resolved through the role's hostPath mounts; otherwise to confirm).

Settings per Job (``Job.run_check`` JSON; :func:`settings_of`): ``progress_pattern``, ``app_patterns`` (list),
``output_path`` (container path, ``*`` globs allowed) and ``max_wait_minutes`` (after it, missing evidence is
"not met" instead of "to confirm"). Evidence never contains environment values or secrets (:func:`redact`).
"""

from __future__ import annotations

import hashlib
import os
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from django.utils import translation
from django.utils.translation import gettext as _
from django.utils.translation import gettext_noop

from clusters.models import Node
from clusters.selectors import matches, template_selector
from jobs.explain import output_probe, output_scan
from jobs.explain.diagnosis import stage_label
from jobs.jobspec.layout import display_role_of, main_container, task_layout
from jobs.jobspec.mounts import host_path_for, persistent_mount_for
from jobs.jobspec.rlinf import num_nodes_of
from jobs.observe import log_scans
from jobs.observe.headline import worker_phase_of
from jobs.observe.log_markers import RLINF_CLUSTER, LogScan, scan_log
from jobs.observe.run_prefix import run_path
from jobs.observe.status import pod_ready
from rlark_console import language, pagetime

MET = "met"
NOT_MET = "not_met"
TO_CONFIRM = "to_confirm"

# status -> English msgid; the zh_Hans catalog of ``jobs`` has seed 02's words (符合预期 / 未符合 / 待确认).
STATUS_TEXT = {MET: gettext_noop("Met"), NOT_MET: gettext_noop("Not met"), TO_CONFIRM: gettext_noop("To confirm")}

# Row titles of the seed 02 record template as English msgids; the zh_Hans catalog has the template's exact titles.
CHECK_TITLES = [
    gettext_noop("Job created and configuration matches"),
    gettext_noop("Pod count and nodes correct"),
    gettext_noop("Ray started as expected"),
    gettext_noop("Application and configuration versions match"),
    gettext_noop("Workload progressing and output persisted"),
    gettext_noop("Result saved and next steps decided"),
]

DEFAULT_SETTINGS: dict[str, Any] = {
    "progress_pattern": "Global Step",
    "app_patterns": [r"RLinf is running on a cluster with \d+ nodes"],
    "output_path": "",
    "max_wait_minutes": 30,
}
MAX_WAIT_LIMIT = 7 * 24 * 60
MAX_PATTERN_LEN = 500
HASH_LIMIT = 256 * 2**20  # bytes read to hash one output file
# (template name, container path) -> output_scan.scan's result read inside a running Worker, or None
OutputProbe = Callable[[str, str], "dict | None"]


def phase_label(phase: str) -> str:
    """A Job/Pod phase (``Running``, ...) in the active language, as the pages show it (``jobs.models.Phase``
    labels)."""
    return _(phase) if phase else phase


def status_label(status: str, lang: str = "zh-hans") -> str:
    """The word for ``status`` (``met`` ...) in ``lang``."""
    return language.translate(STATUS_TEXT[status], lang)


def check_title(number: int, lang: str = "zh-hans") -> str:
    """The title of check ``number`` (1..6) in ``lang``."""
    return language.translate(CHECK_TITLES[number - 1], lang)


class SettingsError(ValueError):
    """Invalid run check settings; ``field`` names the setting."""

    def __init__(self, field_name: str, message: str) -> None:
        super().__init__(message)
        self.field = field_name


def settings_of(raw: dict[str, Any] | None) -> dict[str, Any]:
    """The effective settings: ``DEFAULT_SETTINGS`` overlaid with the stored valid values."""
    out = dict(DEFAULT_SETTINGS)
    for key, value in (raw or {}).items():
        if key in out and value not in (None, ""):
            out[key] = value
    return out


def clean_settings(data: dict[str, Any]) -> dict[str, Any]:
    """Validate user input into the stored shape; raises :class:`SettingsError`.

    ``app_patterns`` may be a list or newline-separated text; every pattern must be a valid regex of at most
    ``MAX_PATTERN_LEN`` characters; ``max_wait_minutes`` an integer 1..10080.
    """
    out: dict[str, Any] = {}
    progress = str(data.get("progress_pattern") or "").strip()
    if len(progress) > MAX_PATTERN_LEN:
        raise SettingsError("progress_pattern", "pattern too long")
    if progress:
        _compile("progress_pattern", progress)
    out["progress_pattern"] = progress or DEFAULT_SETTINGS["progress_pattern"]
    patterns = data.get("app_patterns")
    if isinstance(patterns, str):
        patterns = patterns.splitlines()
    patterns = [str(p).strip() for p in (patterns or []) if str(p).strip()]
    for p in patterns:
        if len(p) > MAX_PATTERN_LEN:
            raise SettingsError("app_patterns", "pattern too long")
        _compile("app_patterns", p)
    out["app_patterns"] = patterns or list(DEFAULT_SETTINGS["app_patterns"])
    output = str(data.get("output_path") or "").strip()
    if output and not output.startswith("/"):
        raise SettingsError("output_path", "the output path must be an absolute container path")
    if ".." in output.split("/"):
        raise SettingsError("output_path", "the output path must not contain ..")
    out["output_path"] = output
    wait = data.get("max_wait_minutes", DEFAULT_SETTINGS["max_wait_minutes"])
    try:
        wait = int(wait)
    except (TypeError, ValueError):
        raise SettingsError("max_wait_minutes", "enter a whole number of minutes") from None
    if not 1 <= wait <= MAX_WAIT_LIMIT:
        raise SettingsError("max_wait_minutes", f"between 1 and {MAX_WAIT_LIMIT} minutes")
    out["max_wait_minutes"] = wait
    return out


def _compile(field_name: str, pattern: str) -> re.Pattern[str]:
    try:
        return re.compile(pattern)
    except re.error as exc:
        raise SettingsError(field_name, f"invalid regular expression: {exc}") from None


SECRET_RE = re.compile(
    r"(?i)((?:password|passwd|pwd|secret|token|access[_-]?key|secret[_-]?key|api[_-]?key|private[_-]?key|"
    r"authorization)\s*[=:]\s*)(\"[^\"]*\"|'[^']*'|\S+)"
)


def redact(text: str, secrets: list[str] | None = None) -> str:
    """Mask ``key=value`` secrets and any of ``secrets`` (e.g. the job's env values) in one evidence line."""
    out = SECRET_RE.sub(lambda m: m.group(1) + "***", text)
    for value in sorted(secrets or [], key=len, reverse=True):
        if value and len(value) >= 4:
            out = out.replace(value, "***")
    return out[:500]


# --- input --------------------------------------------------------------------------------------------------


@dataclass
class TaskView:
    """A derived Task: ``template``/``role`` names, planned ``replicas``, ``rank_start``, ``selector``."""

    name: str
    template: str
    role: str
    head: bool
    replicas: int
    rank_start: int
    selector: dict[str, str] = field(default_factory=dict)
    cluster: str = ""


@dataclass
class PodRow:
    """A Worker Pod as synced: ``task`` is the Task name."""

    name: str
    task: str
    ordinal: int
    node: str = ""
    ip: str = ""
    phase: str = ""
    ready: bool = False
    restarts: int = 0
    reason: str = ""


@dataclass
class OutputCheck:
    """Result of checking the output path: ``state`` ``ok`` | ``missing`` | ``unreadable`` | ``unsupported`` |
    ``unset``; for ``ok``: ``files`` (count), ``sample`` (container path of the newest file), ``size`` (bytes)
    and ``sha256`` of that file (first ``HASH_LIMIT`` bytes)."""

    state: str
    path: str = ""
    files: int = 0
    sample: str = ""
    size: int = 0
    sha256: str = ""
    detail: str = ""


@dataclass
class RunCheckInput:
    """Everything the checks read (plain data; :func:`gather` builds it from the database and runtime)."""

    job: str
    phase: str
    stopped: bool
    created_at: datetime | None
    started_at: datetime | None
    finished_at: datetime | None
    now: datetime
    document: dict[str, Any]
    tasks: list[TaskView]
    pods: list[PodRow]
    node_labels: dict[str, dict[str, str]]
    num_nodes: int | None
    logs: dict[str, str]
    settings: dict[str, Any]
    output: OutputCheck
    secrets: list[str] = field(default_factory=list)
    scans: dict[str, LogScan] | None = None  # stored scans by Pod name (``log_scans``); None: scan ``logs``
    scans_as_of: datetime | None = None  # when the oldest of ``scans`` read its log
    refreshing: bool = False  # some scans are older than the max age; a background refresh was asked for


@dataclass
class CheckResult:
    """One check: ``number`` 1..6, ``status``, localized ``evidence`` lines, ``checked_at``."""

    number: int
    status: str
    evidence: list[str]
    checked_at: datetime

    def title(self, lang: str = "zh-hans") -> str:
        return check_title(self.number, lang)

    def label(self, lang: str = "zh-hans") -> str:
        return status_label(self.status, lang)

    def to_dict(self, lang: str = "zh-hans") -> dict[str, Any]:
        return {
            "number": self.number,
            "title": self.title(lang),
            "status": self.status,
            "statusLabel": self.label(lang),
            "evidence": self.evidence,
            "checkedAt": self.checked_at.isoformat(),
        }


def _waited_out(data: RunCheckInput) -> bool:
    """True when missing evidence can no longer come: the job ended/stopped or the max wait passed."""
    if data.phase in ("Succeeded", "Failed", "Stopped") or data.stopped:
        return True
    start = data.started_at or data.created_at
    if start is None:
        return False
    return (data.now - start).total_seconds() > int(data.settings["max_wait_minutes"]) * 60


def _missing(data: RunCheckInput) -> str:
    return NOT_MET if _waited_out(data) else TO_CONFIRM


# --- the checks: each one's evidence is in the active language (run_checks activates the one asked for) ----------


def check_job(data: RunCheckInput) -> tuple[str, list[str]]:
    """Check 1."""

    ev = [
        _("Job {job} exists (created {created}), phase {phase}.").format(
            job=data.job, created=_ts(data.created_at), phase=phase_label(data.phase)
        )
    ]
    layout = task_layout(data.document)
    templates = {
        str(t.get("name")): t for t in (data.document.get("spec") or {}).get("tasks") or [] if isinstance(t, dict)
    }
    tasks = {t.template: t for t in data.tasks}
    problems = []
    for item in layout:
        task = tasks.get(item.template_name)
        if task is None:
            problems.append(_("Template {t} has no Task.").format(t=item.template_name))
            continue
        diffs = []
        for label, want, got in (
            ("replicas", item.replicas, task.replicas),
            ("head", item.head, task.head),
            ("rankStart", item.rank_start, task.rank_start),
        ):
            if want != got:
                diffs.append(f"{label} {got} != {want}")
        if diffs:
            problems.append(f"{task.name}: " + ", ".join(diffs))
        template = templates.get(item.template_name, {})
        container = main_container(template)
        resources = (container.get("resources") or {}).get("limits") or {}
        gpus = resources.get("nvidia.com/gpu", 0)
        env_names = [str(e.get("name")) for e in container.get("env") or [] if isinstance(e, dict)]
        ev.append(
            _(
                "{role} ({task}): image {image}, selector {sel}, replicas {rep}, GPU {gpu}, {mounts} mounts, "
                "{env} env variables{head}; matches the stored YAML."
            ).format(
                role=display_role_of(template) or item.template_name,
                task=item.task_name,
                image=container.get("image") or "-",
                sel=",".join(f"{k}={v}" for k, v in (template.get("nodeSelector") or {}).items()) or "-",
                rep=item.replicas,
                gpu=gpus,
                mounts=len(container.get("volumeMounts") or []),
                env=len(env_names),
                head=(_(", header (with run script)") if item.head else ""),
            )
        )
    extra = set(tasks) - {i.template_name for i in layout}
    for name in sorted(extra):
        problems.append(_("Task {t} is not in the stored YAML.").format(t=name))
    if not data.tasks:
        return TO_CONFIRM, ev + [_("The controller has not created the Tasks yet.")]
    if problems:
        return NOT_MET, ev[:1] + problems
    if data.stopped or data.phase == "Stopped":
        return NOT_MET, ev + [_("The job has been stopped.")]
    return MET, ev


def check_pods(data: RunCheckInput) -> tuple[str, list[str]]:
    """Check 2."""
    ev: list[str] = []
    bad: list[str] = []
    pending: list[str] = []
    by_task: dict[str, list[PodRow]] = {}
    for p in data.pods:
        by_task.setdefault(p.task, []).append(p)
    total = 0
    ended = data.phase in ("Succeeded", "Failed", "Stopped")
    for task in data.tasks:
        pods = sorted(by_task.get(task.name, []), key=lambda p: p.ordinal)
        total += len(pods)
        if len(pods) != task.replicas:
            msg = _("Role {role}: {n} actual Pods, {want} expected.").format(
                role=task.role, n=len(pods), want=task.replicas
            )
            (pending if len(pods) < task.replicas else bad).append(msg)
        for p in pods:
            ev.append(
                _("{role} / {pod}: node {node}, IP {ip}, phase {phase}, restarts: {r}.").format(
                    role=task.role,
                    pod=p.name,
                    node=p.node or "-",
                    ip=p.ip or "-",
                    phase=phase_label(worker_phase_of(data.phase, data.stopped, p.phase)) if p.phase else "-",
                    r=p.restarts,
                )
            )

            if p.node and not matches(task.selector, data.node_labels.get(p.node, {})):
                bad.append(
                    _("{pod} runs on node {node}, which does not match selector {sel}.").format(
                        pod=p.name, node=p.node, sel=",".join(f"{k}={v}" for k, v in task.selector.items())
                    )
                )
            if not p.node:
                pending.append(_("{pod} is not scheduled on a node yet.").format(pod=p.name))
            elif p.phase == "Failed":
                bad.append(_("{pod} failed ({r}).").format(pod=p.name, r=p.reason or "-"))
            elif p.phase == "Pending" or (p.phase == "Running" and not p.ready and not ended):
                pending.append(
                    _("{pod} is not ready yet ({phase}).").format(
                        pod=p.name, phase=phase_label(worker_phase_of(data.phase, data.stopped, p.phase))
                    )
                )
            if p.restarts:
                bad.append(_("{pod} restarted {r} times; explain why.").format(pod=p.name, r=p.restarts))
    heads = [p for t in data.tasks if t.head for p in by_task.get(t.name, [])]
    head_tasks = [t for t in data.tasks if t.head]
    if len(head_tasks) != 1 or len(heads) != 1:
        (bad if len(heads) > 1 or len(head_tasks) != 1 else pending).append(
            _("The header has {n} actual Pods; it must have 1.").format(n=len(heads))
        )
    else:
        ev.append(_("The header has exactly 1 Pod: {pod}.").format(pod=heads[0].name))
    if data.num_nodes is not None:
        line = _("{n} actual Pods in total; RLinf cluster.num_nodes = {want}.").format(n=total, want=data.num_nodes)
        (ev if total == data.num_nodes else (pending if total < data.num_nodes else bad)).append(line)
    if not data.pods:
        return _missing(data) if data.tasks else TO_CONFIRM, [_("No Pod details yet, waiting for sync.")]
    if bad:
        return NOT_MET, bad + ev
    if pending:
        return _missing(data), pending + ev
    return MET, ev


def log_patterns(settings: dict[str, Any]) -> dict[str, str]:
    """The user regexes checks 4 and 5 look for in the logs: ``app<i>`` and ``progress``."""
    patterns = {f"app{i}": p for i, p in enumerate(settings.get("app_patterns") or [])}
    patterns["progress"] = settings.get("progress_pattern") or DEFAULT_SETTINGS["progress_pattern"]
    return patterns


def job_log_patterns(job) -> dict[str, str]:
    """:func:`log_patterns` of ``job``'s saved Run check settings: what its stored log scans track, so a scan made
    by the Diagnosis tab or the background refresh serves the Run check too."""
    return log_patterns(settings_of(job.run_check))


def _scans(data: RunCheckInput, patterns: dict[str, str] | None = None) -> dict[str, LogScan]:
    if data.scans is not None:
        return {p.name: data.scans.get(p.name) or LogScan() for p in data.pods}
    return {p.name: scan_log(data.logs.get(p.name, ""), patterns) for p in data.pods}


def check_ray(data: RunCheckInput, scans: dict[str, LogScan]) -> tuple[str, list[str]]:
    """Check 3."""
    total = sum(t.replicas for t in data.tasks)
    ev: list[str] = []
    bad: list[str] = []
    missing: list[str] = []
    pods = {(p.task, p.ordinal): p for p in data.pods}
    for task in data.tasks:
        for ordinal in range(task.replicas):
            expected = task.rank_start + ordinal
            pod = pods.get((task.name, ordinal))
            name = pod.name if pod else f"{task.name}-{ordinal}"
            scan = scans.get(name) if pod else None
            if scan is None or not scan.markers:
                missing.append(
                    _("Worker {pod} ({role}) has no start-up log and has not joined the Ray cluster.").format(
                        pod=name, role=task.role
                    )
                )
                continue
            rank = scan.rank
            if rank is None or rank != expected or not 0 <= rank < total:
                bad.append(
                    _("Worker {pod} logged RLINF_NODE_RANK {rank}, expected {want} (range 0-{last}).").format(
                        pod=name, rank="-" if rank is None else rank, want=expected, last=total - 1
                    )
                )
                continue
            if task.head:
                ev.append(_("Header {pod}: RLINF_NODE_RANK: {rank}.").format(pod=name, rank=rank))
                continue
            exit_marker = scan.last("worker_exit")
            reach = scan.last("head_reachable")
            if exit_marker is not None and exit_marker.failed:
                bad.append(_("Worker {pod}'s Ray process exited: {line}").format(pod=name, line=exit_marker.text))
            elif reach is not None or (
                scan.has("connect") and scan.head_wait_attempts == 0 and not scan.has("head_ip")
            ):
                joined = reach.text if reach is not None else scan.last("connect").text
                ev.append(
                    _("Worker {pod}: RLINF_NODE_RANK: {rank} (expected {rank}), {line}").format(
                        pod=name, rank=rank, line=joined
                    )
                )
            else:
                last = scan.last_stage
                missing.append(
                    _("Worker {pod} ({role}) has not connected to the Ray head; last stage: {stage}.").format(
                        pod=name,
                        role=task.role,
                        stage=f"{stage_label(last.key, language.lang())} ({last.text})" if last else "-",
                    )
                )
    head_pod = next((p for t in data.tasks if t.head for p in data.pods if p.task == t.name), None)
    head_scan = scans.get(head_pod.name) if head_pod else None
    if head_scan is not None:
        failed = head_scan.first("cluster_check_failed")
        if failed is not None:
            bad.append(_("Header log: {line}").format(line=failed.text))
        if head_scan.check_passed and head_scan.check_required is not None:
            line = (
                f"Cluster is ready: {head_scan.check_alive_max} nodes available (required: {head_scan.check_required})."
            )
            if head_scan.check_required != total:
                bad.append(
                    _("The header checked for {n} nodes but {total} Workers are expected.").format(
                        n=head_scan.check_required, total=total
                    )
                )
            else:
                ev.append(_("Header node check: {line}").format(line=line))
        elif failed is None:
            missing.append(_("The header has not confirmed the node count yet."))
        if head_scan.rlinf_waiting and head_scan.rlinf_waiting[1] < head_scan.rlinf_waiting[0]:
            formed = head_scan.rlinf_cluster_line
            if formed is None or formed[0] < (head_scan.rlinf_waiting_line or (0, ""))[0]:
                bad.append(_("RLinf log: {line}").format(line=head_scan.rlinf_waiting_line[1]))
        run = head_scan.first("run_script") or head_scan.first("no_run_script")
        if run is not None:
            ev.append(_("The header's run script started: {line}").format(line=run.text))
        else:
            missing.append(_("The run script has not started yet."))
    if bad:
        return NOT_MET, bad + missing + ev
    if missing:
        return _missing(data), missing + ev
    return MET, ev


def check_app(data: RunCheckInput, scans: dict[str, LogScan]) -> tuple[str, list[str]]:
    """Check 4."""
    patterns = list(data.settings.get("app_patterns") or [])
    ev: list[str] = []
    missing: list[str] = []
    bad: list[str] = []
    order = sorted(data.pods, key=lambda p: (0 if _is_head(data, p) else 1, p.task, p.ordinal))
    for idx, pattern in enumerate(patterns):
        hit = next(
            (
                (p.name, scans[p.name].pattern_hits[f"app{idx}"])
                for p in order
                if f"app{idx}" in scans[p.name].pattern_hits
            ),
            None,
        )
        if hit is None:
            missing.append(_("No log line matches the application pattern {p}.").format(p=pattern))
            continue
        pod, (line_no, line) = hit
        ev.append(_("{pod} line {n}: {line}").format(pod=pod, n=line_no, line=line))
        m = RLINF_CLUSTER.search(line)
        if m and data.num_nodes is not None and int(m["n"]) != data.num_nodes:
            bad.append(
                _("RLinf reports {n} nodes, but cluster.num_nodes = {want}.").format(n=m["n"], want=data.num_nodes)
            )
    if bad:
        return NOT_MET, bad + ev + missing
    if missing:
        return _missing(data), missing + ev
    ev.append(_("Compare these values one by one with the run ID, code version and config recorded before submission."))
    return MET, ev


def check_progress(data: RunCheckInput, scans: dict[str, LogScan]) -> tuple[str, list[str]]:
    """Check 5."""
    pattern = data.settings.get("progress_pattern") or DEFAULT_SETTINGS["progress_pattern"]
    order = sorted(data.pods, key=lambda p: (0 if _is_head(data, p) else 1, p.task, p.ordinal))
    hit = next(
        ((p.name, scans[p.name].pattern_hits["progress"]) for p in order if "progress" in scans[p.name].pattern_hits),
        None,
    )
    ev: list[str] = []
    missing: list[str] = []
    bad: list[str] = []
    if hit is None:
        missing.append(_("No progress line matching {p} in the logs yet.").format(p=pattern))
    else:
        pod, (line_no, line) = hit
        ev.append(_("Progress: {pod} line {n}: {line}").format(pod=pod, n=line_no, line=line))
    out = data.output
    if out.state == "ok":
        ev.append(
            _("Output {path}: {files} files, readable; newest file {sample} ({size} bytes, sha256 {sha}).").format(
                path=out.path, files=out.files, sample=out.sample, size=out.size, sha=out.sha256[:16]
            )
        )
    elif out.state == "unset":
        missing.append(_("No output or checkpoint path is set, so persisted output cannot be confirmed."))
    elif out.state == "unsupported":
        missing.append(
            _(
                "Output {path} is not where the console can read it ({detail}); confirm it is readable in the"
                " target storage."
            ).format(path=out.path, detail=out.detail)
        )
        if hit is not None:
            return TO_CONFIRM, missing + ev
    else:
        msg = _("Output {path} does not exist or cannot be read ({detail}).").format(
            path=out.path, detail=out.detail or out.state
        )
        (bad if out.state == "unreadable" else missing).append(msg)
    if bad:
        return NOT_MET, bad + missing + ev
    if missing:
        return _missing(data), missing + ev
    return MET, ev


def _is_head(data: RunCheckInput, pod: PodRow) -> bool:
    return any(t.head and t.name == pod.task for t in data.tasks)


def run_checks(data: RunCheckInput, lang: str = "zh-hans") -> list[CheckResult]:
    """Compute checks 1-5 (pure), their evidence in ``lang``. Evidence lines are redacted."""
    scans = _scans(data, log_patterns(data.settings))
    results = []
    with translation.override(language.lang(lang)):
        checks = [
            check_job(data),
            check_pods(data),
            check_ray(data, scans),
            check_app(data, scans),
            check_progress(data, scans),
        ]
    for number, (status, evidence) in enumerate(checks, start=1):
        results.append(CheckResult(number, status, [redact(e, data.secrets) for e in evidence], data.now))
    return results


# --- output path (local runtime) ------------------------------------------------------------------------------


def check_output(path: str, templates: list[dict], runtime_kind: str, probe: OutputProbe | None = None) -> OutputCheck:
    """Check that ``path`` (container path, globs allowed) exists and is readable: on the local runtime through the
    hostPath mount that covers it; elsewhere inside a running Worker whose hostPath or PVC mount covers it
    (``probe``: ``(template name, container path) -> scan result or None``, see :func:`output_probe.probe`)."""
    if not path:
        return OutputCheck("unset")
    if runtime_kind != "local":
        covering = [str(t.get("name")) for t in templates if persistent_mount_for(t, path)]
        if not covering:
            return OutputCheck("unsupported", path, detail="no hostPath or PVC mount covers it")
        result = next((r for name in covering if probe is not None and (r := probe(name, path)) is not None), None)
        if result is None:
            return OutputCheck("unsupported", path, detail="no running Worker mounts it")
        return _output_result(path, path, result)
    host = next((h for t in templates if (h := host_path_for(t, path)) is not None), None)
    if host is None:
        return OutputCheck("unsupported", path, detail="no hostPath mount covers it")
    return _output_result(path, host, output_scan.scan(host, HASH_LIMIT))


def _output_result(path: str, where: str, result: dict) -> OutputCheck:
    """An :class:`OutputCheck` of ``output_scan.scan(where)`` for the container path ``path``."""
    if result.get("state") != "ok":
        return OutputCheck(str(result.get("state")), path, detail=str(result.get("detail") or ""))
    newest = str(result["newest"])
    prefix = where.split("*")[0].rstrip("/") if "*" in where else where
    single = not any(c in where for c in "*?[") and newest == where
    rel = os.path.relpath(newest, prefix if not single else os.path.dirname(prefix))
    base = path.split("*")[0].rstrip("/") if "*" in path else path
    sample = base if single or rel == "." else f"{base.rstrip('/')}/{rel}"
    return OutputCheck("ok", path, int(result["files"]), sample, int(result["size"]), str(result["sha256"]))


# --- database + runtime -----------------------------------------------------------------------------------------


def gather(job, now: datetime | None = None, logs: dict[str, str] | None = None) -> RunCheckInput:
    """Build the input of the checks from a stored Job: the Workers' stored log scans (``log_scans.job_scans``),
    or the scans of ``logs`` (Pod name -> text) when given."""
    from django.utils import timezone

    spec = job.spec_section
    templates = {str(t.get("name")): t for t in spec.get("tasks") or [] if isinstance(t, dict)}
    tasks = log_scans.job_tasks(job)
    task_views = [
        TaskView(
            name=t.name,
            template=t.template_name,
            role=t.display_role or t.template_name,
            head=t.head,
            replicas=t.replicas,
            rank_start=t.rank_start,
            selector=template_selector(templates.get(t.template_name, {})),
            cluster=t.cluster.name,
        )
        for t in tasks
    ]
    pods = [
        PodRow(p.name, t.name, p.ordinal, p.node, p.ip, p.phase, pod_ready(p), p.restart_count, p.reason)
        for t in tasks
        for p in t.pods.all()
    ]
    nodes = {n.name: dict(n.labels or {}) for n in Node.objects.filter(cluster_id__in={t.cluster_id for t in tasks})}
    settings = settings_of(job.run_check)
    stored = log_scans.job_scans(job, tasks, log_patterns(settings)) if logs is None else None
    head_task = next((t for t in tasks if t.head), tasks[0] if tasks else None)
    ordered = [templates[t.template_name] for t in tasks if t.template_name in templates]
    if head_task is not None and head_task.template_name in templates:
        ordered.insert(0, templates[head_task.template_name])
    runtime_kind = head_task.cluster.runtime if head_task is not None else ""
    if not settings["output_path"] and ordered and str(ordered[0].get("tensorBoardDir") or "").startswith("/"):
        # No output path set: the head's TensorBoard directory is where the job says its outputs go.
        settings = {**settings, "output_path": str(ordered[0]["tensorBoardDir"])}
    secrets = []
    for t in templates.values():
        for e in main_container(t).get("env") or []:
            if isinstance(e, dict) and e.get("value") and e.get("name") != "RLARK_TASK_ROLE":
                secrets.append(str(e["value"]))
    document = job.spec if "spec" in (job.spec or {}) else {"metadata": {"name": job.name}, "spec": spec}
    return RunCheckInput(
        job=job.name,
        phase=job.phase,
        stopped=job.stopped,
        created_at=job.created_at,
        started_at=job.started_at,
        finished_at=job.finished_at,
        now=now or timezone.now(),
        document=document,
        tasks=task_views,
        pods=pods,
        node_labels=nodes,
        num_nodes=num_nodes_of(job.rlinf_config) if job.rlinf_config else None,
        logs=logs or {},
        settings=settings,
        output=_run_output(job, settings["output_path"], ordered, runtime_kind),
        secrets=secrets,
        scans=stored.scans if stored is not None else None,
        scans_as_of=stored.as_of if stored is not None else None,
        refreshing=stored.refreshing if stored is not None else False,
    )


def _run_output(job, path: str, templates: list[dict], runtime_kind: str) -> OutputCheck:
    """``check_output`` of the current run's prefix only (``jobs.observe.run_prefix``; seed 02 check 5:
    "checkpoint 使用本次运行的唯一前缀")."""
    current = run_path(job, path)
    if current is None:
        return OutputCheck("missing", path, detail="the run has no Header Pod yet")
    probe = output_probe.probe_for(job, HASH_LIMIT) if runtime_kind != "local" else None
    return check_output(current, templates, runtime_kind, probe)


def job_run_check(job, lang: str = "zh-hans", now: datetime | None = None) -> list[CheckResult]:
    """The five checks of a stored Job."""
    return run_checks(gather(job, now=now), lang)


def job_run_check_as_of(job, lang: str = "zh-hans", now: datetime | None = None) -> tuple[list[CheckResult], dict]:
    """:func:`job_run_check` and how old the log scans it read are: ``{"asOf": datetime|None, "refreshing"}``."""
    data = gather(job, now=now)
    return run_checks(data, lang), {"asOf": data.scans_as_of, "refreshing": data.refreshing}


# --- Markdown run record (seed 02 template) --------------------------------------------------------------------


def _ts(value: datetime | None) -> str:
    """A time as every page shows it: the page's zone with its abbreviation (``rlark_console.pagetime``)."""
    return pagetime.label(value) if value else "-"


def _cell(text: str) -> str:
    return text.replace("\\", "\\\\").replace("|", "\\|").replace("\n", " ").strip()


def markdown_record(job, results: list[CheckResult], recorder: str, lang: str = "zh-hans") -> str:
    """The run record in the exact template of seed 02 (``# 任务运行检查记录``, eight fields, the six-row table):
    the template's words in Chinese whatever ``lang``, the values the console fills in (a missing digest, the
    config source, the execution mode, row 6's note) in ``lang``.

    Values come from the stored Job (images, digests when the reference has one, the RLinf config hash, clusters,
    nodes, GPU per Worker) and the check results; row 6 is always 待确认 (people decide what happens next).
    No environment values, keys or credentials are written.
    """
    import yaml

    spec = job.spec_section
    templates = [t for t in spec.get("tasks") or [] if isinstance(t, dict)]
    images = []
    for t in templates:
        image = str(main_container(t).get("image") or "-")
        digest = image.split("@", 1)[1] if "@" in image else language.translate(gettext_noop("not recorded"), lang)
        images.append(f"{t.get('name')}: {image} (digest: {digest})")
    yaml_text = yaml.safe_dump(job.spec or {}, allow_unicode=True, sort_keys=False)
    yaml_sha = hashlib.sha256(yaml_text.encode()).hexdigest()[:16]
    run_script = next((str(t.get("runScript") or "") for t in templates if t.get("head") is True), "")
    if job.rlinf_config:
        config = language.translate(
            gettext_noop("RLinf config attached (sha256 {sha}); command source: header run script (sha256 {run})"), lang
        ).format(
            sha=hashlib.sha256(job.rlinf_config.encode()).hexdigest()[:16],
            run=hashlib.sha256(run_script.encode()).hexdigest()[:16],
        )
    else:
        config = language.translate(
            gettext_noop("No RLinf config attached; command source: header run script (sha256 {run})"), lang
        ).format(run=hashlib.sha256(run_script.encode()).hexdigest()[:16])
    num_nodes = num_nodes_of(job.rlinf_config) if job.rlinf_config else None
    mode = language.translate(gettext_noop("execution mode to confirm"), lang)
    clusters: dict[str, set[str]] = {}
    gpus = []
    for task in job.tasks.select_related("cluster").prefetch_related("pods").order_by("order"):
        clusters.setdefault(task.cluster.name, set()).update(p.node for p in task.pods.all() if p.node)
    for t in templates:
        limits = (main_container(t).get("resources") or {}).get("limits") or {}
        res = ", ".join(f"{k}={v}" for k, v in limits.items()) or "-"
        gpus.append(f"{t.get('name')}: {res}")
    target = "; ".join(f"{c} ({', '.join(sorted(n)) or '-'})" for c, n in clusters.items()) or "-"
    location = f"RLark Console /jobs/{job.name}/run-check/"
    lines = [
        "# 任务运行检查记录",
        "",
        f"- 运行 ID：{job.name}#{job.attempt}（{_ts(job.started_at)}）",
        f"- 代码版本、镜像地址和版本；实际 digest（如已记录）：{'; '.join(images) or '-'}",
        f"- Hydra 配置和命令来源：{config}",
        f"- RLinf `cluster.num_nodes` 和执行模式：{num_nodes if num_nodes is not None else '-'}；{mode}",
        f"- 目标集群、节点和资源信息：{target}；{'; '.join(gpus) or '-'}",
        f"- Job 名称：{job.name}",
        f"- 提交 YAML 记录：RLark Console /jobs/{job.name}/ (YAML sha256 {yaml_sha})",
        f"- 记录人：{recorder}",
        "",
        "| 检查项 | 结果（符合预期 / 未符合 / 待确认） | 检查时间 | 记录位置 | 备注/联系人 |",
        "| --- | --- | --- | --- | --- |",
    ]
    by_number = {r.number: r for r in results}
    for number in range(1, 7):
        title = f"{number}. {check_title(number, 'zh-hans')}"
        result = by_number.get(number)
        if result is None:
            checked = results[0].checked_at if results else None
            status = status_label(TO_CONFIRM, "zh-hans")
            note = language.translate(
                gettext_noop(
                    "The recorder summarises checks 1-5 and decides to continue, stop or keep for troubleshooting,"
                    " with contacts and retention"
                ),
                lang,
            )
        else:
            checked = result.checked_at
            status = status_label(result.status, "zh-hans")
            note = " ".join(result.evidence[:4])
        lines.append(f"| {_cell(title)} | {status} | {_ts(checked)} | {_cell(location)} | {_cell(note)} |")
    return "\n".join(lines) + "\n"
