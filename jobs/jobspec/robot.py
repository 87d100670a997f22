"""Which jobs may drive a real robot, and the part of a job a safety approval covers.

Seed 03-onboard-existing-rlinf-workload (§ 接入真机任务前完成安全确认): "任何可能连接或驱动真实机器人的任务，都必须先由
设备团队和安全审批人确认" five things before it runs. A job is a **robot job** when any of these holds:

- a role's ``nodeSelector`` (non-empty) matches only nodes of category ``robot`` or ``edge`` in the role's cluster
  (``clusters.models.Node.category``; ``clusters.selectors.matches``), so its Workers run on robot nodes;
- a role requests a robot device resource: ``rlinf.io/device`` or ``rlinf.io/device-<type>`` above 0 (the names
  ``clusters.services.nodes`` lists and the wizard requests);
- its attached RLinf config has a node group whose ``hardware.type`` is a robot (rlinf.md 8.2: ``Franka``,
  ``DualFranka``, ``DOSW1``, ``Turtle2``, ``GimArm``).

A role with no selector, or one that also matches other nodes (the demo's ``pool=rollout`` matches a GPU node
and the demo robot node), is not counted by its selector: it asks for no robot, and the scheduler's choice does not
make it drive one; a role that drives the robot requests its device resource, as the wizard does.
:func:`problems` gives one warning (code ``robot_job``) per reason, so the
validator says which it is and why; :func:`spec_hash` is the sha256 an approval stores (roles, images, selectors,
scripts, env and the attached RLinf config: the whole ``spec.tasks`` and the config text).
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from typing import Any

from clusters.quantity import parse_quantity
from clusters.selectors import SelectorError, matches, parse_selector
from jobs.jobspec.inventory import NodeInfo
from jobs.jobspec.layout import main_container
from jobs.jobspec.messages import WARNING, Problem
from jobs.jobspec.rlinf import load_config

ROBOT_CATEGORIES = frozenset({"robot", "edge"})
ROBOT_HARDWARE = frozenset({"franka", "dualfranka", "dosw1", "turtle2", "gimarm"})  # rlinf.md 8.2, lower-cased
DEVICE = "rlinf.io/device"
MAX_REASONS = 20  # findings listed per job (a document with hundreds of roles gets the first ones)
MAX_NAMED = 3  # robot nodes named per role


@dataclass(frozen=True)
class RobotReason:
    """Why a job is a robot job. ``kind``: ``node`` (``detail`` = ``cluster/node``), ``device`` (the resource
    name) or ``hardware`` (the RLinf hardware type); ``role``: the template name ("" for the RLinf config);
    ``path``: the document path of the evidence."""

    kind: str
    role: str
    detail: str
    path: str
    count: int = 1  # robot nodes the selector matches (``node``; ``detail`` names the first :data:`MAX_NAMED`)

    def problem(self) -> Problem:
        """The ``robot_job`` warning of this reason (message variant ``robot_job_<kind>``)."""
        params = {"role": self.role, "detail": self.detail, "count": self.count}
        return Problem(self.path, "robot_job", params, severity=WARNING, key=f"robot_job_{self.kind}")


def _templates(document: Any) -> list[dict]:
    spec = document.get("spec") if isinstance(document, dict) else None
    tasks = spec.get("tasks") if isinstance(spec, dict) else None
    return [t for t in tasks if isinstance(t, dict)] if isinstance(tasks, list) else []


def _positive(value: Any) -> bool:
    try:
        return parse_quantity(value) > 0
    except (TypeError, ValueError):
        return False


def _device_reasons(i: int, t: dict) -> list[RobotReason]:
    resources = main_container(t).get("resources") or {}
    found: dict[str, None] = {}
    for side in ("requests", "limits"):
        amounts = resources.get(side) if isinstance(resources, dict) else None
        for key, value in (amounts or {}).items() if isinstance(amounts, dict) else ():
            name = str(key)
            if (name == DEVICE or name.startswith(DEVICE + "-")) and _positive(value):
                found[name] = None
    path = f"spec.tasks[{i}].resources"
    return [RobotReason("device", str(t.get("name") or f"#{i + 1}"), name, path) for name in found]


def _node_reasons(i: int, t: dict, nodes: list[NodeInfo]) -> list[RobotReason]:
    try:
        selector = parse_selector(t.get("nodeSelector"))
    except SelectorError:
        return []
    if not selector:
        return []
    cluster = str(t.get("cluster") or "").strip()
    matched = [n for n in nodes if (not cluster or n.cluster == cluster) and matches(selector, n.labels)]
    hits = [n for n in matched if n.category in ROBOT_CATEGORIES]
    if not hits or len(hits) < len(matched):  # the role may run elsewhere: it does not select robot nodes
        return []
    role = str(t.get("name") or f"#{i + 1}")
    named = ", ".join(f"{n.cluster}/{n.name} ({n.category})" for n in hits[:MAX_NAMED])
    detail = named + (", …" if len(hits) > MAX_NAMED else "")
    return [RobotReason("node", role, detail, f"spec.tasks[{i}].nodeSelector", count=len(hits))]


def _hardware_reasons(rlinf_config: dict | str | None) -> list[RobotReason]:
    if rlinf_config in (None, ""):
        return []
    data, problems = load_config(rlinf_config)
    if data is None or problems:
        return []
    cluster = data.get("cluster")
    groups = cluster.get("node_groups") if isinstance(cluster, dict) else None
    out = []
    for gi, group in enumerate(groups if isinstance(groups, list) else []):
        hardware = group.get("hardware") if isinstance(group, dict) else None
        hw_type = str(hardware.get("type") or "") if isinstance(hardware, dict) else ""
        if hw_type.lower() in ROBOT_HARDWARE:
            out.append(RobotReason("hardware", "", hw_type, f"rlinf.cluster.node_groups[{gi}].hardware.type"))
    return out


def robot_reasons(document: Any, nodes: list[NodeInfo], rlinf_config: dict | str | None = None) -> list[RobotReason]:
    """Every reason the job may drive a real robot (at most :data:`MAX_REASONS`); ``[]`` for any other job.

    ``document``: the Job document (dict; anything else has no reasons); ``nodes``: the inventory's nodes (with
    ``category``); ``rlinf_config``: the attached RLinf YAML text or mapping (unparsable -> no hardware reason)."""
    reasons: list[RobotReason] = []
    for i, t in enumerate(_templates(document)):
        reasons += _node_reasons(i, t, nodes) + _device_reasons(i, t)
    reasons += _hardware_reasons(rlinf_config)
    return reasons[:MAX_REASONS]


def problems(document: Any, nodes: list[NodeInfo], rlinf_config: dict | str | None = None) -> list[Problem]:
    """The validator's ``robot_job`` warnings: one per :func:`robot_reasons`."""
    return [r.problem() for r in robot_reasons(document, nodes, rlinf_config)]


def spec_hash(document: Any, rlinf_config: str = "") -> str:
    """sha256 (64 hex) of what a safety approval covers: the whole ``spec.tasks`` (roles, images, selectors,
    scripts, env, resources, mounts), canonical JSON, and the attached RLinf config text. Any change to them gives
    another hash, so the approval no longer applies."""
    body = json.dumps(
        {"tasks": _templates(document), "rlinf": rlinf_config or ""}, sort_keys=True, separators=(",", ":"), default=str
    )
    return hashlib.sha256(body.encode()).hexdigest()
