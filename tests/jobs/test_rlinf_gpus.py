"""GPUs per Worker from an RLinf import: every sample config, per role, with explicit expectations.

Expected values were computed by reading each config (rlinf.md 4.4: "highest resource rank + 1 spread over the
nodes"; a robot group's placement ids number robots, not GPUs; ``all`` says nothing without
``cluster.num_gpus_per_node`` or the nodes' inventory).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest
import yaml

from jobs.control import wizard as wz
from jobs.jobspec.rlinf import plan
from tests.shared_spec import RLINF_CONFIGS

CONFIGS = RLINF_CONFIGS

# file -> [(role name, replicas, node ranks, GPUs per Worker or None = unknown, left empty with a warning)]
EXPECTED = {
    # gpu: actor+rollout at placement 0 of a 1-node group -> 1 GPU; dosw1: env on the robot only -> 0
    "emb_dosw1_pick_sac_flow.yaml": [("gpu", 1, "0", 1), ("dosw1", 1, "1", 0)],
    # rollout group (all = rank 0) placement 0-3 -> 4 GPUs on the one node
    "emb_isaaclab_franka_stack_cube_ppo_gr00t.yaml": [("rollout", 1, "0", 4)],
    # actor 0-7 on 1 node -> 8
    "emb_maniskill_ppo_openvlaoft.yaml": [("header", 1, "0", 8)],
    "emb_realworld_charger_sac_cnn_async.yaml": [("4090", 1, "0", 1), ("franka", 1, "1", 0)],
    # invalid as shipped (DualFranka node_rank 0 outside 1-2), the layout is still proposed
    "emb_realworld_dual_franka_dagger_openpi.yaml": [("inference", 1, "0", 1), ("franka", 2, "1-2", 0)],
    "emb_realworld_peginsertion_rlpd_cnn_async.yaml": [("4090", 1, "0", 1), ("franka", 1, "1", 0)],
    # actor 24-63 -> 64 GPUs over 8 nodes -> 8 each
    "math_qwen2.5-1.5b-grpo-megatron-pipeline.yaml": [("header", 1, "0", 8), ("worker", 7, "1-7", 8)],
    # actor,rollout,reward: all -> the config does not say
    "math_qwen2.5-1.5b-grpo-megatron.yaml": [("header", 1, "0", None), ("worker", 15, "1-15", None)],
    "sft_qwen3_vl_moe_megatron_sft_vlm.yaml": [("header", 1, "0", None), ("worker", 1, "1", None)],
}


def test_every_sample_config_is_covered():
    assert sorted(EXPECTED) == sorted(p.name for p in CONFIGS.glob("*.yaml"))


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_roles_replicas_ranks_gpus(name):
    result = plan((CONFIGS / name).read_text())
    got = [(r["name"], r["replicas"], r["node_ranks"], r["gpus"]) for r in result.roles]
    assert got == EXPECTED[name]
    assert [r["ranks"] for r in result.roles] == [_expand(x[2]) for x in EXPECTED[name]]
    unknown = [w.params["role"] for w in result.warnings if w.code == "rlinf_gpus_unknown"]
    assert unknown == [r[0] for r in EXPECTED[name] if r[3] is None]


def _expand(ranks: str) -> list[int]:
    first, _, last = ranks.partition("-")
    return list(range(int(first), int(last or first) + 1))


def _config(name: str, **cluster) -> dict:
    data = yaml.safe_load((CONFIGS / name).read_text())
    data["cluster"].update(cluster)
    return data


def test_all_placement_uses_num_gpus_per_node():
    # the 32-node, 8-GPU reasoning config: 32 Workers, 8 GPUs each, not 0
    result = plan(_config("math_qwen2.5-1.5b-grpo-megatron.yaml", num_nodes=32, num_gpus_per_node=8))
    assert [(r["replicas"], r["gpus"], r["gpus_source"]) for r in result.roles] == [(1, 8, "config"), (31, 8, "config")]
    assert not result.warnings


def _robot_header(**group_extra) -> dict:
    """A dual-arm robot eval: the Header's group has the robot AND runs the policy (rollout) model."""
    group = {
        "label": "arm",
        "node_ranks": 0,
        "hardware": {"type": "DualFranka", "configs": [{"node_rank": 0}]},
        **group_extra,
    }
    return {
        "cluster": {
            "num_nodes": 1,
            "component_placement": {
                "rollout": {"node_group": "arm", "placement": 0},
                "env": {"node_group": "arm", "placement": 0},
            },
            "node_groups": [group],
        }
    }


def test_robot_group_hosting_the_policy_is_not_zero():
    result = plan(_robot_header())
    assert result.roles[0]["gpus"] is None
    assert [w.code for w in result.warnings] == ["rlinf_gpus_unknown"]
    assert "arm" in result.warnings[0].message("en")
    assert plan(_robot_header(num_gpus=2)).roles[0]["gpus"] == 2
    with_cluster = _robot_header()
    with_cluster["cluster"]["num_gpus_per_node"] = 1
    assert plan(with_cluster).roles[0]["gpus"] == 1


@dataclass
class _Cluster:
    name: str


@dataclass
class _Node:
    labels: dict
    capacity: dict
    cluster: _Cluster = field(default_factory=lambda: _Cluster("demo"))


def test_wizard_fills_unknown_gpus_from_inventory_or_leaves_them_empty():
    result = plan((CONFIGS / "sft_qwen3_vl_moe_megatron_sft_vlm.yaml").read_text())
    state = wz.initial_state(["demo"])
    wz.apply_plan(state, result, [_Node({}, {"nvidia.com/gpu": "8"}), _Node({}, {"cpu": "4"})], ["demo"])
    assert [r.gpu for r in state.roles] == ["8", "8"]
    wz.apply_plan(state, result, [_Node({}, {"cpu": "4"})], ["demo"])
    assert [r.gpu for r in state.roles] == ["", ""]  # visibly empty, never "0"
    wz.apply_plan(state, result, [_Node({}, {"nvidia.com/gpu": "8"}), _Node({}, {"nvidia.com/gpu": "4"})], ["demo"])
    assert [r.gpu for r in state.roles] == ["", ""]  # nodes disagree: the user decides
    known = plan((CONFIGS / "emb_realworld_peginsertion_rlpd_cnn_async.yaml").read_text())
    wz.apply_plan(state, known, [], ["demo"])
    assert [r.gpu for r in state.roles] == ["1", "0"]
