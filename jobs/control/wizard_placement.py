"""Where a role's Workers can land, and how to place N Workers on N of M identical nodes.

The seeds' one story (``03-onboard-existing-rlinf-workload.txt`` Step 3, ``05-troubleshooting-jobs-workers.txt``):
a job's node selector has a single value per key (no comma "any of"), keys are ANDed over the nodes of all
clusters, the Header matches exactly 1 node and every other role has as many Workers as its selector matches
nodes. So when a role needs N of M identical nodes (N < M), or was given comma values to pick nodes of several
kinds, its selector must become one that matches exactly those nodes: a staff user gives them a console-owned
label in the back office (Nodes, batch action "Set or remove a metadata field", field "Console label"; the label
is written to the Kubernetes Nodes too) and the role selects that label.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from jobs.jobspec.naming import to_resource_name

POOL_LABEL = "rlark.io/pool"  # the suggested key of a console-owned label that singles out a role's nodes
MAX_LABEL_VALUE = 63


@dataclass(frozen=True)
class PlacementHint:
    """The advice for one role. ``kind``: ``subset`` (it has ``replicas`` Workers but matches ``count`` nodes,
    ``0 < replicas < count``) or ``multivalue`` (a comma value in its selector). ``label``: the suggested
    ``key=value`` console-owned label; ``filter``: one ``key=value`` of its selector, to list its nodes in the back
    office (``?label=``)."""

    kind: str
    replicas: int
    count: int
    label: str
    filter: str


def suggested_label(job: str, role: str) -> str:
    """``rlark.io/pool=<job>-<role>`` as a valid label value (resource-name characters, at most 63)."""
    value = to_resource_name(f"{job}-{role}")[:MAX_LABEL_VALUE].strip("-.") or "pool"
    return f"{POOL_LABEL}={value}"


def _replicas(text: str) -> int:
    try:
        return int(str(text).strip() or 0)
    except ValueError:
        return 0


def hint(*, job: str, role: str, head: bool, replicas: str, selector: dict[str, str], match: dict[str, Any]):
    """The ``PlacementHint`` of a non-Header role, or None when its selector already fits (or is empty/invalid).

    ``selector``: the parsed ``{key: value}``; ``match``: ``UIInventory.match`` (``total``, ``multivalue``);
    ``replicas``: the count as typed. The Header has its own narrow-the-selector offer."""
    total = int(match.get("total") or 0)
    if head or not selector or match.get("error") or total == 0:
        return None
    first = next(iter(selector.items()))
    pair = f"{first[0]}={first[1].split(',')[0]}"
    wanted = _replicas(replicas)
    if match.get("multivalue"):
        return PlacementHint("multivalue", wanted, total, suggested_label(job, role), pair)
    if 0 < wanted < total:
        return PlacementHint("subset", wanted, total, suggested_label(job, role), pair)
    return None


def landing(roles: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Where each role's Workers can land, for the YAML preview: ``[{role, workers, nodes: ["cluster/node"],
    fits}]`` in role order, from the wizard's role rows (``{role: RoleState, head, match}``). ``fits``: the Worker
    count equals the matched nodes (the Header: exactly 1 node)."""
    out = []
    for r in roles:
        nodes = list(r["match"].get("nodes") or [])
        workers = 1 if r["head"] else _replicas(r["role"].replicas)
        out.append({"role": r["role"].name, "workers": workers, "nodes": nodes, "fits": workers == len(nodes)})
    return out
