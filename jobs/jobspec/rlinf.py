"""Turn an RLinf Hydra config into RLark roles (rlinf.md sections 4, 5 and 8).

``plan(config)`` reads ``cluster.num_nodes``, ``cluster.node_groups`` (labels, ``node_ranks``, ``env_configs``,
``hardware``) and ``cluster.component_placement``, and proposes roles:

- a signature per rank r = (labels of the groups containing r, hardware configs at r, env-config items covering r);
- rank 0 is always its own Header role (replicas 1); following consecutive ranks with the same signature form one
  role; without ``node_groups`` this gives Header [0] + ``worker`` x (num_nodes - 1);
- problems in the config itself are reported (hardware ``node_rank`` outside its group's ranks ->
  ``node_ranks_mismatch``, bad rank expressions, env_configs not a list, unknown group in a placement, a component
  placed on a group without nodes -> ``rlinf_group_no_workers``, ...);
- a robot IP that RLinf refuses (``rlinf_robot_ip_invalid``) is a warning of the plan: the run script may override
  it, so the validator refuses it unless the job acknowledges the check (``ACKNOWLEDGEABLE``).

The checks that RLinf 0.3.0 makes itself follow its code: ``rlinf/scheduler/cluster/config.py`` (``ClusterConfig``,
``NodeGroupConfig``), ``rlinf/scheduler/hardware/robots/franka.py`` and ``dual_franka.py`` (robot IPs),
``rlinf/scheduler/cluster/node.py`` and ``rlinf/scheduler/placement/placement.py`` (node groups of a placement).

The roles always cover ranks ``0..num_nodes-1``, so their replicas sum to ``num_nodes``.
"""

from __future__ import annotations

import ipaddress
import math
from dataclasses import dataclass, field
from typing import Any

import yaml

from jobs.jobspec.document import _Loader, _too_big
from jobs.jobspec.messages import WARNING, Problem
from jobs.jobspec.ranks import RankErrors, format_ranks, max_rank, parse_rank_config

RESERVED_LABELS = ("cluster", "node")
# Documented limits (README "Limits"): nothing below allocates in proportion to a number the user
# typed beyond these. MAX_NUM_NODES bounds ``cluster.num_nodes`` (and so every node rank); RANK_BUDGET bounds
# the ranks all node groups and env configs expand to together (16 full covers of the largest cluster);
# MAX_CONFIG_CHARS the config text.
MAX_NUM_NODES = 10_000
RANK_BUDGET = 16 * MAX_NUM_NODES
MAX_CONFIG_CHARS = 1 << 20
# The hardware config fields RLinf 0.3.0 parses with ``ipaddress.ip_address`` when they are set, per hardware type:
# (the config's name in RLinf's message, fields). rlinf/scheduler/hardware/robots/franka.py
# (``FrankaConfig.__post_init__``) and dual_franka.py (``DualFrankaConfig._validate_ip``); the other robot types
# (DOSW1 ``robot_url``, GimArm, Turtle2) check no address.
ROBOT_IP_FIELDS: dict[str, tuple[str, tuple[str, ...]]] = {
    "Franka": ("franka", ("robot_ip",)),
    "DualFranka": ("DualFranka", ("left_robot_ip", "right_robot_ip")),
}
# Plan warnings that RLinf refuses as shipped but that the run script may fix (a Hydra override of the field): the
# validator makes them errors unless the job lists the code in annotation ``rlark.io/acknowledged-checks``.
# code -> the message key of the warning once acknowledged.
ACKNOWLEDGEABLE = {"rlinf_robot_ip_invalid": "rlinf_robot_ip_acknowledged"}


@dataclass
class RLinfPlan:
    """Result of ``plan``. ``roles``: ``[{name, head, role, replicas, rank_start, node_ranks, ranks, labels, env,
    python_interpreter_path, hardware, gpus, gpus_source}]``; ``gpus`` is the per-Worker accelerator count the
    config implies (``_group_gpus``; ``cluster.num_gpus_per_node`` for ``all``), or None when the config does not
    say (then a ``rlinf_gpus_unknown`` warning names the role and the wizard fills it from the matched nodes'
    inventory or leaves it empty, never a silent 0)."""

    num_nodes: int = 0
    roles: list[dict[str, Any]] = field(default_factory=list)
    problems: list[Problem] = field(default_factory=list)
    warnings: list[Problem] = field(default_factory=list)  # e.g. placeholder values (rlinf.md 3.9)

    @property
    def valid(self) -> bool:
        return not self.problems

    @property
    def workers(self) -> int:
        return sum(r["replicas"] for r in self.roles)

    def to_dict(self, lang: str = "zh-hans") -> dict[str, Any]:
        return {
            "valid": self.valid,
            "num_nodes": self.num_nodes,
            "workers": self.workers,
            "roles": self.roles,
            "problems": [p.to_dict(lang) for p in self.problems],
            "warnings": [p.to_dict(lang) for p in self.warnings],
        }


def _err(detail: Exception | str) -> str:
    return str(detail) or type(detail).__name__


def load_config(config: dict | str) -> tuple[dict | None, list[Problem]]:
    """YAML text or a mapping -> (mapping, problems)."""

    if isinstance(config, dict):
        data: Any = config
    else:
        if len(config or "") > MAX_CONFIG_CHARS:
            return None, [Problem("rlinf", "rlinf_config_too_large", {"detail": "larger than 1 MiB"})]
        try:
            data = yaml.load(config or "", Loader=_Loader)  # LibYAML (when present) caps the nesting depth
        except yaml.YAMLError as exc:
            return None, [Problem("rlinf", "yaml_invalid", {"detail": _err(exc).splitlines()[0]})]
        except RecursionError:
            return None, [Problem("rlinf", "rlinf_config_too_large", {"detail": "nested too deeply"})]
    if not isinstance(data, dict):
        return None, [Problem("rlinf", "rlinf_config_invalid", {"detail": "not a mapping"})]
    if _too_big(data):  # YAML aliases can make a small text a huge tree
        return None, [Problem("rlinf", "rlinf_config_too_large", {"detail": "too many elements"})]
    return data, []


def _env_vars(items: Any, path: str, problems: list[Problem]) -> dict[str, str]:
    out: dict[str, str] = {}
    if items is None:
        return out
    if not isinstance(items, list):
        problems.append(Problem(path, "rlinf_group_invalid", {"detail": "env_vars must be a list of one-key maps"}))
        return out
    for item in items:
        if not isinstance(item, dict) or len(item) != 1:
            problems.append(Problem(path, "rlinf_group_invalid", {"detail": "env_vars items must be one-key maps"}))
            continue
        ((k, v),) = item.items()
        if str(k) in out:
            problems.append(Problem(path, "rlinf_group_invalid", {"detail": f"env var {k} is defined twice"}))
        out[str(k)] = "" if v is None else str(v)
    return out


def _placement_max_rank(value: Any) -> int | None:
    """Highest resource rank of a placement rank map (``"0-3"``, ``"0:0-1"``, ``0``); None for ``all``/bad."""
    text = str(value)
    best = None
    for part in text.split(","):
        res = part.split(":")[0].strip()
        if not res:
            continue
        if res.lower() == "all":
            return None
        try:
            top = max_rank(res)  # never expands "0-1000000000"
        except RankErrors:
            return None
        if top is not None:
            best = max(best or 0, top)
    return best


def plan(config: dict | str) -> RLinfPlan:
    """Plan roles for an RLinf config (mapping or YAML text). Never raises for bad input: see ``problems``.

    The steps: read ``cluster`` and ``num_nodes`` (:func:`_read_cluster`), the node groups (:func:`_read_groups`),
    the GPU hints of ``component_placement`` (:func:`_read_placement`), each rank's signature (:class:`_RankParts`),
    the runs of ranks that form one role (:func:`_rank_runs`), and one role per run (:func:`_role`)."""
    data, problems = load_config(config)
    result = RLinfPlan(problems=problems)
    if data is None:
        return result
    found = _read_cluster(data, problems)
    if found is None:
        return result
    cluster, num_nodes = found
    result.num_nodes = num_nodes
    report = _Report(problems, result.warnings)
    groups = _read_groups(cluster, num_nodes, report)
    ranks_of: dict[str, set[int]] = {}
    for g in groups:
        ranks_of.setdefault(g["label"], set()).update(g["ranks"])
    placement = _read_placement(cluster, ranks_of, num_nodes, problems)
    parts = _RankParts.of(groups, num_nodes)
    by_label: dict[str, list[dict[str, Any]]] = {}
    for g in groups:
        by_label.setdefault(g["label"], []).append(g)
    names = _RoleNames()
    for i, ranks in enumerate(_rank_runs(parts, num_nodes)):
        result.roles.append(_role(i == 0, ranks, parts, by_label, placement, names, report))
    return result


@dataclass
class _Report:
    """Where the steps of :func:`plan` put what they find: ``problems`` (errors) and ``warnings`` (the plan's
    lists), and the ``budget`` of ranks the node groups and env configs may still expand to (``RANK_BUDGET``)."""

    problems: list[Problem]
    warnings: list[Problem]
    budget: int = RANK_BUDGET

    def spend(self, ranks: Any, path: str) -> bool:
        """Charge expanded ranks (a sized collection) to the budget; False (and a problem, once) when it is used
        up."""
        self.budget -= len(ranks)
        if self.budget < 0:
            if self.budget + len(ranks) >= 0:
                self.problems.append(
                    Problem(
                        path,
                        "rlinf_config_too_large",
                        {"detail": f"node_groups and env_configs expand to more than {RANK_BUDGET} ranks"},
                    )
                )
            return False
        return True


def _read_cluster(data: dict, problems: list[Problem]) -> tuple[dict, int] | None:
    """``(cluster section, num_nodes)`` of a config mapping, or None (and a problem) when the section is missing or
    ``num_nodes`` is not an int in ``1..MAX_NUM_NODES`` (rlinf.md 4)."""
    cluster = data.get("cluster")
    if not isinstance(cluster, dict):
        problems.append(Problem("cluster", "rlinf_config_invalid", {"detail": "missing cluster section"}))
        return None
    num_nodes = cluster.get("num_nodes")
    if isinstance(num_nodes, bool) or not isinstance(num_nodes, int) or num_nodes <= 0:
        problems.append(Problem("cluster.num_nodes", "rlinf_num_nodes_invalid"))
        return None
    if num_nodes > MAX_NUM_NODES:
        problems.append(
            Problem("cluster.num_nodes", "rlinf_num_nodes_too_large", {"limit": MAX_NUM_NODES, "value": num_nodes})
        )
        return None
    return cluster, num_nodes


def _read_groups(cluster: dict, num_nodes: int, report: _Report) -> list[dict[str, Any]]:
    """The valid ``cluster.node_groups`` in config order, each ``{label, ranks: set[int], env_items, hardware: {rank:
    [config]}, hw_type, num_gpus, order}`` (``env_items`` and ``hardware`` from :func:`_read_env_configs` and
    :func:`_read_hardware`). A group without a usable label or ``node_ranks`` is left out with a problem; once the
    rank budget is used up no further group is read."""
    groups_raw = cluster.get("node_groups") or []
    if not isinstance(groups_raw, list):
        report.problems.append(
            Problem("cluster.node_groups", "rlinf_group_invalid", {"detail": "node_groups must be a list"})
        )
        groups_raw = []
    all_ranks = range(num_nodes)
    groups: list[dict[str, Any]] = []
    seen_labels: set[str] = set()
    hw_seen: dict[tuple[int, str], str] = {}  # (rank, hardware type) -> the label of the group that has it
    for gi, g in enumerate(groups_raw):
        gpath = f"cluster.node_groups[{gi}]"
        label = _group_label(g, gpath, seen_labels, report.problems)
        if label is None:
            continue
        ranks = _group_ranks(g, gpath, all_ranks, report.problems)
        if ranks is None:
            continue
        if not report.spend(ranks, f"{gpath}.node_ranks"):
            break
        group = {
            "label": label,
            "ranks": set(ranks),
            "env_items": [],
            "hardware": {},
            "hw_type": "",
            "num_gpus": g.get("num_gpus"),
            "order": len(groups),
        }
        _read_env_configs(group, g.get("env_configs"), gpath, all_ranks, report)
        _read_hardware(group, g.get("hardware"), gpath, hw_seen, report)
        groups.append(group)
    return groups


def _group_label(g: Any, gpath: str, seen_labels: set[str], problems: list[Problem]) -> str | None:
    """The ``label`` of node group ``g`` (problems for a reserved or duplicate one, which is still used; it joins
    ``seen_labels``), or None when ``g`` is not a mapping or has no label."""
    if not isinstance(g, dict):
        problems.append(Problem(gpath, "rlinf_group_invalid", {"detail": "a node group must be a mapping"}))
        return None
    label = g.get("label")
    if label is None or str(label) == "":
        problems.append(Problem(f"{gpath}.label", "rlinf_group_invalid", {"detail": "label is required"}))
        return None
    label = str(label)
    if label in RESERVED_LABELS:
        problems.append(Problem(f"{gpath}.label", "rlinf_group_invalid", {"detail": f"label {label} is reserved"}))
    if label in seen_labels:
        problems.append(Problem(f"{gpath}.label", "rlinf_group_invalid", {"detail": f"duplicate label {label}"}))
    seen_labels.add(label)
    return label


def _group_ranks(g: dict, gpath: str, all_ranks: range, problems: list[Problem]) -> list[int] | None:
    """The sorted ranks of ``g["node_ranks"]`` (rlinf.md 5, within ``all_ranks``), or None (and a problem) when
    missing or invalid."""
    if "node_ranks" not in g:
        problems.append(Problem(f"{gpath}.node_ranks", "rlinf_group_invalid", {"detail": "node_ranks is required"}))
        return None
    try:
        return parse_rank_config(g["node_ranks"], all_ranks)
    except RankErrors as exc:
        problems.append(
            Problem(f"{gpath}.node_ranks", "rlinf_node_ranks_invalid", {"value": g["node_ranks"], "detail": _err(exc)})
        )
        return None


def _read_env_configs(group: dict[str, Any], env_configs: Any, gpath: str, all_ranks: range, report: _Report) -> None:
    """Append the group's ``env_configs`` items to ``group["env_items"]`` as ``{index, ranks: set[int] (within the
    group's), env: {name: value}, python_interpreter_path}``. The list's items' ranks must be a subset of the
    group's and must not overlap (``node_ranks_mismatch``); a placeholder interpreter is a warning (rlinf.md
    3.9). Stops at the item that uses up the rank budget."""
    if env_configs is not None and not isinstance(env_configs, list):
        report.problems.append(
            Problem(f"{gpath}.env_configs", "rlinf_group_invalid", {"detail": "env_configs must be a YAML list"})
        )
        env_configs = []
    label = group["label"]
    covered: set[int] = set()
    for ei, item in enumerate(env_configs or []):
        epath = f"{gpath}.env_configs[{ei}]"
        if not isinstance(item, dict):
            report.problems.append(Problem(epath, "rlinf_group_invalid", {"detail": "an env config must be a mapping"}))
            continue
        try:
            eranks = set(parse_rank_config(item.get("node_ranks", ""), all_ranks))
        except RankErrors as exc:
            report.problems.append(
                Problem(
                    f"{epath}.node_ranks",
                    "rlinf_node_ranks_invalid",
                    {"value": item.get("node_ranks"), "detail": _err(exc)},
                )
            )
            continue
        if not report.spend(eranks, f"{epath}.node_ranks"):
            break
        if not eranks <= group["ranks"]:
            detail = (
                f"env_configs node_ranks {format_ranks(eranks)} of group {label} must be "
                f"within the group's node_ranks {format_ranks(group['ranks'])}"
            )
            report.problems.append(Problem(f"{epath}.node_ranks", "node_ranks_mismatch", {"detail": detail}))
        if eranks & covered:
            detail = f"env_configs of group {label} overlap at ranks {format_ranks(eranks & covered)}"
            report.problems.append(Problem(f"{epath}.node_ranks", "node_ranks_mismatch", {"detail": detail}))
        covered |= eranks
        interpreter = str(item.get("python_interpreter_path") or "")
        if interpreter and (not interpreter.startswith("/") or "/path/to" in interpreter or "<" in interpreter):
            # rlinf.md 3.9: the interpreter must exist on that node; a placeholder fails at start-up
            report.warnings.append(
                Problem(
                    f"{epath}.python_interpreter_path",
                    "rlinf_placeholder",
                    {"field": "python_interpreter_path", "value": interpreter},
                    severity=WARNING,
                )
            )
        group["env_items"].append(
            {
                "index": ei,
                "ranks": eranks & group["ranks"],
                "env": _env_vars(item.get("env_vars"), f"{epath}.env_vars", report.problems),
                "python_interpreter_path": interpreter,
            }
        )


def _read_hardware(
    group: dict[str, Any], hardware: Any, gpath: str, hw_seen: dict[tuple[int, str], str], report: _Report
) -> None:
    """Read the group's ``hardware`` (``{type, configs: [{node_rank, ...}]}``, rlinf.md 8.2) into ``group["hw_type"]``
    and ``group["hardware"]`` (rank -> its configs). Each config's robot IPs are checked (:func:`_robot_ip`,
    warnings), then its ``node_rank``: an int within the group's ranks (:func:`_hardware_rank`), and one (rank,
    type) belongs to one group (``hw_seen``: (rank, type) -> the label of the group that has it).

    RLinf 0.3.0, rlinf/scheduler/cluster/config.py ``ClusterConfig.__post_init__``: "Cannot have multiple hardware
    configs of the same type ... in different node groups": several configs of one type at one rank within one
    group are allowed (two arms on one node)."""
    if hardware is None:
        return
    if not isinstance(hardware, dict):
        report.problems.append(Problem(f"{gpath}.hardware", "rlinf_group_invalid", {"detail": "must be a mapping"}))
        return
    label = group["label"]
    hw_type = str(hardware.get("type") or "")
    group["hw_type"] = hw_type
    for hi, hc in enumerate(hardware.get("configs") or []):
        cpath = f"{gpath}.hardware.configs[{hi}]"
        if isinstance(hc, dict):
            _robot_ip(hc, hw_type, cpath, report.warnings)
        rank = _hardware_rank(group, hc, f"{cpath}.node_rank", report.problems)
        if rank is None:
            continue
        other = hw_seen.get((rank, hw_type), label)
        if other != label:
            detail = (
                f"Cannot have multiple hardware configs of the same type '{hw_type}' for the same node_rank {rank} in "
                f"different node groups '{other}' and '{label}'."
            )
            report.problems.append(Problem(f"{cpath}.node_rank", "node_ranks_mismatch", {"detail": detail}))
        hw_seen[(rank, hw_type)] = label
        group["hardware"].setdefault(rank, []).append(hc)


def _rank_list(ranks: set[int]) -> str:
    """The ranks as RLinf prints a list (``[1, 2]``); more than 16 are shortened to ``[0, 1, ..., 9999]``."""
    items = sorted(ranks)
    if len(items) > 16:
        return f"[{items[0]}, {items[1]}, ..., {items[-1]}]"
    return str(items)


def _hardware_rank(group: dict[str, Any], hc: Any, path: str, problems: list[Problem]) -> int | None:
    """The ``node_rank`` of hardware config ``hc`` at ``path`` when it is an int within the group's ranks, else
    None and a problem: ``rlinf_group_invalid`` (not an int) or ``node_ranks_mismatch`` (message key
    ``rlinf_hardware_rank_outside``, params ``{path, value, ranks, group, rlinf}``).

    RLinf 0.3.0 refuses the config at start-up, rlinf/scheduler/cluster/config.py ``ClusterConfig.__post_init__``:
    ``node_rank {rank} in hardware config must be within node_ranks {ranks} in node group '{label}'.``"""
    rank = hc.get("node_rank") if isinstance(hc, dict) else None
    if isinstance(rank, bool) or not isinstance(rank, int):
        problems.append(Problem(path, "rlinf_group_invalid", {"detail": "node_rank must be an int"}))
        return None
    if rank in group["ranks"]:
        return rank
    label, ranks = group["label"], _rank_list(group["ranks"])
    params = {
        "path": path,
        "value": rank,
        "ranks": format_ranks(group["ranks"]) or "[]",
        "group": label,
        "rlinf": f"node_rank {rank} in hardware config must be within node_ranks {ranks} in node group '{label}'.",
    }
    problems.append(Problem(path, "node_ranks_mismatch", params, key="rlinf_hardware_rank_outside"))
    return None


def _robot_ip(hc: dict, hw_type: str, cpath: str, warnings: list[Problem]) -> None:
    """A ``rlinf_robot_ip_invalid`` warning (params ``{path, value, rlinf, env}``) for each robot IP field of
    hardware config ``hc`` (at ``cpath``) that RLinf 0.3.0 refuses (``ROBOT_IP_FIELDS``).

    RLinf, rlinf/scheduler/hardware/robots/franka.py ``FrankaConfig.__post_init__`` and dual_franka.py
    ``DualFrankaConfig._validate_ip``: a field that is set must pass ``ipaddress.ip_address`` (IPv4 or IPv6, an
    int too), else ``'robot_ip' in franka config must be a valid IP address. But got ROBOT_IP.`` An unset field is
    read later from the upper-cased environment variable on the robot's node (``RobotAutoConfig``) and is not
    checked. A Hydra interpolation (``${...}``) is resolved only when RLinf starts, so it is not checked either."""
    config_name, names = ROBOT_IP_FIELDS.get(hw_type, ("", ()))
    for name in names:
        value = hc.get(name)
        if value is None or (isinstance(value, str) and "${" in value):
            continue
        try:
            ipaddress.ip_address(value)
        except (ValueError, TypeError):
            params = {
                "path": f"{cpath}.{name}",
                "value": str(value),
                "rlinf": f"'{name}' in {config_name} config must be a valid IP address. But got {value}.",
                "env": name.upper(),
            }
            warnings.append(Problem(f"{cpath}.{name}", "rlinf_robot_ip_invalid", params, severity=WARNING))


@dataclass
class _Placement:
    """The GPU hints of ``cluster.component_placement`` (rlinf.md 4.4: "GPUs implied: highest resource rank + 1
    spread over the nodes (``all`` -> the nodes' real GPUs)"): per node-group label the GPU ids its placements
    need (``group_need``), the groups with an ``all`` placement (``group_all``: the nodes' real GPUs) and the
    components each group hosts (``group_components``); for placements without a node group, ``cluster_gpus``
    (``cluster.num_gpus_per_node``) and the per-Worker ``global_gpus`` with its ``global_source`` (``placement``,
    ``config`` or "")."""

    group_need: dict[str, int] = field(default_factory=dict)
    group_all: set[str] = field(default_factory=set)
    group_components: dict[str, set[str]] = field(default_factory=dict)
    cluster_gpus: int | None = None
    global_gpus: int | None = None
    global_source: str = ""


def _read_placement(cluster: dict, labels: dict[str, set[int]], num_nodes: int, problems: list[Problem]) -> _Placement:
    """The :class:`_Placement` of the config; ``labels``: each node group's label -> its ranks. A placement naming a
    node group that is not in ``labels`` (nor reserved) is a problem (``rlinf_group_unknown``), one naming a group
    without ranks too (:func:`_group_placement`, ``rlinf_group_no_workers``). A group with ``hardware`` numbers its
    resources by robot, so its placement ids say nothing about GPUs; it needs GPUs only when it hosts a component
    other than ``env`` (:func:`_group_gpus`)."""
    out = _Placement()
    global_need: int | None = None
    global_unknown = False
    placement = cluster.get("component_placement") or {}
    if isinstance(placement, dict):
        for comp, value in placement.items():
            comps = {c.strip() for c in str(comp).split(",") if c.strip()}
            if isinstance(value, dict):
                _group_placement(out, comp, comps, value, labels, problems)
                continue
            top = _placement_max_rank(value)
            if top is None:
                global_unknown = True
            else:
                global_need = max(global_need or 0, top + 1)
    out.cluster_gpus = _gpu_count(cluster.get("num_gpus_per_node"))
    if global_unknown or global_need is None:
        if out.cluster_gpus is not None:
            out.global_gpus, out.global_source = out.cluster_gpus, "config"
    else:
        out.global_gpus, out.global_source = math.ceil(global_need / num_nodes), "placement"
    return out


def _group_placement(
    out: _Placement, comp: Any, comps: set[str], value: dict, labels: dict[str, set[int]], problems: list[Problem]
) -> None:
    """One placement with a ``node_group`` (a name, comma names or a list) into ``out``: the components each group
    hosts, and the GPU ids a single group's placement needs (or ``all``). A group that is not in ``labels`` is
    ``rlinf_group_unknown``; one whose ranks are empty (``node_ranks: ""``) has no Worker: ``rlinf_group_no_workers``
    (params ``{path, component, group, rlinf}``).

    RLinf 0.3.0 keeps only the node groups that have a node in the cluster (rlinf/scheduler/cluster/node.py, the
    node probe's ``if len(group_nodes) > 0``), and a placement on any other label fails at start-up
    (rlinf/scheduler/placement/placement.py ``ComponentPlacement._parse_component_placement``): ``Node group not
    found for components ['env'] with label "franka".``"""
    ng = value.get("node_group")
    names = ng if isinstance(ng, list) else str(ng or "").split(",")
    names = [str(n).strip() for n in names if str(n).strip()]
    path = f"cluster.component_placement.{comp}"
    for n in names:
        out.group_components.setdefault(n, set()).update(comps)
        if n in RESERVED_LABELS:
            continue
        if n not in labels:
            problems.append(Problem(path, "rlinf_group_unknown", {"component": comp, "group": n}))
        elif not labels[n]:
            components = [c.strip() for c in str(comp).split(",")]
            rlinf_says = f'Node group not found for components {components} with label "{n}".'
            params = {"path": f"{path}.node_group", "component": comp, "group": n, "rlinf": rlinf_says}
            problems.append(Problem(f"{path}.node_group", "rlinf_group_no_workers", params))
    top = _placement_max_rank(value.get("placement", ""))
    if top is not None and len(names) == 1:
        out.group_need[names[0]] = max(out.group_need.get(names[0], 0), top + 1)
    elif top is None:
        out.group_all.update(names)


@dataclass
class _RankParts:
    """Per rank r in ``0..num_nodes-1`` the parts of its signature: ``labels[r]`` (labels of the groups containing
    r), ``hw[r]`` ((label, hardware type) of the groups with a hardware config at r) and ``env[r]`` (the env items
    covering r). Built from the groups' (budgeted) ranks: O(num_nodes + budget), never O(num_nodes x groups)."""

    labels: list[list[str]]
    hw: list[list[tuple[str, str]]]
    env: list[list[dict[str, Any]]]

    @classmethod
    def of(cls, groups: list[dict[str, Any]], num_nodes: int) -> _RankParts:
        """The parts of ``groups`` (each env item gets its group's ``label``)."""
        parts = cls([[] for _ in range(num_nodes)], [[] for _ in range(num_nodes)], [[] for _ in range(num_nodes)])
        for g in groups:
            for r in sorted(g["ranks"]):
                parts.labels[r].append(g["label"])
            for r in sorted(g["hardware"]):
                parts.hw[r].append((g["label"], g["hw_type"]))
            for e in g["env_items"]:
                e["label"] = g["label"]
                for r in sorted(e["ranks"]):
                    parts.env[r].append(e)
        return parts

    def signature(self, r: int) -> tuple:
        """``(labels, hardware, env items as (label, index))`` of rank ``r``, as tuples."""
        return (tuple(self.labels[r]), tuple(self.hw[r]), tuple((e["label"], e["index"]) for e in self.env[r]))


def _rank_runs(parts: _RankParts, num_nodes: int) -> list[list[int]]:
    """The ranks grouped into roles: rank 0 alone (the Header), then each run of consecutive ranks with the same
    signature."""
    runs: list[list[int]] = [[0]]
    last = parts.signature(0)
    for r in range(1, num_nodes):
        sig = parts.signature(r)
        if len(runs) > 1 and sig == last:
            runs[-1].append(r)
        else:
            runs.append([r])
        last = sig
    return runs


class _RoleNames:
    """Unique role names (case-insensitive): ``base``, then ``base-2``, ``base-3``, ... The smallest free suffix
    per base only grows: no O(roles^2) name search."""

    def __init__(self) -> None:
        self.used: set[str] = set()
        self.next_suffix: dict[str, int] = {}

    def take(self, base: str) -> str:
        """A name for ``base`` not taken yet (then taken)."""
        name, n = base, self.next_suffix.get(base, 2)
        if name.lower() in self.used:
            name = f"{base}-{n}"
        while name.lower() in self.used:
            name, n = f"{base}-{n + 1}", n + 1
        self.next_suffix[base] = n
        self.used.add(name.lower())
        return name


def _role(
    head: bool,
    ranks: list[int],
    parts: _RankParts,
    by_label: dict[str, list[dict[str, Any]]],
    placement: _Placement,
    names: _RoleNames,
    report: _Report,
) -> dict[str, Any]:
    """The role of one run of ``ranks`` (shape: :class:`RLinfPlan` ``roles``): named after its groups' labels
    (else ``header``/``worker``), with the env and interpreter of its first rank's env items, the hardware configs
    of its ranks, and its GPUs per Worker (:func:`_role_gpus`; a ``rlinf_gpus_unknown`` warning when unknown)."""
    sig_labels, sig_hw, _ = parts.signature(ranks[0])
    name = names.take("-".join(sig_labels) or ("header" if head else "worker"))
    env: dict[str, str] = {}
    interpreter = ""
    for e in parts.env[ranks[0]]:
        env.update(e["env"])
        interpreter = interpreter or e["python_interpreter_path"]
    hardware = None
    for g in groups_with_hw(sig_hw, by_label):
        cfgs = [c for r in ranks for c in g["hardware"].get(r, [])]
        if cfgs:
            hardware = {"type": g["hw_type"], "configs": cfgs}
            break
    gpus, gpus_source, robot = _role_gpus(sig_labels, by_label, placement)
    if gpus is None:
        gpus_source = ""
        report.warnings.append(Problem(f"roles.{name}", "rlinf_gpus_unknown", {"role": name}, severity=WARNING))
    return {
        "name": name,
        "head": head,
        "role": "Env" if sig_hw or robot else "Actor",
        "replicas": len(ranks),
        "rank_start": ranks[0],
        "node_ranks": format_ranks(ranks),
        "ranks": ranks,
        "labels": list(sig_labels),
        "env": env,
        "python_interpreter_path": interpreter,
        "hardware": hardware,
        "gpus": gpus,
        "gpus_source": gpus_source,
    }


def _role_gpus(
    sig_labels: tuple[str, ...], by_label: dict[str, list[dict[str, Any]]], placement: _Placement
) -> tuple[int | None, str, bool]:
    """``(GPUs per Worker or None, source, robot)`` of a role whose ranks carry ``sig_labels``: from its groups
    (:func:`_group_gpus`; a robot group that hosts only ``env`` needs none, rlinf.md 8.2: CPU), or for a role in
    no group the placements without a node group. ``robot``: one of its groups has ``hardware``."""
    if not sig_labels:
        return placement.global_gpus, placement.global_source, False
    sig_groups = [g for lbl in dict.fromkeys(sig_labels) for g in by_label.get(lbl, [])]
    robot = any(g["hw_type"] for g in sig_groups)
    gpus, source = _group_gpus(
        sig_groups, placement.group_need, placement.group_all, placement.group_components, placement.cluster_gpus
    )
    if gpus is None and not source and robot:
        gpus, source = 0, "robot"
    return gpus, source, robot


def _gpu_count(value: Any) -> int | None:
    """A whole GPU count >= 0 from the config (``num_gpus_per_node``, a group's ``num_gpus``), else None."""
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        return None
    return value


def _group_gpus(
    sig_groups: list[dict[str, Any]],
    group_need: dict[str, int],
    group_all: set[str],
    group_components: dict[str, set[str]],
    cluster_gpus: int | None,
) -> tuple[int | None, str]:
    """GPUs per Worker of a role whose ranks carry ``sig_groups`` -> (count or None, source).

    source: ``placement`` (GPU ids the group's placements use, spread over its nodes), ``config`` (the group's
    ``num_gpus`` or ``cluster.num_gpus_per_node``), ``unknown`` (a group that runs GPU components but nothing
    says how many), ``""`` (nothing placed needs GPUs; a robot group hosting only ``env`` then needs none).
    A count needed by several groups on the same node is the largest of them.
    """
    counts: list[int] = []
    source = ""
    for g in sig_groups:
        label = g["label"]
        hosted = group_components.get(label, set())
        gpu_work = bool(hosted - {"env"}) if g["hw_type"] else bool(hosted)
        configured = _gpu_count(g.get("num_gpus"))
        if configured is None:
            configured = cluster_gpus
        if not g["hw_type"] and label in group_need and label not in group_all:
            counts.append(math.ceil(group_need[label] / max(len(g["ranks"]), 1)))
            source = source or "placement"
        elif gpu_work or (not hosted and not g["hw_type"]):
            if configured is None:
                if gpu_work:
                    return None, "unknown"
                continue
            counts.append(configured)
            source = "config" if source != "placement" else source
    if counts:
        return max(counts), source
    return None, ""


def groups_with_hw(sig_hw: tuple, by_label: dict[str, list[dict[str, Any]]]) -> list[dict[str, Any]]:
    """The groups (in config order) named in a signature's hardware part."""
    seen = dict.fromkeys(label for label, _ in sig_hw)
    found = [g for label in seen for g in by_label.get(label, []) if g["hardware"]]
    return sorted(found, key=lambda g: g["order"])


def num_nodes_of(config: dict | str) -> int | None:
    """``cluster.num_nodes`` of a config, or None."""
    data, _ = load_config(config)
    try:
        n = data["cluster"]["num_nodes"]  # type: ignore[index]
    except (TypeError, KeyError):
        return None
    return n if isinstance(n, int) and not isinstance(n, bool) else None
