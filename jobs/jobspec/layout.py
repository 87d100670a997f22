"""Rank layout of a Job document (upstream-rlark 4.2).

``total = sum(replicas if set else 1)`` over ``spec.tasks`` in order; ``rank_start(k)`` = the same sum over the
templates before k. Replicas ``[2, 3, absent]`` -> total 6, rank starts 0, 2, 5.
"""

from __future__ import annotations

from dataclasses import dataclass

from jobs.jobspec.naming import task_name

ROLE_ENV = "RLARK_TASK_ROLE"


@dataclass(frozen=True)
class TaskLayout:
    """Where one template sits in the job's Ray cluster."""

    template_name: str
    task_name: str
    head: bool
    role: str  # Actor | Rollout | Env (as written)
    display_role: str  # RLARK_TASK_ROLE env value, else the template name
    cluster: str  # the template's ``cluster`` field ("" when absent)
    replicas: int  # absent -> 1; explicit 0 stays 0
    rank_start: int
    total_nodes: int
    head_task_name: str  # "" when no head template
    order: int


def replicas_of(template: dict) -> int:
    """``kubernetes.workload.replicas``; absent/None -> 1; non-int -> 0."""
    workload = ((template.get("kubernetes") or {}).get("workload") or {}) if isinstance(template, dict) else {}
    value = workload.get("replicas") if isinstance(workload, dict) else None
    if value is None:
        return 1
    if isinstance(value, bool):
        return 0
    try:
        return int(value)
    except (TypeError, ValueError):
        return 0


def main_container(template: dict) -> dict:
    """The container named ``main`` of the template's pod spec (or the first one, or ``{}``)."""
    try:
        containers = template["kubernetes"]["workload"]["template"]["spec"]["containers"] or []
    except (KeyError, TypeError):
        return {}
    for c in containers:
        if isinstance(c, dict) and c.get("name") == "main":
            return c
    return containers[0] if containers and isinstance(containers[0], dict) else {}


def display_role_of(template: dict) -> str:
    """Value of ``RLARK_TASK_ROLE`` in the main container env, else the template name."""
    for item in main_container(template).get("env") or []:
        if isinstance(item, dict) and item.get("name") == ROLE_ENV and item.get("value"):
            return str(item["value"])
    return str(template.get("name") or "")


def task_layout(document: dict) -> list[TaskLayout]:
    """One ``TaskLayout`` per ``spec.tasks[]`` item, in order. Tolerates partial documents."""
    job = str(((document or {}).get("metadata") or {}).get("name") or "")
    templates = [t for t in ((document or {}).get("spec") or {}).get("tasks") or [] if isinstance(t, dict)]
    counts = [max(replicas_of(t), 0) for t in templates]
    total = sum(counts)
    head_template = next((t for t in templates if t.get("head") is True), None)
    head_task = task_name(job, str(head_template.get("name") or "")) if head_template else ""
    out: list[TaskLayout] = []
    start = 0
    for order, (t, n) in enumerate(zip(templates, counts, strict=True)):
        name = str(t.get("name") or "")
        out.append(
            TaskLayout(
                template_name=name,
                task_name=task_name(job, name),
                head=t.get("head") is True,
                role=str(t.get("role") or ""),
                display_role=display_role_of(t),
                cluster=str(t.get("cluster") or ""),
                replicas=n,
                rank_start=start,
                total_nodes=total,
                head_task_name=head_task,
                order=order,
            )
        )
        start += n
    return out
