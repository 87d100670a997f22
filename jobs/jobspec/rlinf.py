"""Turn an RLinf Hydra config into RLark roles (rlinf.md sections 4, 5 and 8).

``plan(config)`` reads ``cluster.num_nodes``, ``cluster.node_groups`` (labels, ``node_ranks``, ``env_configs``,
``hardware``) and ``cluster.component_placement``, and proposes roles:

- a signature per rank r = (labels of the groups containing r, hardware configs at r, env-config items covering r);
- rank 0 is always its own Header role (replicas 1); following consecutive ranks with the same signature form one
  role; without ``node_groups`` this gives Header [0] + ``worker`` x (num_nodes - 1);
- problems in the config itself are reported (hardware ``node_rank`` outside its group's ranks ->
  ``node_ranks_mismatch``, bad rank expressions, env_configs not a list, unknown group in a placement, ...).

The roles always cover ranks ``0..num_nodes-1``, so their replicas sum to ``num_nodes``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import yaml

from jobs.jobspec.document import _Loader, _too_big
from jobs.jobspec.messages import WARNING, Problem
from jobs.jobspec.ranks import RankErrors, format_ranks, max_rank, parse_rank_config

RESERVED_LABELS = ("cluster", "node")
# Documented limits (issue 16, README "Limits"): nothing below allocates in proportion to a number the user
# typed beyond these. MAX_NUM_NODES bounds ``cluster.num_nodes`` (and so every node rank); RANK_BUDGET bounds
# the ranks all node groups and env configs expand to together (16 full covers of the largest cluster);
# MAX_CONFIG_CHARS the config text.
MAX_NUM_NODES = 10_000
RANK_BUDGET = 16 * MAX_NUM_NODES
MAX_CONFIG_CHARS = 1 << 20


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
    """Plan roles for an RLinf config (mapping or YAML text). Never raises for bad input: see ``problems``."""
    data, problems = load_config(config)
    result = RLinfPlan(problems=problems)
    warnings = result.warnings
    if data is None:
        return result
    cluster = data.get("cluster")
    if not isinstance(cluster, dict):
        problems.append(Problem("cluster", "rlinf_config_invalid", {"detail": "missing cluster section"}))
        return result
    num_nodes = cluster.get("num_nodes")
    if isinstance(num_nodes, bool) or not isinstance(num_nodes, int) or num_nodes <= 0:
        problems.append(Problem("cluster.num_nodes", "rlinf_num_nodes_invalid"))
        return result
    if num_nodes > MAX_NUM_NODES:
        problems.append(
            Problem("cluster.num_nodes", "rlinf_num_nodes_too_large", {"limit": MAX_NUM_NODES, "value": num_nodes})
        )
        return result
    result.num_nodes = num_nodes
    all_ranks = range(num_nodes)

    groups_raw = cluster.get("node_groups") or []
    if not isinstance(groups_raw, list):
        problems.append(Problem("cluster.node_groups", "rlinf_group_invalid", {"detail": "node_groups must be a list"}))
        groups_raw = []

    budget = [RANK_BUDGET]

    def spend(ranks: Any, path: str) -> bool:
        """Charge expanded ranks to the budget; False (and a problem, once) when it is used up."""
        budget[0] -= len(ranks)
        if budget[0] < 0:
            if budget[0] + len(ranks) >= 0:
                problems.append(
                    Problem(
                        path,
                        "rlinf_config_too_large",
                        {"detail": f"node_groups and env_configs expand to more than {RANK_BUDGET} ranks"},
                    )
                )
            return False
        return True

    groups: list[dict[str, Any]] = []
    seen_labels: set[str] = set()
    hw_seen: dict[tuple[int, str], str] = {}
    for gi, g in enumerate(groups_raw):
        gpath = f"cluster.node_groups[{gi}]"
        if not isinstance(g, dict):
            problems.append(Problem(gpath, "rlinf_group_invalid", {"detail": "a node group must be a mapping"}))
            continue
        label = g.get("label")
        if label is None or str(label) == "":
            problems.append(Problem(f"{gpath}.label", "rlinf_group_invalid", {"detail": "label is required"}))
            continue
        label = str(label)
        if label in RESERVED_LABELS:
            problems.append(Problem(f"{gpath}.label", "rlinf_group_invalid", {"detail": f"label {label} is reserved"}))
        if label in seen_labels:
            problems.append(Problem(f"{gpath}.label", "rlinf_group_invalid", {"detail": f"duplicate label {label}"}))
        seen_labels.add(label)
        if "node_ranks" not in g:
            problems.append(Problem(f"{gpath}.node_ranks", "rlinf_group_invalid", {"detail": "node_ranks is required"}))
            continue
        try:
            ranks = parse_rank_config(g["node_ranks"], all_ranks)
        except RankErrors as exc:
            problems.append(
                Problem(
                    f"{gpath}.node_ranks", "rlinf_node_ranks_invalid", {"value": g["node_ranks"], "detail": _err(exc)}
                )
            )
            continue
        if not spend(ranks, f"{gpath}.node_ranks"):
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
        # env_configs: a list; ranks a subset of the group's, no overlap between items.
        env_configs = g.get("env_configs")
        if env_configs is not None and not isinstance(env_configs, list):
            problems.append(
                Problem(f"{gpath}.env_configs", "rlinf_group_invalid", {"detail": "env_configs must be a YAML list"})
            )
            env_configs = []
        covered: set[int] = set()
        for ei, item in enumerate(env_configs or []):
            epath = f"{gpath}.env_configs[{ei}]"
            if not isinstance(item, dict):
                problems.append(Problem(epath, "rlinf_group_invalid", {"detail": "an env config must be a mapping"}))
                continue
            try:
                eranks = set(parse_rank_config(item.get("node_ranks", ""), all_ranks))
            except RankErrors as exc:
                problems.append(
                    Problem(
                        f"{epath}.node_ranks",
                        "rlinf_node_ranks_invalid",
                        {"value": item.get("node_ranks"), "detail": _err(exc)},
                    )
                )
                continue
            if not spend(eranks, f"{epath}.node_ranks"):
                break
            if not eranks <= group["ranks"]:
                problems.append(
                    Problem(
                        f"{epath}.node_ranks",
                        "node_ranks_mismatch",
                        {
                            "detail": f"env_configs node_ranks {format_ranks(eranks)} of group {label} must be "
                            f"within the group's node_ranks {format_ranks(group['ranks'])}"
                        },
                    )
                )
            if eranks & covered:
                problems.append(
                    Problem(
                        f"{epath}.node_ranks",
                        "node_ranks_mismatch",
                        {"detail": f"env_configs of group {label} overlap at ranks {format_ranks(eranks & covered)}"},
                    )
                )
            covered |= eranks
            interpreter = str(item.get("python_interpreter_path") or "")
            if interpreter and (not interpreter.startswith("/") or "/path/to" in interpreter or "<" in interpreter):
                # rlinf.md 3.9: the interpreter must exist on that node; a placeholder fails at start-up
                warnings.append(
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
                    "env": _env_vars(item.get("env_vars"), f"{epath}.env_vars", problems),
                    "python_interpreter_path": str(item.get("python_interpreter_path") or ""),
                }
            )
        hardware = g.get("hardware")
        if hardware is not None:
            if not isinstance(hardware, dict):
                problems.append(Problem(f"{gpath}.hardware", "rlinf_group_invalid", {"detail": "must be a mapping"}))
            else:
                hw_type = str(hardware.get("type") or "")
                group["hw_type"] = hw_type
                for hi, hc in enumerate(hardware.get("configs") or []):
                    hpath = f"{gpath}.hardware.configs[{hi}].node_rank"
                    rank = hc.get("node_rank") if isinstance(hc, dict) else None
                    if isinstance(rank, bool) or not isinstance(rank, int):
                        problems.append(Problem(hpath, "rlinf_group_invalid", {"detail": "node_rank must be an int"}))
                        continue
                    if rank not in group["ranks"]:
                        problems.append(
                            Problem(
                                hpath,
                                "node_ranks_mismatch",
                                {
                                    "detail": f"node_rank {rank} in hardware config must be within node_ranks "
                                    f"{format_ranks(group['ranks']) or '[]'} of group {label}"
                                },
                            )
                        )
                        continue
                    if (rank, hw_type) in hw_seen:
                        problems.append(
                            Problem(
                                hpath,
                                "node_ranks_mismatch",
                                {
                                    "detail": f"{hw_type} at node_rank {rank} is also in group "
                                    f"{hw_seen[(rank, hw_type)]}"
                                },
                            )
                        )
                    hw_seen[(rank, hw_type)] = label
                    group["hardware"].setdefault(rank, []).append(hc)
        groups.append(group)

    # GPU hints from component_placement (rlinf.md 4.4: "GPUs implied: highest resource rank + 1 spread over the
    # nodes (`all` -> the nodes' real GPUs)"). A group with ``hardware`` numbers its resources by robot, so its
    # placement ids say nothing about GPUs; it needs GPUs only when it hosts a component other than ``env``.
    labels = {g["label"] for g in groups}
    group_need: dict[str, int] = {}
    group_all: set[str] = set()  # groups with an ``all`` placement: the nodes' real GPUs
    group_components: dict[str, set[str]] = {}
    global_need: int | None = None
    global_unknown = False
    placement = cluster.get("component_placement") or {}
    if isinstance(placement, dict):
        for comp, value in placement.items():
            comps = {c.strip() for c in str(comp).split(",") if c.strip()}
            if isinstance(value, dict):
                ng = value.get("node_group")
                names = ng if isinstance(ng, list) else str(ng or "").split(",")
                names = [str(n).strip() for n in names if str(n).strip()]
                for n in names:
                    group_components.setdefault(n, set()).update(comps)
                    if n not in labels and n not in RESERVED_LABELS:
                        problems.append(
                            Problem(
                                f"cluster.component_placement.{comp}",
                                "rlinf_group_unknown",
                                {"component": comp, "group": n},
                            )
                        )
                top = _placement_max_rank(value.get("placement", ""))
                if top is not None and len(names) == 1:
                    group_need[names[0]] = max(group_need.get(names[0], 0), top + 1)
                elif top is None:
                    group_all.update(names)
            else:
                top = _placement_max_rank(value)
                if top is None:
                    global_unknown = True
                else:
                    global_need = max(global_need or 0, top + 1)
    cluster_gpus = _gpu_count(cluster.get("num_gpus_per_node"))
    if global_unknown or global_need is None:
        global_gpus, global_source = (cluster_gpus, "config") if cluster_gpus is not None else (None, "")
    else:
        global_gpus, global_source = math.ceil(global_need / num_nodes), "placement"

    # Per-rank signature parts, built from the groups' (budgeted) ranks: O(num_nodes + budget), never
    # O(num_nodes x groups).
    rank_labels: list[list[str]] = [[] for _ in range(num_nodes)]
    rank_hw: list[list[tuple[str, str]]] = [[] for _ in range(num_nodes)]
    rank_env: list[list[dict[str, Any]]] = [[] for _ in range(num_nodes)]
    for g in groups:
        for r in sorted(g["ranks"]):
            rank_labels[r].append(g["label"])
        for r in sorted(g["hardware"]):
            rank_hw[r].append((g["label"], g["hw_type"]))
        for e in g["env_items"]:
            e["label"] = g["label"]
            for r in sorted(e["ranks"]):
                rank_env[r].append(e)
    by_label: dict[str, list[dict[str, Any]]] = {}
    for g in groups:
        by_label.setdefault(g["label"], []).append(g)

    def signature(r: int) -> tuple:
        return (tuple(rank_labels[r]), tuple(rank_hw[r]), tuple((e["label"], e["index"]) for e in rank_env[r]))

    runs: list[list[int]] = [[0]]
    last = signature(0)
    for r in range(1, num_nodes):
        sig = signature(r)
        if len(runs) > 1 and sig == last:
            runs[-1].append(r)
        else:
            runs.append([r])
        last = sig

    used_names: set[str] = set()
    next_suffix: dict[str, int] = {}  # the smallest free suffix only grows: no O(roles^2) name search
    for i, ranks in enumerate(runs):
        sig_labels, sig_hw, _ = signature(ranks[0])
        head = i == 0
        base = "-".join(sig_labels) or ("header" if head else "worker")
        name, n = base, next_suffix.get(base, 2)
        if name.lower() in used_names:
            name = f"{base}-{n}"
        while name.lower() in used_names:
            name, n = f"{base}-{n + 1}", n + 1
        next_suffix[base] = n
        used_names.add(name.lower())
        env: dict[str, str] = {}
        interpreter = ""
        for e in rank_env[ranks[0]]:
            env.update(e["env"])
            interpreter = interpreter or e["python_interpreter_path"]
        hardware = None
        for g in groups_with_hw(sig_hw, by_label):
            cfgs = [c for r in ranks for c in g["hardware"].get(r, [])]
            if cfgs:
                hardware = {"type": g["hw_type"], "configs": cfgs}
                break
        sig_groups = [g for lbl in dict.fromkeys(sig_labels) for g in by_label.get(lbl, [])]
        if sig_labels:
            robot = any(g["hw_type"] for g in sig_groups)
            gpus, gpus_source = _group_gpus(sig_groups, group_need, group_all, group_components, cluster_gpus)
            if gpus is None and not gpus_source and robot:
                gpus, gpus_source = 0, "robot"  # a robot role that hosts only ``env`` (rlinf.md 8.2: CPU)
        else:
            robot = False
            gpus, gpus_source = global_gpus, global_source
        if gpus is None:
            gpus_source = ""
            warnings.append(Problem(f"roles.{name}", "rlinf_gpus_unknown", {"role": name}, severity=WARNING))
        result.roles.append(
            {
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
        )
    return result


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
