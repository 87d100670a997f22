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

Modules: ``runcheck_input`` (the plain data the checks read, statuses, words), ``runcheck_settings``, one module per
check (``runcheck_job``, ``runcheck_pods``, ``runcheck_ray``, ``runcheck_app``, ``runcheck_progress``),
``runcheck_output`` (the output path), ``runcheck_record`` (the Markdown record); this one gathers the input from
the database and runtime and runs the checks. The names the pages, the API and the Celery tasks use are
importable from here.
"""

from __future__ import annotations

from datetime import datetime

from clusters.models import Node
from clusters.selectors import template_selector
from jobs.explain import output_probe
from jobs.explain.runcheck_app import check_app
from jobs.explain.runcheck_input import (
    MET,
    NOT_MET,
    TO_CONFIRM,
    CheckResult,
    OutputCheck,
    PodRow,
    RunCheckInput,
    TaskView,
    redact,
)
from jobs.explain.runcheck_job import check_job
from jobs.explain.runcheck_output import HASH_LIMIT, check_output
from jobs.explain.runcheck_pods import check_pods
from jobs.explain.runcheck_progress import check_progress
from jobs.explain.runcheck_ray import check_ray
from jobs.explain.runcheck_record import markdown_record
from jobs.explain.runcheck_settings import (
    DEFAULT_SETTINGS,
    SettingsError,
    clean_settings,
    job_log_patterns,
    log_patterns,
    settings_of,
)
from jobs.jobspec.layout import main_container
from jobs.jobspec.rlinf import num_nodes_of
from jobs.observe import log_scans
from jobs.observe.log_markers import LogScan, scan_log
from jobs.observe.run_prefix import run_path
from jobs.observe.status import pod_ready

__all__ = [
    "DEFAULT_SETTINGS",
    "MET",
    "NOT_MET",
    "TO_CONFIRM",
    "SettingsError",
    "clean_settings",
    "gather",
    "job_log_patterns",
    "job_run_check",
    "job_run_check_as_of",
    "log_patterns",
    "markdown_record",
    "run_checks",
    "settings_of",
]


def _scans(data: RunCheckInput, patterns: dict[str, str] | None = None) -> dict[str, LogScan]:
    """Pod name -> log scan for every Pod: the stored scans when gathered (an empty scan for a Pod without one),
    else the scans of ``data.logs`` tracking ``patterns``."""
    if data.scans is not None:
        return {p.name: data.scans.get(p.name) or LogScan() for p in data.pods}
    return {p.name: scan_log(data.logs.get(p.name, ""), patterns) for p in data.pods}


def run_checks(data: RunCheckInput, lang: str = "zh-hans") -> list[CheckResult]:
    """Compute checks 1-5 (pure). Evidence lines are redacted."""
    scans = _scans(data, log_patterns(data.settings))
    results = []
    for number, (status, evidence) in enumerate(
        [
            check_job(data, lang),
            check_pods(data, lang),
            check_ray(data, lang, scans),
            check_app(data, lang, scans),
            check_progress(data, lang, scans),
        ],
        start=1,
    ):
        results.append(CheckResult(number, status, [redact(e, data.secrets) for e in evidence], data.now))
    return results


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
    """``check_output`` of the current run's prefix only (``jobs.observe.run_prefix``; seed 02, check 5:
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
