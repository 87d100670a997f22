"""The real-robot safety gate: a robot job starts only with a current safety approval.

Seed 03-onboard-existing-rlinf-workload (§ 接入真机任务前完成安全确认): any job that may connect to or drive a real
robot is first confirmed by the device team and a safety approver on five items (:data:`ITEMS`, the seed's words in
the Chinese catalog); "全部确认后，再把安全审批结果和停止方案写入本次运行记录" (the Run check record,
``jobs.explain.runcheck_record``, seed 02-confirm-job-running check 6).

- Which jobs: ``jobs.jobspec.robot.robot_reasons`` (a robot/edge node selected, a robot device requested, robot
  hardware in the RLinf config); the validator warns with code ``robot_job``.
- The approval (:func:`approve`): by a user with permission ``jobs.approve_robot_job`` who is not the job's owner,
  all five items confirmed, a stop plan of 1-:data:`MAX_STOP_PLAN` characters; it covers the spec hash
  (``jobs.jobspec.robot.spec_hash``), so an edit makes it no longer apply. Audited as ``job.safety_approve``.
- The gate (:func:`check_start`): Start, Restart, Resume and an edit of a running job raise
  :class:`SafetyGateClosed` for a robot job without a current approval; the reconcile stops one that is marked
  running without it (:func:`closed_gate`, the last line of defence); Stop is never gated.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from django.db import transaction
from django.utils.translation import gettext as _
from django.utils.translation import gettext_noop

from accounts.audit import record
from clusters.models import Node
from jobs.jobspec.inventory import NodeInfo
from jobs.jobspec.messages import Problem
from jobs.jobspec.robot import ROBOT_CATEGORIES, RobotReason, robot_reasons, spec_hash
from jobs.jobspec.validator import ValidationResult
from jobs.models import Job, SafetyApproval
from rlark_console import pagetime
from rlark_console.language import lang, translate

PERMISSION = "jobs.approve_robot_job"
MAX_STOP_PLAN = 4000  # characters of the stop plan
# key -> English msgid; the Chinese catalog holds the seed's exact wording (03-onboard-existing-rlinf-workload).
ITEMS: dict[str, str] = {
    "compatibility": gettext_noop(
        "Compatibility of the device, firmware, driver, SDK, control mode and image versions."
    ),
    "site": gettext_noop(
        "The on-site operator, the isolated area, control of who enters it, and a named safety owner."
    ),
    "stop": gettext_noop("Tested handling of emergency stop, power-off, reset and communication loss."),
    "limits": gettext_noop("Speed, force, travel and workspace limits, and the stop conditions for abnormal motion."),
    "data": gettext_noop("The approval, audit and recovery plan for data and control commands."),
}


class SafetyGateClosed(Exception):
    """A robot job without a current safety approval was asked to run. ``result``: a ``ValidationResult`` with
    one error (code ``safety_approval_missing`` or ``safety_approval_stale``) whose message says what is missing;
    ``code`` the same code; ``str(exc)`` the message in the active language."""

    def __init__(self, problem: Problem):
        super().__init__(problem.message(lang()))
        self.code = problem.code
        self.result = ValidationResult([problem])


class ApprovalRefused(Exception):
    """An approval that cannot be given; ``errors``: sentences in the active language, ``code``: ``forbidden``
    (no permission), ``own_job``, ``not_robot_job`` or ``invalid`` (items or stop plan)."""

    def __init__(self, code: str, errors: list[str]):
        super().__init__(" ".join(errors))
        self.code = code
        self.errors = errors


@dataclass
class Gate:
    """The gate of one job as stored now. ``reasons``: why it is a robot job (``[]``: not one); ``approval``: its
    newest approval or None; ``current``: that approval covers the job's spec hash."""

    reasons: list[RobotReason] = field(default_factory=list)
    approval: SafetyApproval | None = None
    current: bool = False

    @property
    def robot(self) -> bool:
        return bool(self.reasons)

    @property
    def open(self) -> bool:
        """True when the job may start: not a robot job, or approved for exactly this spec."""
        return not self.reasons or self.current


def reasons_text(reasons: list[RobotReason]) -> str:
    """The reasons in one language-neutral line: ``franka: local/arm-1 (robot); franka: rlinf.io/device-franka;
    RLinf: Franka``."""
    return "; ".join(f"{r.role or 'RLinf'}: {r.detail}" for r in reasons)


def robot_nodes() -> list[NodeInfo]:
    """Every node with its cluster, labels and category (one query; none when no node is of category ``robot`` or
    ``edge``, since then no selector can make a robot job, ``jobs.jobspec.robot``)."""
    rows = list(Node.objects.values("cluster__name", "name", "labels", "category"))
    if not any(r["category"] in ROBOT_CATEGORIES for r in rows):
        return []
    return [NodeInfo(r["cluster__name"], r["name"], labels=r["labels"] or {}, category=r["category"]) for r in rows]


def gate(job: Job) -> Gate:
    """The :class:`Gate` of ``job``: one query for the robot nodes, one more for its newest approval when it is a
    robot job (a job that drives no robot has an empty gate, whatever it was once approved for)."""
    reasons = robot_reasons(job.spec or {}, robot_nodes(), job.rlinf_config or None)
    if not reasons:
        return Gate()
    approval = job.safety_approvals.select_related("approver").first()
    current = approval is not None and approval.spec_hash == spec_hash(job.spec or {}, job.rlinf_config or "")
    return Gate(reasons, approval, current)


def check_start(job: Job, run_script: str | None = None) -> None:
    """Raise :class:`SafetyGateClosed` when ``job`` (as stored) is a robot job without a current approval, or
    when ``run_script`` (a resume's edited run script) differs from the approved Header's; return otherwise."""
    g = gate(job)
    if g.open and run_script is not None and g.robot:
        heads = [t for t in job.spec_section.get("tasks") or [] if isinstance(t, dict) and t.get("head") is True]
        if heads and str(heads[0].get("runScript") or "") != run_script:
            raise SafetyGateClosed(Problem("", "safety_approval_script", {"job": job.name}))
    if g.open:
        return
    params = {"job": job.name, "reasons": reasons_text(g.reasons)}
    if g.approval is None:
        raise SafetyGateClosed(Problem("", "safety_approval_missing", params))
    params.update(approver=g.approval.approver_name, time=pagetime.label(g.approval.approved_at))
    raise SafetyGateClosed(Problem("", "safety_approval_stale", params))


def closed_gate(job: Job) -> str | None:
    """None when ``job`` may run as stored (no robot job, or a current approval); else the English sentence of
    :func:`check_start` saying what is missing (the reconcile's last line of defence, stored as the job's message)."""
    try:
        check_start(job)
    except SafetyGateClosed as exc:
        return exc.result.problems[0].message("en")
    return None


def hold_new(document: dict, result: ValidationResult) -> str:
    """For a new job whose validation warned ``robot_job``: set ``spec.stopped`` in ``document`` (it is stored
    stopped, never started) and return the sentence saying so in the active language; "" for any other job. A
    new job has no approval yet, so it never starts before one."""
    reasons = [p for p in result.warnings if p.code == "robot_job"]
    if not reasons or not isinstance(document.get("spec"), dict):
        return ""
    document["spec"]["stopped"] = True
    return _(
        "Job %(name)s may drive a real robot, so it was stored stopped: it starts only after a safety approver "
        "other than you approves it."
    ) % {"name": (document.get("metadata") or {}).get("name", "")}


def can_approve(user, job: Job) -> bool:
    """True when ``user`` holds the safety approver permission and did not submit ``job``."""
    active = getattr(user, "is_authenticated", False) and user.is_active
    return bool(active and user.has_perm(PERMISSION) and user.pk != job.owner_id)


def approve(job: Job, user, confirmed: Iterable[str], stop_plan: str, request=None) -> SafetyApproval:
    """Record ``user``'s safety approval of ``job`` as stored now and audit it (``job.safety_approve`` with the
    approver, the items, the stop plan and the spec sha256).

    ``confirmed``: item keys of :data:`ITEMS` (all five needed; unknown keys refused); ``stop_plan``: 1 to
    :data:`MAX_STOP_PLAN` characters after trimming. Raises :class:`ApprovalRefused` naming every problem."""
    if not (getattr(user, "is_authenticated", False) and user.has_perm(PERMISSION)):
        raise ApprovalRefused("forbidden", [_("Only a safety approver may approve a robot job.")])
    if user.pk == job.owner_id:
        raise ApprovalRefused(
            "own_job", [_("You submitted this job: its safety approval must come from another safety approver.")]
        )
    keys = [str(k) for k in list(confirmed)[: len(ITEMS) * 4]]
    errors = []
    unknown = sorted({k for k in keys if k not in ITEMS})
    if unknown:
        errors.append(_("Unknown safety items: %(items)s.") % {"items": ", ".join(unknown)[:200]})
    missing = [_(text) for key, text in ITEMS.items() if key not in keys]
    if missing:
        errors.append(_("Not confirmed yet: %(items)s") % {"items": " ".join(missing)})
    plan = (stop_plan or "").strip() if isinstance(stop_plan, str) else ""
    if not plan:
        errors.append(_("Write the stop plan: how the robot is stopped and made safe if something goes wrong."))
    elif len(plan) > MAX_STOP_PLAN:
        errors.append(
            _("The stop plan has %(count)d characters; at most %(max)d are kept.")
            % {"count": len(plan), "max": MAX_STOP_PLAN}
        )
    with transaction.atomic():
        job = Job.objects.select_for_update().get(pk=job.pk)
        if not robot_reasons(job.spec or {}, robot_nodes(), job.rlinf_config or None):
            raise ApprovalRefused("not_robot_job", [_("This job drives no real robot: it needs no safety approval.")])
        if errors:
            raise ApprovalRefused("invalid", errors)
        digest = spec_hash(job.spec or {}, job.rlinf_config or "")
        approval = SafetyApproval.objects.create(
            job=job, approver=user, approver_name=user.username, spec_hash=digest, items=list(ITEMS), stop_plan=plan
        )
        record(
            user,
            "job.safety_approve",
            "job",
            job.name,
            request=request,
            approver=user.username,
            items=list(ITEMS),
            stopPlan=plan,
            specSha256=digest,
        )
    return approval


def gate_dict(g: Gate, lang: str = "zh-hans") -> dict:
    """The API shape of a gate: ``{robot, open, current, reasons: [{path, code, message}], approval: null |
    {approver, approvedAt (ISO 8601), approvedAtLabel (the pages' zone), items: [{key, text}], stopPlan,
    specSha256}, items: [{key, text}]}``; texts in ``lang``."""
    approval = None
    if g.approval is not None:
        a = g.approval
        approval = {
            "approver": a.approver_name,
            "approvedAt": a.approved_at.isoformat() if a.approved_at else None,
            "approvedAtLabel": pagetime.label(a.approved_at) if a.approved_at else "",
            "items": [{"key": k, "text": translate(ITEMS[k], lang)} for k in a.items if k in ITEMS],
            "stopPlan": a.stop_plan,
            "specSha256": a.spec_hash,
        }
    return {
        "robot": g.robot,
        "open": g.open,
        "current": g.current,
        "reasons": [r.problem().to_dict(lang) for r in g.reasons],
        "approval": approval,
        "items": [{"key": k, "text": translate(text, lang)} for k, text in ITEMS.items()],
    }
