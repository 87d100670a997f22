"""RLinf rank expressions (rlinf.md 5) and the role planner (rlinf.md 8) on the nine real configs."""

from __future__ import annotations

import pytest
import yaml

from jobs.jobspec.ranks import format_ranks, parse_rank_config
from jobs.jobspec.rlinf import plan
from tests.shared_spec import RLINF_CONFIGS

CONFIGS = RLINF_CONFIGS
ALL = sorted(CONFIGS.glob("*.yaml"))


@pytest.mark.parametrize(
    ("value", "expected"),
    [(0, [0]), ("all", [0, 1, 2, 3]), ("ALL", [0, 1, 2, 3]), ("0,,2", [0, 2]), (" 1 - 2 ", [1, 2]), ("", [])],
)
def test_parse_rank_config_table(value, expected):
    assert parse_rank_config(value, range(4)) == expected


def test_parse_rank_config_errors():
    with pytest.raises(AssertionError):
        parse_rank_config("2-1", range(4))
    with pytest.raises(ValueError):
        parse_rank_config("-1", range(4))
    with pytest.raises(ValueError, match='expected format: "a,b,c-d" or "all"'):
        parse_rank_config([0, 1], range(4))
    with pytest.raises(AssertionError):
        parse_rank_config("3-5", range(4))  # end outside [0, 3]
    assert parse_rank_config("0-1,1-2", range(4)) == [0, 1, 2]


def test_format_ranks():
    assert format_ranks([0, 1, 2, 5]) == "0-2,5"
    assert parse_rank_config(format_ranks([1, 3, 4, 5]), range(9)) == [1, 3, 4, 5]


def test_nine_configs_present():
    assert len(ALL) == 9


@pytest.mark.parametrize("path", ALL, ids=lambda p: p.name)
def test_workers_sum_to_num_nodes(path):
    text = path.read_text()
    num_nodes = yaml.safe_load(text)["cluster"]["num_nodes"]
    result = plan(text)
    assert result.num_nodes == num_nodes
    assert sum(r["replicas"] for r in result.roles) == num_nodes
    assert result.roles[0]["head"] and result.roles[0]["replicas"] == 1 and result.roles[0]["rank_start"] == 0
    assert [r["rank_start"] for r in result.roles] == sorted(r["rank_start"] for r in result.roles)
    covered = [rank for r in result.roles for rank in r["ranks"]]
    assert covered == list(range(num_nodes))
    assert len({r["name"].lower() for r in result.roles}) == len(result.roles)
    if path.name == "emb_realworld_dual_franka_dagger_openpi.yaml":
        assert not result.valid
        assert [p.code for p in result.problems] == ["node_ranks_mismatch"]
        assert "node_rank 0" in result.problems[0].message("en")
    else:
        assert result.valid, result.to_dict("en")


def test_charger_two_roles():
    result = plan((CONFIGS / "emb_realworld_charger_sac_cnn_async.yaml").read_text())
    assert [(r["name"], r["head"], r["replicas"], r["node_ranks"]) for r in result.roles] == [
        ("4090", True, 1, "0"),
        ("franka", False, 1, "1"),
    ]
    assert result.roles[1]["hardware"]["type"] == "Franka"
    assert result.roles[1]["role"] == "Env"
    assert result.roles[0]["python_interpreter_path"] == "/path/to/python"


def test_math_header_plus_workers():
    result = plan((CONFIGS / "math_qwen2.5-1.5b-grpo-megatron.yaml").read_text())
    assert [(r["name"], r["replicas"], r["node_ranks"]) for r in result.roles] == [
        ("header", 1, "0"),
        ("worker", 15, "1-15"),
    ]
    pipeline = plan((CONFIGS / "math_qwen2.5-1.5b-grpo-megatron-pipeline.yaml").read_text())
    assert [r["gpus"] for r in pipeline.roles] == [8, 8]


def test_isaaclab_single_header_with_env_vars():
    result = plan((CONFIGS / "emb_isaaclab_franka_stack_cube_ppo_gr00t.yaml").read_text())
    assert len(result.roles) == 1
    assert result.roles[0]["env"] == {"OMP_NUM_THREADS": "32"}
    assert result.roles[0]["gpus"] == 4


def test_config_problems():
    assert plan("cluster: {num_nodes: 0}").problems[0].code == "rlinf_num_nodes_invalid"
    assert plan("a: [").problems[0].code == "yaml_invalid"
    p = plan({"cluster": {"num_nodes": 2, "node_groups": [{"label": "g", "node_ranks": [0, 1]}]}})
    assert p.problems[0].code == "rlinf_node_ranks_invalid"
    assert 'expected format: "a,b,c-d" or "all"' in p.problems[0].message("en")
    p = plan({"cluster": {"num_nodes": 2, "node_groups": [{"label": "g", "node_ranks": 0, "env_configs": {"a": 1}}]}})
    assert p.problems[0].code == "rlinf_group_invalid"
    p = plan({"cluster": {"num_nodes": 2, "component_placement": {"env": {"node_group": "zz", "placement": 0}}}})
    assert p.problems[0].code == "rlinf_group_unknown"


def test_placeholder_interpreter_path_is_a_warning_not_an_error():
    """rlinf.md 3.9 / 8.2: the charger config ships `/path/to/python`, which fails at start-up."""
    result = plan((ALL[0].parent / "emb_realworld_charger_sac_cnn_async.yaml").read_text())
    assert result.valid
    codes = {(w.code, w.params["value"]) for w in result.warnings}
    assert codes == {("rlinf_placeholder", "/path/to/python"), ("rlinf_robot_ip_invalid", "ROBOT_IP")}
    assert "/path/to/python" in result.warnings[0].message("en") and "占位值" in result.warnings[0].message()
    clean = plan("cluster:\n  num_nodes: 1\n  component_placement: {actor: 0-7}\n")
    assert clean.warnings == []
