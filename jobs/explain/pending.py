"""Why a role's Workers are still pending (seed 05 "Job 长时间处于 Pending"; peers 3.4 P1/P3, 3.3 S9).

For each role (Task) of a Job, :func:`pending_reasons` returns the reasons its Workers are not running yet, in
the order seed 05 asks to check them:

- ``no_pod``: the runtime has not created the Pod yet (``尚未出现 Worker``);
- ``unschedulable``: the scheduler's own message, plus the blocking resource (``nvidia.com/gpu need 8, free 3``):
  taken from the message when the runtime states it, otherwise computed from the free resources
  (allocatable - used) of the online, schedulable nodes matching the role's ``nodeSelector``;
- ``pvc_unbound``: a PersistentVolumeClaim not bound (names the claim: the scheduler's, else the role's claims);
  one that does not exist (deleted, or not created yet) is said so and never blamed on its StorageClass (the events
  of a deleted claim are not about the claim the console creates again);
- ``image_pull``: ``ErrImagePull`` / ``ImagePullBackOff`` ... from the container state or the Pod events;
- ``prepare_running``: the log reached ``Executing prepare script...`` but no later wrapper marker yet.

Messages name the RLark job and role, never scheduler jargon (peers 3.4 P3): English msgids in :data:`MESSAGES`,
rendered in the language asked for through the zh_Hans catalog of ``jobs`` (``jobs/locale``).
Inputs are plain dicts (``RoleInput``, ``NodeView``) so the rules are testable without a database;
:func:`job_pending_reasons` builds them from the database.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from django.utils.translation import gettext_noop

from clusters.models import Node
from clusters.quantity import format_number, parse_quantity
from clusters.runtime.base import IMAGE_PULL_REASONS, RuntimeFailure
from clusters.runtime.registry import get_runtime
from clusters.selectors import matches, template_selector
from jobs.jobspec.layout import main_container
from jobs.observe.log_markers import LogScan, scan_log
from jobs.observe.phases import QUOTA_REFUSAL, stored_refusal
from jobs.observe.sync_fetch import stale
from jobs.observe.worker_logs import read_logs
from rlark_console.language import translate

UNSCHEDULABLE_RE = re.compile(r"Unschedulable|FailedScheduling|nodes? (are|is) available|didn't match|Insufficient")
PVC_RE = re.compile(
    r"persistentvolumeclaim \"(?P<missing>[^\"]+)\" (?:not found|is being deleted)"
    r"|pod has unbound immediate PersistentVolumeClaims"
    r"|PersistentVolumeClaim (?P<name2>\S+) (is )?not (?P<how>bound|found)"
    r"|unbound PersistentVolumeClaim",
    re.IGNORECASE,
)
MAX_NAMED_CLAIMS = 5  # claims named in one reason when the scheduler names none
NEED_FREE_RE = re.compile(r"(?P<res>[\w./-]+) need (?P<need>[\d.]+), free (?P<free>[\d.]+)")
INSUFFICIENT_RE = re.compile(r"Insufficient (?P<res>[\w./-]+)")

# reason code (or sentence of the unschedulable message) -> English msgid; {placeholders} from the reason's params.
MESSAGES: dict[str, str] = {
    "no_pod": gettext_noop(
        "Job {job}, role {role}: the Pod of Worker {pod} has not been created yet. Check that the cluster is online,"
        " that matching nodes are schedulable and that replicas > 0."
    ),
    "unschedulable": gettext_noop(
        "Job {job}, role {role}: Worker {pod} cannot be scheduled. {blocking}Scheduler message: {message}"
    ),
    "blocking": gettext_noop("Blocking resource: {resource}. "),
    "cordoned_only": gettext_noop(
        "Every node matching selector {selector} is cordoned ({nodes}): uncordon one or change the selector. "
    ),
    "no_node": gettext_noop("No online, schedulable node matches selector {selector}. "),
    "pvc_missing": gettext_noop(
        "Job {job}, role {role}: the volume claim {pvc} of Worker {pod} does not exist in the cluster (it was deleted"
        " or not created yet). Ask an administrator why it was removed; one Restart of the job then creates it"
        " again."
    ),
    "pvc_unbound": gettext_noop(
        "Job {job}, role {role}: the volume claim {pvc} of Worker {pod} is not bound. Check that the PVC can be"
        " created and mounted through the chosen StorageClass."
    ),
    "storage_class_not_found": gettext_noop(
        "Job {job}, role {role}: the volume claim {pvc} of Worker {pod} cannot be provisioned because the"
        " StorageClass {sc} does not exist in the cluster. Choose a StorageClass the cluster has (Storage), or ask"
        " an administrator to create it."
    ),
    "pvc_provisioning_failed": gettext_noop(
        "Job {job}, role {role}: the volume claim {pvc} of Worker {pod} cannot be provisioned. Cluster message:"
        " {message}"
    ),
    "quota_exceeded": gettext_noop(
        "Job {job}, role {role}: the cluster refuses to create the Pod of Worker {pod}: the namespace's"
        " ResourceQuota is used up. Ask an administrator to raise it, or lower the job's replicas and requests."
        " Cluster message: {message}"
    ),
    "create_failed": gettext_noop(
        "Job {job}, role {role}: the cluster refuses to create the Pod of Worker {pod}. Cluster message: {message}"
    ),
    "image_pull": gettext_noop("Job {job}, role {role}: Worker {pod} cannot pull its image ({reason}): {message}"),
    "prepare_running": gettext_noop(
        "Job {job}, role {role}: the prepare script of Worker {pod} is still running (the log shows Executing"
        " prepare script... and nothing after it)."
    ),
    "starting": gettext_noop("Job {job}, role {role}: Worker {pod} is starting ({phase})."),
}


def _msg(key: str, lang: str, **params: Any) -> str:
    """``MESSAGES[key]`` in ``lang`` with ``params`` filled in (the bare sentence when a placeholder is missing)."""
    text = translate(MESSAGES[key], lang)
    try:
        return text.format(**params)
    except (KeyError, IndexError, ValueError):
        return text


@dataclass
class NodeView:
    """A node as the console knows it: labels, allocatable (or capacity) and used resources (numbers)."""

    name: str
    labels: dict[str, str] = field(default_factory=dict)
    allocatable: dict[str, float] = field(default_factory=dict)
    used: dict[str, float] = field(default_factory=dict)
    online: bool = True
    unschedulable: bool = False

    def free(self, resource: str) -> float:
        total = float(self.allocatable.get(resource, 0) or 0)
        return max(0.0, total - float(self.used.get(resource, 0) or 0))


@dataclass
class PodView:
    """What pending analysis reads of one Pod row (see ``jobs.observe.sync_rows.pod_values``)."""

    name: str
    ordinal: int = 0
    phase: str = "Pending"
    reason: str = ""
    message: str = ""
    container: dict[str, Any] = field(default_factory=dict)
    events: list[dict[str, Any]] = field(default_factory=list)
    last_stage: str | None = None  # diagnosis stage key of its log, None when unknown


@dataclass
class RoleInput:
    """One role (Task): expected replicas, per-Worker requests (resource -> amount), selector and its Pods."""

    job: str
    role: str
    task: str
    replicas: int
    requests: dict[str, float] = field(default_factory=dict)
    selector: dict[str, str] = field(default_factory=dict)
    pods: list[PodView] = field(default_factory=list)
    # Warning events of the role's StatefulSet (``FailedCreate``: quota, admission) and of its volume claims
    # (``ProvisioningFailed``), newest first: ``[{"reason", "message"}]`` / ``{claim: [{"reason", "message"}]}``
    workload_events: list[dict[str, Any]] = field(default_factory=list)
    claims: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    # the claim names its Pod template mounts (from the stored spec: no runtime call), named when the scheduler
    # says only "unbound immediate PersistentVolumeClaims"
    claim_names: list[str] = field(default_factory=list)


STORAGE_CLASS_RE = re.compile(r'storageclass\.storage\.k8s\.io "(?P<sc>[^"]+)" not found')


def _create_refusal(role: RoleInput) -> tuple[str, str] | None:
    """``(code, message)`` when the runtime refuses to create the role's Pods (seed 05: 尚未出现 Worker)."""
    for e in role.workload_events:
        if str(e.get("reason")) == "FailedCreate" and e.get("message"):
            message = str(e["message"])
            return ("quota_exceeded" if QUOTA_REFUSAL in message else "create_failed"), message
    return None


def _claim_problem(role: RoleInput, pvc: str) -> tuple[str, dict[str, str]] | None:
    """``(code, params)`` from the Warning events of the claim ``pvc`` (or of any claim of the role when the
    scheduler did not name it: ``pvc`` ""); a named claim is never blamed on another claim's events."""
    names = [pvc] if pvc else sorted(role.claims)
    for name in names:
        for e in role.claims.get(name) or []:
            message = str(e.get("message") or "")
            if m := STORAGE_CLASS_RE.search(message):
                return "storage_class_not_found", {"pvc": name, "sc": m.group("sc")}
            if str(e.get("reason")) == "ProvisioningFailed" and message:
                return "pvc_provisioning_failed", {"pvc": name, "message": message}
    return None


@dataclass
class PendingReason:
    """One reason. ``code`` in ``no_pod|quota_exceeded|create_failed|unschedulable|pvc_unbound|
    storage_class_not_found|pvc_provisioning_failed|image_pull|prepare_running|starting``;
    ``resource`` e.g. ``nvidia.com/gpu need 8, free 3`` (unschedulable only, "" when unknown); ``pvc_unbound`` with
    ``params["missing"]`` True says that the claim does not exist (message ``pvc_missing``)."""

    code: str
    role: str
    pod: str
    params: dict[str, Any] = field(default_factory=dict)
    resource: str = ""

    def message(self, lang: str = "zh-hans") -> str:
        params = dict(self.params)
        if self.code == "unschedulable":
            if params.get("cordoned"):
                params["blocking"] = _msg(
                    "cordoned_only", lang, selector=params.get("selector", ""), nodes=params["cordoned"]
                )
            elif self.resource:
                params["blocking"] = _msg("blocking", lang, resource=self.resource)
            elif params.get("no_node"):
                params["blocking"] = _msg("no_node", lang, selector=params.get("selector", ""))
            else:
                params["blocking"] = ""
        key = "pvc_missing" if self.code == "pvc_unbound" and params.get("missing") else self.code
        return _msg(key, lang, role=self.role, pod=self.pod, **params)

    def to_dict(self, lang: str = "zh-hans") -> dict[str, Any]:
        return {
            "code": self.code,
            "role": self.role,
            "pod": self.pod,
            "resource": self.resource,
            "message": self.message(lang),
        }


def blocking_resources(requests: dict[str, float], selector: dict[str, str], nodes: list[NodeView]) -> list[str]:
    """``["<res> need <n>, free <m>"]`` for each requested resource no matching node can satisfy.

    ``free`` is the largest free amount of that resource on one online, schedulable node matching ``selector``
    (a Worker needs all of it on a single node). Memory is shown in GiB, CPU in cores.
    """
    candidates = [n for n in nodes if n.online and not n.unschedulable and matches(selector, n.labels)]
    out = []
    for res, need in requests.items():
        if not need or need <= 0:
            continue
        best = max((n.free(res) for n in candidates), default=0.0)
        if best + 1e-9 < need:
            out.append(f"{res} need {_fmt(res, need)}, free {_fmt(res, best)}")
    return out


def _fmt(res: str, value: float) -> str:
    if res == "memory":
        return f"{format_number(round(value / 2**30, 2))}Gi"
    return format_number(round(value, 3))


def _is_unschedulable(pod: PodView) -> bool:
    if pod.reason == "Unschedulable":
        return True
    if UNSCHEDULABLE_RE.search(pod.message or "") and pod.phase == "Pending":
        return True
    return any(str(e.get("reason")) == "FailedScheduling" for e in pod.events or [])


def _scheduler_message(pod: PodView) -> str:
    for e in reversed(pod.events or []):
        if str(e.get("reason")) == "FailedScheduling" and e.get("message"):
            return str(e["message"])
    return pod.message or pod.reason


@dataclass(frozen=True)
class ClaimBlock:
    """A Pod held back by a volume claim: ``name`` as the scheduler states it ("" when it names none) and whether
    the claim is ``missing`` (``persistentvolumeclaim "x" not found`` or ``... is being deleted``) rather than
    unbound."""

    name: str
    missing: bool


def _pvc(pod: PodView) -> ClaimBlock | None:
    """The claim that holds ``pod`` back, from its own message first, then its events (newest last, as stored);
    None when no claim does."""
    texts = [pod.message or ""] + [str(e.get("message") or "") for e in pod.events or []]
    for text in texts:
        m = PVC_RE.search(text)
        if m:
            if m.group("missing"):
                return ClaimBlock(m.group("missing"), True)
            return ClaimBlock(m.group("name2") or "", (m.group("how") or "").lower() == "found")
    return None


def _claim_label(block: ClaimBlock, role: RoleInput) -> str:
    """The claim(s) to name: the scheduler's, else those of the role's Pod template (at most
    :data:`MAX_NAMED_CLAIMS`), else ``?`` (a template without claims: nothing to name)."""
    if block.name:
        return block.name
    names = role.claim_names[:MAX_NAMED_CLAIMS]
    return ", ".join(names) + (", …" if len(role.claim_names) > MAX_NAMED_CLAIMS else "") if names else "?"


def role_reasons(role: RoleInput, nodes: list[NodeView]) -> list[PendingReason]:
    """Reasons the Workers of ``role`` are not running, one per blocked Worker (first matching rule)."""
    out: list[PendingReason] = []
    pods = {p.ordinal: p for p in role.pods}
    base = {"job": role.job}
    for ordinal in sorted(set(range(role.replicas)) | set(pods)):
        pod = pods.get(ordinal)
        name = pod.name if pod else f"{role.task}-{ordinal}"
        if pod is None:
            refusal = _create_refusal(role)
            if refusal is not None:
                out.append(PendingReason(refusal[0], role.role, name, {**base, "message": refusal[1]}))
            else:
                out.append(PendingReason("no_pod", role.role, name, base))
            continue
        state = pod.container or {}
        running = pod.phase == "Running" and state.get("state") in ("running", None, "")
        if pod.phase in ("Succeeded", "Failed"):
            continue
        block = _pvc(pod)
        if block is not None:
            pvc = _claim_label(block, role)
            problem = None if block.missing else _claim_problem(role, block.name)
            if problem is not None:
                out.append(PendingReason(problem[0], role.role, name, {**base, **problem[1]}))
            else:
                params = {**base, "pvc": pvc, "missing": block.missing}
                out.append(PendingReason("pvc_unbound", role.role, name, params))
            continue
        if pod.phase == "Pending" and _is_unschedulable(pod):
            message = _scheduler_message(pod)
            stated = NEED_FREE_RE.search(message)
            if stated:
                resource = stated.group(0)
            else:
                blocking = blocking_resources(role.requests, role.selector, nodes)
                named = [m.group("res") for m in INSUFFICIENT_RE.finditer(message)]
                if named:
                    blocking = [b for b in blocking if b.split(" ")[0] in named] or blocking
                resource = "; ".join(blocking)
            candidates = [n for n in nodes if n.online and not n.unschedulable and matches(role.selector, n.labels)]
            params = {**base, "message": message, "no_node": not candidates and not resource}
            params["selector"] = ",".join(f"{k}={v}" for k, v in role.selector.items())
            matched = [n for n in nodes if matches(role.selector, n.labels)] if role.selector else []
            if matched and all(n.unschedulable for n in matched):  # cordoned, not merely full or offline
                params["cordoned"] = ", ".join(sorted(n.name for n in matched)[:10])
            out.append(PendingReason("unschedulable", role.role, name, params, resource=resource))
            continue
        pull_reason = state.get("reason") if state.get("reason") in IMAGE_PULL_REASONS else None
        pull_message = state.get("message") or ""
        if pull_reason is None:
            for e in pod.events or []:
                if str(e.get("reason")) in IMAGE_PULL_REASONS or (
                    str(e.get("reason")) in ("Failed", "BackOff") and re.search(r"(?i)pull", str(e.get("message")))
                ):
                    pull_reason, pull_message = str(e.get("reason")), str(e.get("message") or "")
                    break
        if pull_reason:
            out.append(
                PendingReason("image_pull", role.role, name, {**base, "reason": pull_reason, "message": pull_message})
            )
            continue
        if pod.last_stage == "prepare" and pod.phase in ("Running", "Pending"):
            out.append(PendingReason("prepare_running", role.role, name, base))
            continue
        if not running:
            out.append(PendingReason("starting", role.role, name, {**base, "phase": state.get("reason") or pod.phase}))
    return out


def pending_reasons(roles: list[RoleInput], nodes: list[NodeView]) -> dict[str, list[PendingReason]]:
    """``{role name: [PendingReason, ...]}`` for every role (empty list when nothing blocks it)."""
    return {role.role: role_reasons(role, nodes) for role in roles}


# --- database ---------------------------------------------------------------------------------------------


def _requests_of(template: dict) -> dict[str, float]:
    resources = main_container(template).get("resources") or {}
    merged = {**(resources.get("limits") or {}), **(resources.get("requests") or {})}
    out: dict[str, float] = {}
    for key, value in merged.items():
        try:
            out[str(key)] = parse_quantity(value)
        except ValueError:
            continue
    return out


def _needs_stage(p) -> bool:
    """A Pod whose last wrapper stage explains why it is not ready yet."""
    return p.phase in ("Running", "Pending") and not (p.container_state or {}).get("ready")


def role_inputs(
    job, with_logs: bool = True, tasks: list | None = None, scans: dict[str, LogScan] | None = None
) -> list[RoleInput]:
    """Build :class:`RoleInput` rows from the Job's Tasks, Pod rows and spec templates.

    ``tasks``: the job's Tasks with ``cluster`` and ``pods`` loaded, when the caller has them; ``scans``: Pod name
    -> the stored scan of its log (the Diagnosis tab's, ``jobs.observe.log_scans``); without them the needed
    logs are read together and scanned. ``with_logs`` False (the overview) asks the cluster nothing: a refusal to
    create Pods is the one the sync stored (``phases.stored_refusal``)."""

    templates = {str(t.get("name")): t for t in job.spec_section.get("tasks") or [] if isinstance(t, dict)}
    if tasks is None:
        tasks = list(job.tasks.select_related("cluster").prefetch_related("pods").order_by("order"))
    scans = dict(scans or {})
    if with_logs:
        wanted = [p.name for t in tasks for p in t.pods.all() if _needs_stage(p) and p.name not in scans]
        if wanted:
            scans.update({name: scan_log(text) for name, text in read_logs(job, tasks, wanted).items()})
    out = []
    for task in tasks:
        template = templates.get(task.template_name, {})
        pods = []
        for p in task.pods.all():
            last_stage = None
            if with_logs and _needs_stage(p):
                stage = (scans.get(p.name) or LogScan()).last_stage
                last_stage = stage.key if stage else None
            pods.append(
                PodView(
                    name=p.name,
                    ordinal=p.ordinal,
                    phase=p.phase,
                    reason=p.reason,
                    message=p.message,
                    container=dict(p.container_state or {}),
                    events=list(p.events or []),
                    last_stage=last_stage,
                )
            )
        role = RoleInput(
            job=job.name,
            role=task.display_role or task.template_name,
            task=task.name,
            replicas=task.replicas if not job.stopped else 0,
            requests=_requests_of(template),
            selector=template_selector(template),
            pods=pods,
            claim_names=_claims_of(template),
        )
        if with_logs:
            _add_workload_events(task, template, role, job.started_at)
        elif refused := stored_refusal(task):  # a page without cluster calls: the refusal the sync stored
            role.workload_events = [{"reason": "FailedCreate", "message": refused}]
        out.append(role)
    return out


def _claims_of(template: dict) -> list[str]:
    spec = ((template.get("kubernetes") or {}).get("workload") or {}).get("template") or {}
    volumes = (spec.get("spec") or {}).get("volumes") or []
    return [
        str(v["persistentVolumeClaim"]["claimName"])
        for v in volumes
        if isinstance(v, dict)
        and isinstance(v.get("persistentVolumeClaim"), dict)
        and v["persistentVolumeClaim"].get("claimName")
    ]


def _add_workload_events(task, template: dict, role: RoleInput, started_at: datetime | None = None) -> None:
    """Ask the runtime for the Warning events that explain a role without Pods (its StatefulSet) or with an
    unbound claim (its PVCs); only then, so a healthy job costs no call. A StatefulSet event from before the job's
    current start (``started_at``) is of an earlier run and is left out, as the status sync does
    (``sync_fetch.stale``). An unreachable cluster adds nothing."""
    missing_pod = len(role.pods) < role.replicas
    claims = role.claim_names
    unbound = any((b := _pvc(p)) is not None and not b.missing for p in role.pods)
    if not (missing_pod or (claims and unbound)):
        return
    try:
        runtime = get_runtime(task.cluster)
        namespace = task.cluster.namespace
        if missing_pod:
            events = runtime.warning_events(namespace, "StatefulSet", [task.name]).get(task.name, [])
            events = [e for e in events if not stale(started_at, e.last_time)]  # as the sync: this run's only
            role.workload_events = [{"reason": e.reason, "message": e.message} for e in events]
        if claims and unbound:
            found = runtime.warning_events(namespace, "PersistentVolumeClaim", claims)
            role.claims = {c: [{"reason": e.reason, "message": e.message} for e in found.get(c, [])] for c in claims}
    except RuntimeFailure:
        return


def node_views(job, tasks: list | None = None) -> list[NodeView]:
    """The nodes of every cluster the Job's Tasks (``tasks`` when loaded already) run on."""

    if tasks is None:
        cluster_ids = set(job.tasks.values_list("cluster_id", flat=True))
    else:
        cluster_ids = {t.cluster_id for t in tasks}
    out = []
    for n in Node.objects.filter(cluster_id__in=cluster_ids, system=False):
        alloc = n.allocatable or n.capacity or {}
        out.append(
            NodeView(
                name=n.name,
                labels=dict(n.labels or {}),
                allocatable={k: _num(v) for k, v in alloc.items()},
                used={k: _num(v) for k, v in (n.used or {}).items()},
                online=n.online,
                unschedulable=n.unschedulable,
            )
        )
    return out


def _num(value: Any) -> float:
    try:
        return parse_quantity(value)
    except ValueError:
        return 0.0


def job_pending_reasons(
    job, with_logs: bool = True, tasks: list | None = None, scans: dict[str, LogScan] | None = None
) -> dict[str, list[PendingReason]]:
    """Pending reasons of every role of a stored Job (``tasks`` and ``scans`` as in :func:`role_inputs`)."""
    return pending_reasons(role_inputs(job, with_logs=with_logs, tasks=tasks, scans=scans), node_views(job, tasks))
