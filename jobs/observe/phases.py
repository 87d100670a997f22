"""The phase rules of Tasks and Jobs: from the Pod rows the sync wrote to Task and Job status (nothing written here).

The status sync (``jobs.observe.sync``) folds what the runtimes report into Pod rows (``jobs.observe.sync_diff``),
then :func:`aggregate` applies these rules to them. Each rule is a function of its own, whose docstring names where
it comes from:

- seed 01-job-role-worker-task ("结合各层状态判断运行情况": Pods -> Task -> Job) and seed
  05-troubleshooting-jobs-workers (a failed prepare script, Ray process or run script may leave a StatefulSet Task
  and its Job Running; here they fail the job);
- upstream-rlark 4.8 (StatefulSet -> Task phase), 5.4 (wrapper exit codes) and 6.1 (the Job state machine), with
  their "RLark Console goes further" lines (failures read from Pods and logs, a run script that exits 0 is
  ``Succeeded``);
- peers 2.1 (the status words users bring) and 3.3 (failure detection: S1 crash loops, S2 image pulls, S3 Running
  only when every role is ready, S5 a failed run script), 3.4 P1 (a Pending job names what blocks it).

Shapes: a Pod row's ``container_state`` holds the container's state (``state``, ``reason``, ``message``,
``ready``, ...), the log ``signals`` the sync read (``runExit``, ``rayExit``, ``rayReady``, ``clusterCheckFailed``,
``lastStage``, ``firstError``; ``jobs.observe.log_markers.log_signals``) and ``replaced`` (``{"uid"}`` of a Pod
that was lost while the job ran). Conditions are the Kubernetes-style list of ``jobs.jobspec.conditions``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from datetime import datetime
from typing import Any

from django.conf import settings

from clusters.runtime.base import IMAGE_PULL_REASONS
from jobs.control import controller
from jobs.models import Job, Phase, Pod, Task
from jobs.observe import ray_nodes, runtime_restart
from jobs.observe.log_markers import CHECK_FAILED
from jobs.observe.status import REFUSED_SENTENCE, get_condition, set_condition
from jobs.observe.sync_fetch import stale

CRASHLOOP_LIMIT = int(settings.RLARK_CRASHLOOP_LIMIT)
IMAGE_PULL_GRACE = float(settings.RLARK_IMAGE_PULL_GRACE)


@dataclasses.dataclass
class Failure:
    """One Worker failure: ``reason`` (the ``Failed`` condition's reason: ``RunScriptFailed``, ``CrashLoop``, ...),
    ``message`` (names the role, the Worker and the first error line), ``task``/``pod`` names ("" for a job-wide
    failure), ``head`` (the header's failures come first)."""

    reason: str
    message: str
    task: str
    pod: str
    head: bool


# --- one Pod row ------------------------------------------------------------------------------------------------


def is_stale(job: Job, pod: Pod) -> bool:
    """A Pod created before the current attempt started (still terminating after a restart): no rule reads it."""
    return stale(job.started_at, pod.created_at)


def signals_of(row: Pod) -> dict[str, Any]:
    """The log signals stored on a Pod row (``{}`` when none were read)."""
    return (row.container_state or {}).get("signals") or {}


def is_ready(pod: Pod) -> bool:
    """A ready Worker: its Pod is Running and its main container ready or running (``container_state``); the
    Task's ready count (upstream-rlark 4.8 ``readyReplicas``)."""
    state = pod.container_state or {}
    return pod.phase == "Running" and bool(state.get("ready") or state.get("state") == "running")


# --- Worker failures --------------------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class WorkerFacts:
    """What the failure rules read of one Worker: its ``task`` and Pod ``row``, the row's log ``signals`` and
    container ``state``, ``who`` (``"Header <pod> (role <role>)"``), ``stage`` (`` after stage '<s>'`` or "") and
    ``detail`` (``; first error: <line>`` or "")."""

    task: Task
    row: Pod
    signals: dict[str, Any]
    state: dict[str, Any]
    who: str
    stage: str
    detail: str

    @classmethod
    def of(cls, task: Task, row: Pod) -> WorkerFacts:
        """The facts of ``row``, a Pod of ``task``."""
        sig = signals_of(row)
        who = f"{'Header' if task.head else 'Worker'} {row.name} (role {task.display_role or task.template_name})"
        detail = f"; first error: {sig['firstError']}" if sig.get("firstError") else ""
        stage = f" after stage '{sig['lastStage']}'" if sig.get("lastStage") else ""
        return cls(task, row, sig, row.container_state or {}, who, stage, detail)

    def failure(self, reason: str, message: str) -> Failure:
        """A :class:`Failure` of this Worker."""
        return Failure(reason, message, self.task.name, self.row.name, self.task.head)


def run_script_failed(w: WorkerFacts) -> Failure | None:
    """The header logged ``Run script exited with code N``, N != 0 (``RunScriptFailed``): upstream-rlark 5.4, "goes
    further" (a finished run script becomes Succeeded/Failed instead of a restart loop); peers 3.3 S5."""
    if w.signals.get("runExit") not in (None, 0):
        return w.failure("RunScriptFailed", f"{w.who}: run script exited with code {w.signals['runExit']}{w.detail}")
    return None


def header_exited(w: WorkerFacts) -> Failure | None:
    """The header's container exited non-zero before its run script ended (``HeaderExited``, with the last wrapper
    stage reached): upstream-rlark 5.4 (a failing prepare script or a missing Ray CLI exits the head) and 4.8, "goes
    further" (a non-zero wrapper exit marks the Task Failed)."""
    if w.signals.get("runExit") is None and w.row.exit_code not in (None, 0):
        return w.failure("HeaderExited", f"{w.who} exited with code {w.row.exit_code}{w.stage}{w.detail}")
    return None


def header_replaced(w: WorkerFacts) -> Failure | None:
    """The header's Pod was deleted or evicted while the job ran and a new one took its place (``HeaderReplaced``):
    a new Ray head loses the cluster (seed 01: a Worker is one Pod and starts one Ray node)."""
    if w.signals.get("runExit") is None and w.state.get("replaced"):
        return w.failure(
            "HeaderReplaced",
            f"{w.who} was replaced by a new Pod (the previous one was deleted or evicted): a new Ray head"
            f" loses the cluster{w.stage}{w.detail}",
        )
    return None


def header_restarted(w: WorkerFacts) -> Failure | None:
    """The header's container restarted (not by a restart of the runtime itself, ``runtime_restart.by_runtime``)
    before its run script ended (``HeaderRestarted``): a new Ray head loses the cluster; upstream-rlark 5.4 (a
    StatefulSet restarts the container whatever the code), "goes further"."""
    if w.signals.get("runExit") is None and w.row.restart_count > 0 and not runtime_restart.by_runtime(w.row):
        return w.failure(
            "HeaderRestarted",
            f"{w.who} restarted ({w.row.restart_count}x): a new Ray head loses the cluster{w.stage}{w.detail}",
        )
    return None


def ray_worker_exited(w: WorkerFacts) -> Failure | None:
    """A Worker logged ``Ray worker process exited with code N``, N != 0 (``WorkerExited``): seed 05 ("日志中的 Ray
    Worker 退出码非零时，应按失败处理"); upstream-rlark 5.4, "goes further"."""
    if w.signals.get("rayExit") not in (None, 0):
        return w.failure(
            "WorkerExited", f"{w.who}: Ray worker process exited with code {w.signals['rayExit']}{w.detail}"
        )
    return None


def worker_replaced(w: WorkerFacts) -> Failure | None:
    """A Worker's Pod failed, was deleted or evicted while the job ran and a new one took its place
    (``WorkerReplaced``): its Ray node left the cluster (each Pod is one Ray node, seed 01)."""
    if w.state.get("replaced"):
        return w.failure(
            "WorkerReplaced",
            f"{w.who} was replaced by a new Pod (the previous one failed, was deleted or evicted): its Ray"
            f" node left the cluster{w.stage}{w.detail}",
        )
    return None


def worker_exited(w: WorkerFacts) -> Failure | None:
    """A Worker's container exited non-zero (``WorkerExited``): upstream-rlark 4.8 and 5.4, "goes further" (the
    worker exits with the Ray process's code and a non-zero wrapper exit marks the Task Failed)."""
    if w.row.exit_code not in (None, 0):
        restarts = f" (restarted {w.row.restart_count} times)" if w.row.restart_count else ""
        return w.failure("WorkerExited", f"{w.who} exited with code {w.row.exit_code}{restarts}{w.stage}{w.detail}")
    return None


def crash_loop(w: WorkerFacts) -> Failure | None:
    """The container restarted ``RLARK_CRASHLOOP_LIMIT`` times or more (``CrashLoop``): peers 3.3 S1 ("Restarts above
    a limit -> job Failed, reason CrashLoop, pod and container named"); upstream-rlark 4.8, "goes further"."""
    if w.row.restart_count >= CRASHLOOP_LIMIT:
        reason = w.state.get("reason") or w.state.get("last_reason") or "restarting"
        return w.failure(
            "CrashLoop", f"{w.who}: container main restarted {w.row.restart_count} times ({reason}){w.detail}"
        )
    return None


# The first rule that matches names a Worker's failure; a crash loop only when none did.
HEADER_RULES: tuple[Callable[[WorkerFacts], Failure | None], ...] = (
    run_script_failed,
    header_exited,
    header_replaced,
    header_restarted,
)
WORKER_RULES: tuple[Callable[[WorkerFacts], Failure | None], ...] = (ray_worker_exited, worker_replaced, worker_exited)


def worker_failures(job: Job, task: Task, row: Pod) -> list[Failure]:
    """The failure of one Worker (at most one): the first of :data:`HEADER_RULES` or :data:`WORKER_RULES` that
    matches, else :func:`crash_loop`; none for a Pod of an earlier attempt."""
    if is_stale(job, row):
        return []
    facts = WorkerFacts.of(task, row)
    rules = HEADER_RULES if task.head else WORKER_RULES
    found = next((f for rule in rules if (f := rule(facts)) is not None), None) or crash_loop(facts)
    return [found] if found is not None else []


def image_pull_problem(row: Pod) -> str | None:
    """``"<pod>: <reason>: <message>"`` when the container waits on an image pull (``ErrImagePull``,
    ``ImagePullBackOff``, ...; ``clusters.runtime.base.IMAGE_PULL_REASONS``), else None."""
    state = row.container_state or {}
    if state.get("state") == "waiting" and state.get("reason") in IMAGE_PULL_REASONS:
        return f"{row.name}: {state.get('reason')}: {state.get('message') or ''}".strip().rstrip(":")
    return None


def stored_refusal(task: Task) -> str:
    """The cluster's refusal that the last sync stored in ``task.message`` (:func:`pending_reason`'s sentence), ""
    when there is none: what a page shows without asking the cluster again."""
    m = REFUSED_SENTENCE.match(task.message or "")
    return m.group("tail") if m else ""


def pending_reason(task: Task, pods: list[Pod], refused: str = "") -> str:
    """The first thing blocking a Task's Workers, in ordinal order (peers 3.4 P1: a Pending job names what blocks
    it): a Pod not created yet (with the cluster's own message when it ``refused`` to create it, e.g. a
    ResourceQuota's), else the container's or the Pod's reason, else the last Warning event; "" when every Worker
    runs."""
    by_ordinal = {p.ordinal: p for p in pods}
    for ordinal in range(task.replicas):
        pod = by_ordinal.get(ordinal)
        if pod is None and refused:
            return f"The cluster refuses to create Pod {task.name}-{ordinal}: {refused}"
        if pod is None:
            return f"Waiting for Pod {task.name}-{ordinal} to be created"
        if pod.phase == "Running" and (pod.container_state or {}).get("state") == "running":
            continue
        state = pod.container_state or {}
        if state.get("reason"):
            return f"{pod.name}: {state['reason']}{': ' + state['message'] if state.get('message') else ''}"
        if pod.reason or pod.message:
            return f"{pod.name}: {pod.reason}{': ' + pod.message if pod.message else ''}"
        warnings = [e for e in pod.events or [] if e.get("type") == "Warning"]
        if warnings:
            return f"{pod.name}: {warnings[-1].get('reason')}: {warnings[-1].get('message')}"
        return f"{pod.name}: {pod.phase}"
    return ""


# --- a job's Pods, tallied --------------------------------------------------------------------------------------


@dataclasses.dataclass
class TaskTally:
    """One Task's Pods of the current attempt: ``pods``, ``ready`` (count), its Workers' ``failures`` and the
    ``values`` to store on the Task (``ready_replicas``, ``observed_nodes``; or only ``message`` when its cluster
    is down), and the cluster's message when it ``refused`` to create the Task's missing Pods."""

    pods: list[Pod]
    ready: int
    failures: list[Failure]
    values: dict[str, Any]
    refused: str = ""


@dataclasses.dataclass
class JobTally:
    """What the Pod rows of one job say: per Task id a :class:`TaskTally`, every ``failure``, whether the header's
    run script ``succeeded``, ``ray_ready`` (None: the header logged nothing yet), ``check_failed`` (the header's
    Ray cluster check failed), ``image_problems`` and the ready/desired Worker totals."""

    tasks: dict[int, TaskTally] = dataclasses.field(default_factory=dict)
    failures: list[Failure] = dataclasses.field(default_factory=list)
    succeeded: bool = False
    ray_ready: bool | None = None
    check_failed: bool = False
    image_problems: list[str] = dataclasses.field(default_factory=list)
    ready_total: int = 0
    desired_total: int = 0


def tally(job: Job, tasks: list[Task], rows: dict[int, dict[str, Pod]], down: dict[int, str]) -> JobTally:
    """Read ``rows`` (Task id -> Pod name -> row; Pods of an earlier attempt left out) into a :class:`JobTally`.
    The header's signals decide ``succeeded`` (``Run script exited with code 0``), ``ray_ready`` (``Ray cluster is
    ready``) and ``check_failed`` (``Warning: Ray cluster check failed, proceeding anyway.``; upstream-rlark 5.1)."""
    out = JobTally()
    for task in tasks:
        pods = [p for p in rows.get(task.pk, {}).values() if not is_stale(job, p)]  # none yet: cluster down
        ready = sum(1 for p in pods if is_ready(p))
        nodes = sorted({p.node for p in pods if p.node})
        task_failures = []
        for pod in pods:
            task_failures += worker_failures(job, task, pod)
            sig = signals_of(pod)
            if task.head:
                out.ray_ready = bool(out.ray_ready or sig.get("rayReady"))
                out.check_failed = out.check_failed or bool(sig.get("clusterCheckFailed"))
                if sig.get("runExit") == 0:
                    out.succeeded = True
            if (problem := image_pull_problem(pod)) is not None:
                out.image_problems.append(problem)
        out.failures += task_failures
        out.ready_total += min(ready, task.replicas)
        out.desired_total += task.replicas
        values: dict[str, Any] = {"ready_replicas": ready}
        if nodes:
            values["observed_nodes"] = nodes
        if task.cluster_id in down:
            values = {"message": f"Cluster {task.cluster.name} is unreachable: {down[task.cluster_id]}"}
        out.tasks[task.pk] = TaskTally(pods, ready, task_failures, values)
    return out


# --- job conditions and phase -----------------------------------------------------------------------------------


def image_pull_condition(conditions: list[dict], seen: JobTally, now: datetime) -> list[dict]:
    """``ImagePullBackOff`` from the first sync that sees an image pull problem (peers 3.3 S2), cleared when none
    is left; after ``RLARK_IMAGE_PULL_GRACE`` seconds it is also a failure (``ImagePull``, appended to
    ``seen.failures``; upstream-rlark 4.8, "goes further")."""
    if seen.image_problems:
        conditions = set_condition(
            conditions, "ImagePullBackOff", True, "ImagePull", "; ".join(seen.image_problems), now
        )
        since = get_condition(conditions, "ImagePullBackOff")["lastTransitionTime"]
        if (now - datetime.fromisoformat(since)).total_seconds() >= IMAGE_PULL_GRACE:
            seen.failures.append(
                Failure("ImagePull", f"Image cannot be pulled: {seen.image_problems[0]}", "", "", False)
            )
    elif get_condition(conditions, "ImagePullBackOff"):
        conditions = set_condition(conditions, "ImagePullBackOff", False, "ImagePulled", "", now)
    return conditions


def job_phase(job: Job, tasks: list[Task], seen: JobTally, all_ready: bool) -> tuple[str, str]:
    """The phase and message of a job that is neither stopped nor finished (upstream-rlark 6.1, "goes further";
    peers 2.1), first match: ``Succeeded`` when the header's run script exited 0; ``Failed`` on any failure, the
    header's first (``seen.failures`` sorted so); ``Running`` when every Task has its Workers ready and the header
    logged ``Ray cluster is ready`` (or the job was Running already; peers 3.3 S3: not Running while a role's Pods
    are not ready); else ``Pending`` with the first blocking reason (:func:`pending_reason`)."""
    if seen.succeeded:
        return Phase.SUCCEEDED, "Run script exited with code 0"
    if seen.failures:
        seen.failures.sort(key=lambda f: not f.head)
        return Phase.FAILED, seen.failures[0].message
    if all_ready and (seen.ray_ready or job.phase == Phase.RUNNING):
        return Phase.RUNNING, f"All {seen.desired_total} Workers running"
    if all_ready:
        return Phase.PENDING, "All Workers started; waiting for the Ray cluster to form"
    blocking = next(
        (
            pending_reason(t, seen.tasks[t.pk].pods, seen.tasks[t.pk].refused)
            for t in tasks
            if seen.tasks[t.pk].ready < t.replicas
        ),
        "",
    )
    return Phase.PENDING, f"Waiting for Workers: {seen.ready_total}/{seen.desired_total} ready" + (
        f" ({blocking})" if blocking else ""
    )


# The API server's words when a ResourceQuota refuses an object (``pods "x-0" is forbidden: exceeded quota: ...``)
QUOTA_REFUSAL = "exceeded quota"


def replica_failure_condition(
    conditions: list[dict], tasks: list[Task], seen: JobTally, down: dict[int, str], now: datetime
) -> list[dict]:
    """``ReplicaFailure`` (the condition a Kubernetes ReplicaSet sets when it cannot create Pods) True with the
    cluster's own message while it refuses to create a Task's Pods (reason ``QuotaExceeded`` for a ResourceQuota,
    else ``FailedCreate``; seed 05 "尚未出现 Worker"); False (``PodsCreated``) once no Task is refused; kept as it
    was while one of the clusters is ``down`` (nothing new is known). A stopped or finished job's is False with
    reason ``NoPodsWanted`` (``aggregate``)."""
    refused = [(t, seen.tasks[t.pk].refused) for t in tasks if seen.tasks[t.pk].refused]
    if refused:
        task, message = refused[0]
        reason = "QuotaExceeded" if QUOTA_REFUSAL in message else "FailedCreate"
        text = f"Role {task.display_role or task.template_name}: {message}"
        return set_condition(conditions, "ReplicaFailure", True, reason, text, now)
    if get_condition(conditions, "ReplicaFailure") and not any(t.cluster_id in down for t in tasks):
        return set_condition(conditions, "ReplicaFailure", False, "PodsCreated", "", now)
    return conditions


def workers_ready_condition(conditions: list[dict], seen: JobTally, all_ready: bool, now: datetime) -> list[dict]:
    """``WorkersReady``: every Task has its Workers ready, with ``<ready>/<desired> Workers ready`` (peers 2.1:
    per-role ready counts)."""
    return set_condition(
        conditions,
        "WorkersReady",
        all_ready,
        "AllWorkersReady" if all_ready else "WorkersNotReady",
        f"{seen.ready_total}/{seen.desired_total} Workers ready",
        now,
    )


def ray_ready_condition(conditions: list[dict], seen: JobTally, now: datetime) -> list[dict]:
    """``RayClusterReady`` once the header logged anything: True when it logged ``Ray cluster is ready`` and its
    cluster check did not fail (seed 05: "不要只凭 Head 就绪文本判断集群完整": a failed check hides behind
    "ready", so it is ``RayClusterCheckFailed``)."""
    ready, failed = seen.ray_ready, seen.check_failed
    return set_condition(
        conditions,
        "RayClusterReady",
        bool(ready) and not failed,
        ("RayClusterCheckFailed" if failed else "RayClusterReady") if ready else "WaitingForRay",
        (CHECK_FAILED if failed else "Ray cluster is ready")
        if ready
        else "The header has not logged 'Ray cluster is ready' yet",
        now,
    )


def cluster_reachable_condition(
    conditions: list[dict], tasks: list[Task], down: dict[int, str], now: datetime
) -> list[dict]:
    """``ClusterReachable`` False naming the clusters that did not answer (their Tasks keep their last known
    state; peers 3.5 M1), back to True once they answer again."""
    down_names = sorted({t.cluster.name for t in tasks if t.cluster_id in down})
    if down_names:
        return set_condition(
            conditions, "ClusterReachable", False, "ClusterOffline", f"Unreachable: {', '.join(down_names)}", now
        )
    if get_condition(conditions, "ClusterReachable"):
        return set_condition(conditions, "ClusterReachable", True, "ClusterOnline", "", now)
    return conditions


def task_phase(task: Task, counted: TaskTally, job: Job, phase: str, failed_tasks: set[str]) -> dict[str, Any]:
    """A Task's ``{"phase", "message"}`` under the job's new ``phase`` (first match): ``Stopped`` when the job is
    stopped; ``Succeeded`` with the job; ``Failed`` with its Worker's failure when it caused the job's; ``Stopped``
    (or kept ``Failed``, with its message) for the other Tasks of a failed or finished job; ``Running`` when ready
    Workers >= replicas > 0; else ``Pending`` with the first blocking reason. Upstream-rlark 4.8 (StatefulSet:
    replicas 0 -> Stopped, ready >= desired -> Running, else Pending) and its "goes further" (Failed from the Pods)."""
    old_phase = job.phase
    terminal = old_phase in controller.TERMINAL
    if job.stopped or old_phase == Phase.STOPPED:
        return {"phase": Phase.STOPPED, "message": ""}
    if phase == Phase.SUCCEEDED or (terminal and old_phase == Phase.SUCCEEDED):
        return {"phase": Phase.SUCCEEDED, "message": ""}
    if phase == Phase.FAILED and task.name in failed_tasks and counted.failures:
        return {"phase": Phase.FAILED, "message": counted.failures[0].message}
    if phase == Phase.FAILED or terminal:
        failed = task.phase == Phase.FAILED
        return {"phase": task.phase if failed else Phase.STOPPED, "message": task.message if failed else ""}
    if counted.ready >= task.replicas and task.replicas > 0:
        return {"phase": Phase.RUNNING, "message": ""}
    return {"phase": Phase.PENDING, "message": pending_reason(task, counted.pods, counted.refused)}


def task_changes(
    job: Job, tasks: list[Task], seen: JobTally, phase: str, down: dict[int, str]
) -> dict[int, dict[str, Any]]:
    """Task id -> the fields that change (the tally's values and :func:`task_phase`); a Task whose cluster is
    down keeps its phase and only says so in its message."""
    failed_tasks = {f.task for f in seen.failures}
    out: dict[int, dict[str, Any]] = {}
    for task in tasks:
        counted = seen.tasks[task.pk]
        values = dict(counted.values)
        if task.cluster_id not in down:
            values.update(task_phase(task, counted, job, phase, failed_tasks))
        changes = {k: v for k, v in values.items() if getattr(task, k) != v}
        if changes:
            out[task.pk] = changes
    return out


def job_fields(job: Job, phase: str, message: str, conditions: list[dict], now: datetime) -> dict[str, Any]:
    """The Job fields that change: ``phase`` (with ``finished_at`` on reaching Succeeded/Failed and ``started_at``
    the first time it runs; upstream-rlark 6.1), ``message``, ``conditions``."""
    out: dict[str, Any] = {}
    if phase != job.phase:
        out["phase"] = phase
        if phase in controller.TERMINAL:
            out["finished_at"] = now
        if phase == Phase.RUNNING and job.started_at is None:
            out["started_at"] = now
    if message != job.message:
        out["message"] = message
    if conditions != (job.conditions or []):
        out["conditions"] = conditions
    return out


def aggregate(
    job: Job,
    tasks: list[Task],
    rows: dict[int, dict[str, Pod]],
    down: dict[int, str],
    now: datetime,
    refusals: dict[int, str] | None = None,
) -> tuple[dict[int, dict[str, Any]], dict[str, Any], bool]:
    """Recompute Task and Job status from the Pod rows (nothing is written).

    ``rows``: Task id -> Pod name -> row; ``down``: cluster id -> reason (its Tasks keep their last known state);
    ``refusals``: Task id -> the cluster's message for refusing to create its Pods (``ReplicaFailure``).
    Returns ``(task id -> changed fields, changed Job fields, terminal_now)``; ``terminal_now`` is True when
    the job just reached Succeeded/Failed (the caller then archives logs and scales it down). A stopped or finished
    job keeps its phase and message (upstream-rlark 6.1: Succeeded and Failed are terminal)."""
    seen = tally(job, tasks, rows, down)
    for task in tasks:
        if task.cluster_id not in down:
            seen.tasks[task.pk].refused = (refusals or {}).get(task.pk, "")
    conditions = image_pull_condition(list(job.conditions or []), seen, now)
    head_task = next((t for t in tasks if t.head), None)
    if head_task is None:
        seen.ray_ready = True
    phase, message = job.phase, job.message
    if not (job.stopped or job.phase == Phase.STOPPED) and job.phase not in controller.TERMINAL:
        all_ready = seen.desired_total > 0 and all(seen.tasks[t.pk].ready >= t.replicas for t in tasks)
        nodes = ray_nodes.tally_nodes(job, tasks, rows)
        conditions = ray_nodes.nodes_condition(conditions, nodes, now)
        if (late := ray_nodes.start_timeout_failure(job, conditions, nodes, now)) is not None:
            seen.failures.append(Failure("StartTimeout", late, "", "", False))
        phase, message = job_phase(job, tasks, seen, all_ready)
        conditions = workers_ready_condition(conditions, seen, all_ready, now)
        conditions = replica_failure_condition(conditions, tasks, seen, down, now)
        if seen.ray_ready is not None and head_task is not None:
            conditions = ray_ready_condition(conditions, seen, now)
        if phase == Phase.SUCCEEDED:
            conditions = set_condition(conditions, "Succeeded", True, "RunScriptSucceeded", message, now)
        if phase == Phase.FAILED:
            conditions = set_condition(conditions, "Failed", True, seen.failures[0].reason, message, now)
    elif (refusal := get_condition(conditions, "ReplicaFailure")) and refusal.get("status") == "True":
        conditions = set_condition(conditions, "ReplicaFailure", False, "NoPodsWanted", "", now)  # stopped, ended
    conditions = cluster_reachable_condition(conditions, tasks, down, now)
    changes = task_changes(job, tasks, seen, phase, down)
    fields = job_fields(job, phase, message, conditions, now)
    return changes, fields, phase != job.phase and phase in controller.TERMINAL
