"""RLinf config checks before submit, the same as RLinf 0.3.0's own (jobs.jobspec.rlinf): a robot IP that RLinf
refuses (rlinf/scheduler/hardware/robots/franka.py, dual_franka.py) blocks a job unless the job acknowledges the
check; a hardware ``node_rank`` outside its group's ``node_ranks`` (rlinf/scheduler/cluster/config.py) and a
component placed on a node group without nodes (rlinf/scheduler/cluster/node.py, placement/placement.py) are errors.
All through the API: ``/api/v1/jobs/validate/``, ``/api/v1/jobs/`` and ``/api/v1/rlinf/plan/``."""

from __future__ import annotations

import copy

import pytest
import yaml

from jobs.models import Job
from tests.shared_spec import RLINF_CONFIGS
from tests.spec_fixtures import base_doc

pytestmark = pytest.mark.django_db

CONFIGS = RLINF_CONFIGS
ACK = "rlark.io/acknowledged-checks"
ACK_CODE = "rlinf_robot_ip_invalid"
HW = "rlinf:cluster.node_groups[1].hardware.configs[0]"

# What the console says about each shared config as shipped: its errors under ``rlinf:`` (code, path). RLinf 0.3.0
# refuses the same three (ClusterConfig.from_dict_cfg, run on these files): "'robot_ip' in franka config must be a
# valid IP address. But got ROBOT_IP." (charger, peg insertion), "'left_robot_ip' in DualFranka config must be a
# valid IP address. But got LEFT_ROBOT_IP." (dual Franka, whose node_rank 0 is outside node_ranks [1, 2] as well).
VERDICTS = {
    "emb_dosw1_pick_sac_flow.yaml": [],
    "emb_isaaclab_franka_stack_cube_ppo_gr00t.yaml": [],
    "emb_maniskill_ppo_openvlaoft.yaml": [],
    "emb_realworld_charger_sac_cnn_async.yaml": [("rlinf_robot_ip_invalid", f"{HW}.robot_ip")],
    "emb_realworld_dual_franka_dagger_openpi.yaml": [
        ("node_ranks_mismatch", f"{HW}.node_rank"),
        ("rlinf_robot_ip_invalid", f"{HW}.left_robot_ip"),
        ("rlinf_robot_ip_invalid", f"{HW}.right_robot_ip"),
    ],
    "emb_realworld_peginsertion_rlpd_cnn_async.yaml": [("rlinf_robot_ip_invalid", f"{HW}.robot_ip")],
    "math_qwen2.5-1.5b-grpo-megatron-pipeline.yaml": [],
    "math_qwen2.5-1.5b-grpo-megatron.yaml": [],
    "sft_qwen3_vl_moe_megatron_sft_vlm.yaml": [],
}


def rlinf_errors(body: dict, key: str = "errors") -> list[tuple[str, str]]:
    return sorted((e["code"], e["path"]) for e in body[key] if e["path"].startswith("rlinf:"))


def two_worker_doc(acknowledge: str = "") -> dict:
    """The base job with a Header and one more Worker: 2 Workers, as the two-node robot configs want."""
    doc = base_doc()
    doc["spec"]["tasks"][1]["kubernetes"]["workload"]["replicas"] = 1
    doc["spec"]["tasks"][1]["nodeSelector"] = {"kubernetes.io/hostname": "gpu-1"}
    if acknowledge:
        doc["metadata"]["annotations"][ACK] = acknowledge
    return doc


def validate(api, config, doc=None, lang="en") -> dict:
    text = config if isinstance(config, str) else yaml.safe_dump(config)
    body = {"document": doc or base_doc(), "rlinf_config": text}
    return api.post("/api/v1/jobs/validate/", body, format="json", HTTP_ACCEPT_LANGUAGE=lang).json()


def plan(api, config) -> dict:
    text = config if isinstance(config, str) else yaml.safe_dump(config)
    return api.post("/api/v1/rlinf/plan/", text, content_type="application/yaml", HTTP_ACCEPT_LANGUAGE="en").json()


def test_the_verdict_table_covers_every_shared_config():
    assert sorted(p.name for p in CONFIGS.glob("*.yaml")) == sorted(VERDICTS)


@pytest.mark.parametrize("name", sorted(VERDICTS))
def test_each_shared_config_as_shipped(api, name):
    text = (CONFIGS / name).read_text()
    assert rlinf_errors(validate(api, text)) == VERDICTS[name]
    # Acknowledging the robot IP check turns its errors into warnings; every other error stays.
    doc = base_doc()
    doc["metadata"]["annotations"][ACK] = ACK_CODE
    body = validate(api, text, doc)
    assert rlinf_errors(body) == [v for v in VERDICTS[name] if v[0] != ACK_CODE]
    assert rlinf_errors(body, "warnings") == [v for v in VERDICTS[name] if v[0] == ACK_CODE]


def test_submitting_the_charger_config_needs_the_acknowledgement(api):
    charger = (CONFIGS / "emb_realworld_charger_sac_cnn_async.yaml").read_text()
    r = api.post(
        "/api/v1/jobs/",
        {"document": two_worker_doc(), "rlinf_config": charger},
        format="json",
        HTTP_ACCEPT_LANGUAGE="en",
    )
    assert r.status_code == 400 and [e["code"] for e in r.json()["errors"]] == [ACK_CODE]
    message = r.json()["errors"][0]["message"]
    assert message.startswith("cluster.node_groups[1].hardware.configs[0].robot_ip is ROBOT_IP, which is not an IP")
    assert "\"'robot_ip' in franka config must be a valid IP address. But got ROBOT_IP.\"" in message
    assert "rlark.io/acknowledged-checks: rlinf_robot_ip_invalid" in message
    zh = api.post("/api/v1/jobs/", {"document": two_worker_doc(), "rlinf_config": charger}, format="json").json()
    assert zh["errors"][0]["message"].startswith(
        "cluster.node_groups[1].hardware.configs[0].robot_ip 为 ROBOT_IP，不是 IP 地址。"
    )
    assert "'robot_ip' in franka config must be a valid IP address. But got ROBOT_IP." in zh["errors"][0]["message"]
    assert not Job.objects.exists()

    body = {"document": two_worker_doc(ACK_CODE), "rlinf_config": charger}
    r = api.post("/api/v1/jobs/", body, format="json", HTTP_ACCEPT_LANGUAGE="en")
    assert r.status_code == 201, r.json()
    warning = next(w for w in r.json()["warnings"] if w["code"] == ACK_CODE)
    assert warning["path"] == f"{HW}.robot_ip" and "The job acknowledges this check" in warning["message"]
    assert Job.objects.get(name="ppo-job").spec["metadata"]["annotations"][ACK] == ACK_CODE


def franka(robot_ip, hw_type="Franka", field="robot_ip") -> dict:
    """A two-node config: group ``gpu`` [0] and a robot group ``arm`` [1] with one hardware config at rank 1."""
    config = {"node_rank": 1}
    if robot_ip is not None:
        config[field] = robot_ip
    return {
        "cluster": {
            "num_nodes": 2,
            "component_placement": {
                "actor": {"node_group": "gpu", "placement": 0},
                "env": {"node_group": "arm", "placement": 0},
            },
            "node_groups": [
                {"label": "gpu", "node_ranks": 0},
                {"label": "arm", "node_ranks": 1, "hardware": {"type": hw_type, "configs": [config]}},
            ],
        }
    }


@pytest.mark.parametrize(
    ("hw_type", "field", "value", "refused"),
    [
        # RLinf parses a set field with ipaddress.ip_address (results confirmed against RLinf 0.3.0's FrankaConfig)
        ("Franka", "robot_ip", "10.10.10.1", False),
        ("Franka", "robot_ip", "::1", False),
        ("Franka", "robot_ip", "fe80::1%eth0", False),
        ("Franka", "robot_ip", 167772161, False),  # an int is an address for ipaddress
        ("Franka", "robot_ip", None, False),  # unset: RLinf reads ROBOT_IP on the robot's node
        ("Franka", "robot_ip", "${oc.env:ROBOT_IP}", False),  # resolved by Hydra only when RLinf starts
        ("Franka", "robot_ip", "ROBOT_IP", True),
        ("Franka", "robot_ip", "10.0.0.300", True),
        ("Franka", "robot_ip", " 10.10.10.1", True),
        ("Franka", "robot_ip", "localhost", True),
        ("Franka", "robot_ip", "", True),
        ("DualFranka", "right_robot_ip", "", True),
        ("DualFranka", "left_robot_ip", "10.10.10.2", False),
        ("DOSW1", "robot_url", "localhost", False),  # DOSW1 checks no address
    ],
)
def test_robot_ip_acceptance_is_rlinfs(api, hw_type, field, value, refused):
    config = franka(value, hw_type, field)
    warnings = [w for w in plan(api, config)["warnings"] if w["code"] == ACK_CODE]
    errors = rlinf_errors(validate(api, config, two_worker_doc()))
    if refused:
        path = f"{HW}.{field}"
        assert errors == [(ACK_CODE, path)]
        assert warnings[0]["path"] == path[len("rlinf:") :] and f"But got {value}." in warnings[0]["message"]
    else:
        assert errors == [] and warnings == []


def test_hardware_node_rank_outside_its_group_quotes_rlinf(api):
    dual = yaml.safe_load((CONFIGS / "emb_realworld_dual_franka_dagger_openpi.yaml").read_text())
    hc = dual["cluster"]["node_groups"][1]["hardware"]["configs"][0]
    hc["left_robot_ip"], hc["right_robot_ip"] = "10.10.10.1", "10.10.10.2"
    doc = base_doc()
    body = validate(api, dual, doc)
    assert rlinf_errors(body) == [("node_ranks_mismatch", f"{HW}.node_rank")]
    message = next(e["message"] for e in body["errors"] if e["path"] == f"{HW}.node_rank")
    assert message == (
        "cluster.node_groups[1].hardware.configs[0].node_rank is 0, outside node_ranks 1-2 of node group franka. "
        'RLinf refuses this config at start-up: "node_rank 0 in hardware config must be within node_ranks [1, 2] '
        "in node group 'franka'.\""
    )
    hc["node_rank"] = 1
    assert rlinf_errors(validate(api, dual, doc)) == []


def test_two_arms_on_one_node_of_one_group_are_allowed_as_in_rlinf(api):
    config = franka("10.10.10.1")
    configs = config["cluster"]["node_groups"][1]["hardware"]["configs"]
    configs.append({"node_rank": 1, "robot_ip": "10.10.10.2"})
    assert rlinf_errors(validate(api, config, two_worker_doc())) == []
    # the same type at the same rank in another group is what RLinf refuses
    other = copy.deepcopy(config)
    other["cluster"]["node_groups"].append(
        {"label": "arm2", "node_ranks": 1, "hardware": {"type": "Franka", "configs": [{"node_rank": 1}]}}
    )
    body = validate(api, other, two_worker_doc())
    assert rlinf_errors(body) == [("node_ranks_mismatch", "rlinf:cluster.node_groups[2].hardware.configs[0].node_rank")]
    assert (
        "Cannot have multiple hardware configs of the same type 'Franka' for the same node_rank 1 in different "
        in (body["errors"][0]["message"])
    )


def test_a_component_placed_on_a_group_without_nodes(api):
    config = {
        "cluster": {
            "num_nodes": 2,
            "component_placement": {
                "actor,rollout": {"node_group": "gpu", "placement": 0},
                "env": {"node_group": "gpu,spare", "placement": 0},
            },
            "node_groups": [{"label": "gpu", "node_ranks": "0-1"}, {"label": "spare", "node_ranks": ""}],
        }
    }
    body = validate(api, config, two_worker_doc())
    path = "rlinf:cluster.component_placement.env.node_group"
    assert rlinf_errors(body) == [("rlinf_group_no_workers", path)]
    message = next(e["message"] for e in body["errors"] if e["path"] == path)
    assert message == (
        "cluster.component_placement.env.node_group: env is placed on node group spare, whose node_ranks hold no "
        "node, so no Worker runs it. RLinf leaves out a node group without nodes and refuses the placement at "
        'start-up: "Node group not found for components [\'env\'] with label "spare"."'
    )
    zh = validate(api, config, two_worker_doc(), lang="zh-hans")
    assert "没有 Worker 运行它" in next(e["message"] for e in zh["errors"] if e["path"] == path)
    # a group without nodes that no component uses is left alone, as RLinf does
    config["cluster"]["component_placement"]["env"]["node_group"] = "gpu"
    assert rlinf_errors(validate(api, config, two_worker_doc())) == []


def test_an_empty_acknowledgement_withdraws_it(api):
    charger = (CONFIGS / "emb_realworld_charger_sac_cnn_async.yaml").read_text()
    body = {"document": two_worker_doc(ACK_CODE), "rlinf_config": charger}
    assert api.post("/api/v1/jobs/", body, format="json").status_code == 201
    # PUT and PATCH keep annotations the new document leaves out; an empty value withdraws the acknowledgement
    kept = api.patch("/api/v1/jobs/ppo-job/", {"spec": {"tasks": two_worker_doc()["spec"]["tasks"]}}, format="json")
    assert kept.status_code == 200, kept.json()
    r = api.patch("/api/v1/jobs/ppo-job/", {"metadata": {"annotations": {ACK: ""}}}, format="json")
    assert r.status_code == 400 and [e["code"] for e in r.json()["errors"]] == [ACK_CODE]
