"""Check 2 of seed 02-confirm-job-running: the Pods are as planned.

Seed 02, check 2: "每个角色的实际 Pod 数等于预期副本数，全部实际 Pod 的总数等于 RLinf cluster.num_nodes，
且 Header 只有一个实际 Pod" and "没有未解释的 Pending、失败或重启". So: per role actual Pods = replicas,
every Pod on a node whose labels match the role's ``nodeSelector``, the header exactly 1 Pod, the total =
``cluster.num_nodes`` when an RLinf config is attached, and no Pod pending, failed or restarted. A Pod not
scheduled or not ready yet is missing evidence (to confirm); a wrong node, a failure, a restart or too many Pods
is not met.
"""

from __future__ import annotations

from django.utils.translation import gettext_noop

from clusters.selectors import matches
from jobs.explain.runcheck_input import (
    ENDED_PHASES,
    MET,
    NOT_MET,
    TO_CONFIRM,
    PodRow,
    RunCheckInput,
    TaskView,
    missing_status,
    phase_label,
    tr,
)
from jobs.observe.headline import worker_phase_of


def check_pods(data: RunCheckInput, lang: str) -> tuple[str, list[str]]:
    """Check 2 -> ``(status, evidence lines in lang)``: problems first (``not_met``), then what is still pending
    (``to_confirm`` until the max wait), then one line per Pod (role, node, IP, phase, restarts)."""
    ev: list[str] = []
    bad: list[str] = []
    pending: list[str] = []
    by_task: dict[str, list[PodRow]] = {}
    for p in data.pods:
        by_task.setdefault(p.task, []).append(p)
    total = 0
    for task in data.tasks:
        pods = sorted(by_task.get(task.name, []), key=lambda p: p.ordinal)
        total += len(pods)
        if len(pods) != task.replicas:
            msg = tr(
                lang,
                gettext_noop("Role {role}: {n} actual Pods, {want} expected."),
                role=task.role,
                n=len(pods),
                want=task.replicas,
            )
            (pending if len(pods) < task.replicas else bad).append(msg)
        for p in pods:
            _pod_lines(data, task, p, lang, ev, bad, pending)
    _header_count(data, by_task, lang, ev, bad, pending)
    if data.num_nodes is not None:
        line = tr(
            lang,
            gettext_noop("{n} actual Pods in total; RLinf cluster.num_nodes = {want}."),
            n=total,
            want=data.num_nodes,
        )
        (ev if total == data.num_nodes else (pending if total < data.num_nodes else bad)).append(line)
    if not data.pods:
        return missing_status(data) if data.tasks else TO_CONFIRM, [
            tr(lang, gettext_noop("No Pod details yet, waiting for sync."))
        ]
    if bad:
        return NOT_MET, bad + ev
    if pending:
        return missing_status(data), pending + ev
    return MET, ev


def _pod_lines(
    data: RunCheckInput,
    task: TaskView,
    p: PodRow,
    lang: str,
    ev: list[str],
    bad: list[str],
    pending: list[str],
) -> None:
    """Append one Pod's evidence line to ``ev`` and its problems to ``bad`` (wrong node, failed, restarted) or
    ``pending`` (not scheduled, not ready while the job runs)."""
    ev.append(
        tr(
            lang,
            gettext_noop("{role} / {pod}: node {node}, IP {ip}, phase {phase}, restarts: {r}."),
            role=task.role,
            pod=p.name,
            node=p.node or "-",
            ip=p.ip or "-",
            phase=phase_label(worker_phase_of(data.phase, data.stopped, p.phase), lang) if p.phase else "-",
            r=p.restarts,
        )
    )
    if p.node and not matches(task.selector, data.node_labels.get(p.node, {})):
        bad.append(
            tr(
                lang,
                gettext_noop("{pod} runs on node {node}, which does not match selector {sel}."),
                pod=p.name,
                node=p.node,
                sel=",".join(f"{k}={v}" for k, v in task.selector.items()),
            )
        )
    if not p.node:
        pending.append(tr(lang, gettext_noop("{pod} is not scheduled on a node yet."), pod=p.name))
    elif p.phase == "Failed":
        bad.append(tr(lang, gettext_noop("{pod} failed ({r})."), pod=p.name, r=p.reason or "-"))
    elif p.phase == "Pending" or (p.phase == "Running" and not p.ready and data.phase not in ENDED_PHASES):
        pending.append(
            tr(
                lang,
                gettext_noop("{pod} is not ready yet ({phase})."),
                pod=p.name,
                phase=phase_label(worker_phase_of(data.phase, data.stopped, p.phase), lang),
            )
        )
    if p.restarts:
        bad.append(tr(lang, gettext_noop("{pod} restarted {r} times; explain why."), pod=p.name, r=p.restarts))


def _header_count(
    data: RunCheckInput,
    by_task: dict[str, list[PodRow]],
    lang: str,
    ev: list[str],
    bad: list[str],
    pending: list[str],
) -> None:
    """The header has exactly one Task and one actual Pod (seed 01: "Header 角色必须只创建 1 个 Worker"): the line
    goes to ``ev``, else to ``bad`` (several) or ``pending`` (none yet)."""
    heads = [p for t in data.tasks if t.head for p in by_task.get(t.name, [])]
    head_tasks = [t for t in data.tasks if t.head]
    if len(head_tasks) != 1 or len(heads) != 1:
        (bad if len(heads) > 1 or len(head_tasks) != 1 else pending).append(
            tr(lang, gettext_noop("The header has {n} actual Pods; it must have 1."), n=len(heads))
        )
    else:
        ev.append(tr(lang, gettext_noop("The header has exactly 1 Pod: {pod}."), pod=heads[0].name))
