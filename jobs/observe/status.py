"""Read side of job status: the status document of the API, Worker rows of the pages, logs.

Vocabulary from seed 01-job-role-worker-task: a Worker is the console's view of one Pod of a
Task (one Ray node); before the first sync a Worker row has no Pod details (the page then says
``暂无 Pod 详情，等待任务同步`` / "No Pod details yet, waiting for sync").
"""

from __future__ import annotations

import re
from collections import deque
from datetime import datetime
from pathlib import Path
from typing import Any

from django.utils import timezone
from django.utils.translation import gettext_lazy

from clusters.runtime import registry
from clusters.runtime.base import PodNotFound, RuntimeFailure
from jobs.control import log_archive
from jobs.jobspec.conditions import get_condition, set_condition  # noqa: F401 - the status API of conditions
from jobs.models import Job, Pod, Task
from jobs.observe.state_words import STATE_WORDS, state_label

# Bounds of the log API (seed 02: the Logs tab reads at most the last 1000 lines per Pod).
DEFAULT_TAIL = 1000
MAX_TAIL = 100_000


def runtime_seconds(job: Job, now: datetime | None = None) -> int | None:
    """Real run time in seconds: start of the current attempt -> finish (or now); None before start."""
    if job.started_at is None:
        return None
    end = job.finished_at or now or timezone.now()
    return max(0, int((end - job.started_at).total_seconds()))


def format_duration(seconds: int | None) -> str:
    """``1h 02m 03s`` / ``4m 05s`` / ``7s``; ``—`` when unknown."""
    if seconds is None:
        return "—"
    hours, rest = divmod(int(seconds), 3600)
    minutes, secs = divmod(rest, 60)
    if hours:
        return f"{hours}h {minutes:02d}m {secs:02d}s"
    if minutes:
        return f"{minutes}m {secs:02d}s"
    return f"{secs}s"


def pod_ready(pod: Pod) -> bool:
    """A Worker counts as ready when its Pod runs and its ``main`` container is up."""
    state = pod.container_state or {}
    return pod.phase == "Running" and bool(state.get("ready") or state.get("state") == "running")


def worker_rows(job: Job, tasks: list[Task] | None = None) -> list[dict[str, Any]]:
    """One row per Worker: every expected replica of every Task, plus any extra Pod seen.

    Row: ``{"name", "role", "task", "taskPhase", "ordinal", "rank", "pod": Pod|None, "node",
    "ip", "domainIp", "phase", "restarts", "started", "ready", "exitCode", "reason", "message"}``.
    ``pod`` is None (and ``phase`` the Task's phase) until the sync has seen the Pod.
    """
    if tasks is None:
        tasks = list(job.tasks.prefetch_related("pods").all())
    rows = []
    for task in tasks:
        pods = {p.ordinal: p for p in task.pods.all()}
        ordinals = sorted(set(range(task.replicas)) | set(pods))
        for ordinal in ordinals:
            pod = pods.get(ordinal)
            rows.append(
                {
                    "name": pod.name if pod else f"{task.name}-{ordinal}",
                    "role": task.display_role or task.template_name,
                    "task": task.name,
                    "taskPhase": task.phase,
                    "head": task.head,
                    "ordinal": ordinal,
                    "rank": task.rank_start + ordinal,
                    "pod": pod,
                    "node": pod.node if pod else "",
                    "ip": pod.ip if pod else "",
                    "domainIp": pod.domain_ip if pod else "",
                    "phase": pod.phase if pod else task.phase,
                    "restarts": pod.restart_count if pod else 0,
                    "started": pod.started_at if pod else None,
                    "created": pod.created_at if pod else None,
                    "ready": pod_ready(pod) if pod else False,
                    "exitCode": pod.exit_code if pod else None,
                    "reason": pod.reason if pod else "",
                    "message": pod.message if pod else "",
                }
            )
    return rows


def _iso(value: datetime | None) -> str | None:
    return value.isoformat() if value else None


def job_status(job: Job) -> dict[str, Any]:
    """The ``status`` object of ``GET /api/v1/jobs/{name}/``.

    ``{"phase", "message", "conditions": [...], "attempt", "startTime", "endTime",
    "runtimeSeconds", "tasks": [{"name", "template", "phase", "message", "replicas", "ready",
    "rankStart", "cluster"}], "workers": [{"name", "role", "task", "pod", "node", "ip", "phase",
    "restarts", "started", "rank", "domainIp"}]}``; ``pod`` is null before the first sync.
    """
    tasks = list(job.tasks.select_related("cluster").prefetch_related("pods"))
    return {
        "phase": job.phase,
        "message": job.message,
        "conditions": list(job.conditions or []),
        "attempt": job.attempt,
        "startTime": _iso(job.started_at),
        "endTime": _iso(job.finished_at),
        "runtimeSeconds": runtime_seconds(job),
        "tasks": [
            {
                "name": t.name,
                "template": t.template_name,
                "phase": t.phase,
                "message": t.message,
                "replicas": t.replicas,
                "ready": t.ready_replicas,
                "rankStart": t.rank_start,
                "cluster": t.cluster.name,
            }
            for t in tasks
        ],
        "workers": [
            {
                "name": row["name"],
                "role": row["role"],
                "task": row["task"],
                "pod": row["pod"].name if row["pod"] else None,
                "node": row["node"],
                "ip": row["ip"],
                "phase": row["phase"],
                "restarts": row["restarts"],
                "started": _iso(row["started"]),
                "rank": row["rank"],
                "domainIp": row["domainIp"],
            }
            for row in worker_rows(job, tasks)
        ],
    }


def workers_summary(job: Job) -> tuple[int, int]:
    """``(ready, total)`` Workers from the Task rows (cheap; list page)."""
    ready = total = 0
    for task in job.tasks.all():
        ready += task.ready_replicas
        total += task.replicas
    return ready, total


# --- logs -------------------------------------------------------------------------------------


def log_archive_path(job_name: str, pod_name: str, previous: bool = False) -> Path:
    """Where a Pod's full log is archived once its job stops, ends or is deleted
    (``jobs.control.log_archive``: gzip, VAR_DIR/logs)."""
    return log_archive.path_for(job_name, pod_name, previous)


def read_worker_log(job: Job, pod_name: str, tail: int | None = DEFAULT_TAIL, previous: bool = False) -> str:
    """The ``main`` container log of Worker ``pod_name`` of ``job`` (last ``tail`` lines).

    Reads from the runtime; when the Pod is gone (job stopped or finished) falls back to the
    copy the sync archived before scaling it down. Raises ``Pod.DoesNotExist`` when the Pod
    is not one of this job's Workers, :class:`PodNotFound` when neither the runtime nor the
    archive has its log, :class:`RuntimeFailure` for other runtime failures.
    """
    task = task_of_pod(job, pod_name)
    try:
        return registry.runtime_for(task.cluster).read_log(task.namespace, pod_name, tail_lines=tail, previous=previous)
    except RuntimeFailure as exc:
        archived = log_archive.find(job.name, pod_name, previous)
        if archived is not None:
            return log_archive.read_tail(archived, tail)
        if isinstance(exc, PodNotFound) or exc.reason == "not_found":
            raise
        raise


LOG_HEAD_LINES = 2000  # lines kept from the start of a log (the wrapper markers live there)
LOG_TAIL_LINES = 5000  # and from its end


def read_pod_log(job, pod_name: str) -> str:
    """A Worker's ``main`` log for diagnosis: the first ``LOG_HEAD_LINES`` and last ``LOG_TAIL_LINES`` lines
    (streamed, constant memory). Falls back to the archived copy / tail read of :func:`read_worker_log`.
    Returns "" when no log can be read (Pod gone, cluster unreachable). For many Workers of one job, use
    ``jobs.observe.worker_logs.read_logs`` (one Task query and one runtime per cluster for all of them)."""
    task = next((t for t in job.tasks.select_related("cluster") if pod_name.rpartition("-")[0] == t.name), None)
    if task is not None:
        try:
            text = head_and_tail(registry.runtime_for(task.cluster).stream_log(task.namespace, pod_name))
            if text:
                return text
        except (RuntimeFailure, OSError, NotImplementedError):
            pass
    try:
        return read_worker_log(job, pod_name, tail=None)
    except Exception:  # noqa: BLE001 - a missing log is shown as "no log", never an error page
        return ""


def head_and_tail(stream) -> str:
    """The first ``LOG_HEAD_LINES`` and last ``LOG_TAIL_LINES`` lines of a log streamed as byte chunks, with a
    ``... (N lines skipped) ...`` line between them when lines were dropped; "" for an empty log. Constant memory.
    Raises what the stream raises (``RuntimeFailure``, ``OSError``)."""
    head: list[str] = []
    tail: deque[str] = deque(maxlen=LOG_TAIL_LINES)
    skipped = 0
    buf = b""
    for chunk in stream:
        buf += chunk
        *complete, buf = buf.split(b"\n")
        for raw in complete:
            line = raw.decode("utf-8", errors="replace")
            if len(head) < LOG_HEAD_LINES:
                head.append(line)
            else:
                if len(tail) == tail.maxlen:
                    skipped += 1
                tail.append(line)
    if buf:
        line = buf.decode("utf-8", errors="replace")
        if len(head) < LOG_HEAD_LINES:
            head.append(line)
        else:
            tail.append(line)
    if not (head or tail):
        return ""
    gap = [f"... ({skipped} lines skipped) ..."] if skipped else []
    return "\n".join([*head, *gap, *tail])


def task_of_pod(job: Job, pod_name: str) -> Task:
    """The Task of ``pod_name``: a synced Pod row, else ``<task>-<ordinal>`` of an expected replica."""
    pod = Pod.objects.filter(task__job=job, name=pod_name).select_related("task__cluster").first()
    if pod is not None:
        return pod.task
    for task in job.tasks.select_related("cluster"):
        prefix, _, ordinal = pod_name.rpartition("-")
        if prefix == task.name and ordinal.isdigit():
            return task
    raise Pod.DoesNotExist(pod_name)


# The sync stores English messages (API, logs); pages show the common ones in the user's language.
# jobs.observe.phases.pending_reason's sentence for a Pod the cluster refuses to create (its own message in ``tail``)
REFUSED_SENTENCE = re.compile(r"^The cluster refuses to create Pod (?P<pod>\S+): (?P<tail>.*)$", re.S)
_WHO = r"^(?P<kind>Header|Worker) (?P<pod>\S+) \(role (?P<role>[^)]*)\)"
_MESSAGES = (
    (re.compile(r"^All (?P<n>\d+) Workers running$"), gettext_lazy("All %(n)s Workers running")),
    (
        re.compile(r"^Waiting for Workers: (?P<ready>\d+)/(?P<total>\d+) ready(?: \((?P<detail>.*)\))?$", re.S),
        gettext_lazy("Waiting for Workers: %(ready)s/%(total)s ready"),
    ),
    (
        re.compile(r"^All Workers started; waiting for the Ray cluster to form$"),
        gettext_lazy("All Workers started; waiting for the Ray cluster to form"),
    ),
    (re.compile(r"^Run script exited with code 0$"), gettext_lazy("The run script exited with code 0")),
    (re.compile(r"^Job stopped$"), gettext_lazy("Job stopped")),
    (re.compile(r"^Starting Workers$"), gettext_lazy("Starting Workers")),
    (re.compile(r"^(?P<ready>\d+)/(?P<total>\d+) Workers ready$"), gettext_lazy("%(ready)s/%(total)s Workers ready")),
    (re.compile(r"^Ray cluster is ready$"), gettext_lazy("Ray cluster is ready")),
    # jobs.observe.ray_nodes: the Worker names ("<role>-<ordinal> (rank <r>)") are quoted as they are
    (
        re.compile(r"^Ray nodes (?P<joined>\d+)/(?P<total>\d+), missing (?P<names>.*)$", re.S),
        gettext_lazy("Ray nodes %(joined)s/%(total)s, missing %(names)s"),
    ),
    (re.compile(r"^Ray nodes (?P<joined>\d+)/(?P<total>\d+)$"), gettext_lazy("Ray nodes %(joined)s/%(total)s")),
    (
        re.compile(r"^RLinf waits for (?P<n>\d+) nodes; (?P<k>\d+) available$"),
        gettext_lazy("RLinf waits for %(n)s nodes; %(k)s available"),
    ),
    (
        re.compile(
            r"^RLinf waited more than startTimeout \((?P<t>\d+) s\) for (?P<n>\d+) nodes, (?P<k>\d+) available: "
            r"(?P<nodes>.*)$",
            re.S,
        ),
        gettext_lazy("RLinf waited more than startTimeout (%(t)s s) for %(n)s nodes, %(k)s available: %(nodes)s"),
    ),
    (
        re.compile(r"^The local runtime restarted: the Workers started over \(attempt (?P<attempt>\d+)\)$"),
        gettext_lazy("The local runtime restarted: the Workers started over (attempt %(attempt)s)"),
    ),
    # The sync's failure sentences (the rules of jobs.observe.phases); ``tail`` (the stage, the first error
    # line of the log, the runtime's reason) is quoted as it is.
    (
        re.compile(_WHO + r": run script exited with code (?P<code>-?\d+)(?P<tail>.*)$", re.S),
        gettext_lazy("%(kind)s %(pod)s (role %(role)s): the run script exited with code %(code)s"),
    ),
    (
        re.compile(_WHO + r": Ray worker process exited with code (?P<code>-?\d+)(?P<tail>.*)$", re.S),
        gettext_lazy("%(kind)s %(pod)s (role %(role)s): the Ray worker process exited with code %(code)s"),
    ),
    (
        re.compile(_WHO + r" exited with code (?P<code>-?\d+)(?P<tail>.*)$", re.S),
        gettext_lazy("%(kind)s %(pod)s (role %(role)s) exited with code %(code)s"),
    ),
    (
        re.compile(_WHO + r" restarted \((?P<n>\d+)x\): a new Ray head loses the cluster(?P<tail>.*)$", re.S),
        gettext_lazy("%(kind)s %(pod)s (role %(role)s) restarted (%(n)s times): a new Ray head loses the cluster"),
    ),
    (
        re.compile(_WHO + r": container main restarted (?P<n>\d+) times(?P<tail>.*)$", re.S),
        gettext_lazy("%(kind)s %(pod)s (role %(role)s): container main restarted %(n)s times"),
    ),
    (re.compile(r"^Image cannot be pulled: (?P<tail>.*)$", re.S), gettext_lazy("The image cannot be pulled:")),
    # jobs.observe.phases.pending_reason: the API server's own refusal (a ResourceQuota's) is quoted as it is
    (REFUSED_SENTENCE, gettext_lazy("The cluster refuses to create Pod %(pod)s:")),
    # jobs.observe.phases.replica_failure_condition: the role, then the cluster's refusal as it is
    (re.compile(r"^Role (?P<role>[^:]+): (?P<tail>.+)$", re.S), gettext_lazy("Role %(role)s:")),
    (
        re.compile(r"^Waiting for Pod (?P<pod>\S+) to be created$"),
        gettext_lazy("Waiting for Pod %(pod)s to be created"),
    ),
    (
        re.compile(r"^The header has not logged 'Ray cluster is ready' yet$"),
        gettext_lazy("The Header has not logged 'Ray cluster is ready' yet"),
    ),
    # A Task's and a Pod's own sentences (jobs.observe.phases, jobs.observe.sync_rows, jobs.control.controller);
    # ``reason`` (the runtime's or Kubernetes' words) is quoted as it is, ``state`` is one of state_words.
    (
        re.compile(r"^Waiting for Pod (?P<pod>\S+) to be created$"),
        gettext_lazy("Waiting for Pod %(pod)s to be created"),
    ),
    (
        re.compile(r"^Cluster (?P<cluster>\S+) is unreachable: (?P<reason>.*)$", re.S),
        gettext_lazy("Cluster %(cluster)s is unreachable: %(reason)s"),
    ),
    (re.compile(r"^Runtime error: (?P<reason>.*)$", re.S), gettext_lazy("Runtime error: %(reason)s")),
    (
        re.compile(r"^the Pod disappeared while the job was running$"),
        gettext_lazy("The Pod disappeared while the job was running"),
    ),
    (
        re.compile(r"^(?P<pod>\S+): (?P<state>" + "|".join(STATE_WORDS) + r")$"),
        gettext_lazy("%(pod)s: %(state)s"),
    ),
)


def localized_message(message: str) -> str:
    """``message`` (a Job's, Task's or Pod's stored English sentence) in the active language when it is one of
    the console's own sentences (:data:`_MESSAGES`, the one table of them); a sentence from Kubernetes or the
    runtime (a Pod's reason and message) and the quoted parts of ours are kept as they are."""
    for pattern, template in _MESSAGES:
        m = pattern.match(message or "")
        if m:
            params = {k: v for k, v in m.groupdict().items() if v is not None}
            if "nodes" in params:  # a sentence of its own (the Ray nodes' count)
                params["nodes"] = localized_message(params["nodes"])
            if "state" in params:
                params["state"] = state_label(params["state"])
            if params.get("detail"):  # what blocks the Workers: a sentence of its own, or Kubernetes' words
                params["detail"] = localized_message(params["detail"])
            text = str(template) % params
            if params.get("detail"):  # one of these sentences too (``pending_reason``), or the runtime's words
                text += f" ({localized_message(params['detail'])})"
            if params.get("tail"):
                tail = _localized_tail(params["tail"])
                glue = "" if tail[:1] in ";:,. ；，（" or text.endswith("：") else " "
                text += glue + tail
            return text
    return message


# The connecting words of a failure sentence's tail (``phases.WorkerFacts``: `` after stage '<s>'`` then
# ``; first error: <line>``): translated; the stage name and the log line are quoted as they are.
_TAIL = re.compile(r"^(?: after stage '(?P<stage>[^']*)')?(?:; first error: (?P<first>.*))?$", re.S)


def _localized_tail(tail: str) -> str:
    m = _TAIL.match(tail)
    if m is None or not (m.group("stage") or m.group("first")):
        return tail
    out = ""
    if m.group("stage"):
        out += str(gettext_lazy(" after stage “%(stage)s”")) % {"stage": m.group("stage")}
    if m.group("first"):
        out += str(gettext_lazy("; first error: %(line)s")) % {"line": m.group("first")}
    return out
