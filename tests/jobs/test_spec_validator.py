"""Every validator code: the smallest change to a valid job that triggers it, and a near miss that must not."""

from __future__ import annotations

import pytest

from jobs.jobspec.document import normalize
from jobs.jobspec.validator import validate
from tests.shared_spec import RLINF_CONFIGS
from tests.spec_fixtures import SSH_KEY, base_doc, container, inventory, pod_spec, template


def run(doc, inv=None, **kw):
    return validate(normalize(doc), inv or inventory(), **kw)


def codes(result):
    return {p.code for p in result.problems}


def test_base_job_is_valid_without_warnings():
    result = run(base_doc())
    assert result.valid, result.to_dict("en")
    assert result.problems == []
    assert result.workers == 3


def _set(path_fn):
    return path_fn


def name(value):
    def f(d, inv):
        d["metadata"]["name"] = value

    return f


def t0(key, value):
    def f(d, inv):
        d["spec"]["tasks"][0][key] = value

    return f


def t1(key, value):
    def f(d, inv):
        d["spec"]["tasks"][1][key] = value

    return f


def c(i, key, value):
    def f(d, inv):
        container(d, i)[key] = value

    return f


def replicas(i, n):
    def f(d, inv):
        d["spec"]["tasks"][i]["kubernetes"]["workload"]["replicas"] = n

    return f


def gpu(i, n):
    def f(d, inv):
        res = container(d, i)["resources"]
        res["requests"]["nvidia.com/gpu"] = n
        res["limits"]["nvidia.com/gpu"] = n

    return f


def env(i, name_, value):
    def f(d, inv):
        container(d, i)["env"].insert(0, {"name": name_, "value": value})

    return f


def mount(i, mount_path, volume, sub_path=None):
    def f(d, inv):
        entry = {"name": volume["name"], "mountPath": mount_path}
        if sub_path is not None:
            entry["subPath"] = sub_path
        container(d, i).setdefault("volumeMounts", []).append(entry)
        pod_spec(d, i).setdefault("volumes", []).append(volume)

    return f


def storage_mount(i, mount_path, storage_class, vol="data"):
    def f(d, inv):
        claim = f"pvc-x-{vol}"
        mount(i, mount_path, {"name": vol, "persistentVolumeClaim": {"claimName": claim}})(d, inv)
        if storage_class is not None:
            d["spec"]["tasks"][i]["kubernetes"]["workload"].setdefault("pvcStorageMap", {})[claim] = storage_class

    return f


def both(*fns):
    def f(d, inv):
        for fn in fns:
            fn(d, inv)

    return f


def add_node(cluster, node_name, **labels):
    def f(d, inv):
        from tests.spec_fixtures import node

        inv.nodes.append(node(cluster, node_name, **labels))

    return f


def used(node_name, resource, amount):
    def f(d, inv):
        next(n for n in inv.nodes if n.name == node_name).used[resource] = amount

    return f


# code -> (trigger, near miss); each trigger is applied to the valid base job.
CASES = {
    "job_name_invalid": (name("My-Job"), name("a")),
    "display_name_too_long": (
        lambda d, inv: d["metadata"]["annotations"].update({"rlark.io/display-name": "x" * 129}),
        lambda d, inv: d["metadata"]["annotations"].update({"rlark.io/display-name": "训" * 128}),
    ),
    "roles_empty": (lambda d, inv: d["spec"].update(tasks=[]), None),
    "role_name_empty": (t1("name", " "), t1("name", "r")),
    "role_name_duplicate": (t1("name", "Actor "), t1("name", "actor-2")),
    "header_missing": (t0("head", False), None),
    "header_multiple": (
        both(t1("head", True), t1("runScript", "x")),
        None,
    ),
    "header_replicas_not_one": (replicas(0, 2), replicas(0, 1)),
    "run_script_missing": (t0("runScript", "  "), t0("runScript", "python train.py")),
    "run_script_not_on_header": (t1("runScript", "python x.py"), t1("prepareScript", "python x.py")),
    "cluster_missing": (t1("cluster", ""), None),
    "cluster_unknown": (t1("cluster", "nope"), None),
    "image_missing": (c(1, "image", ""), None),
    "image_whitespace": (
        c(1, "image", "docker.io/library/ubuntu: 22.04"),
        c(1, "image", "docker.io/library/ubuntu:22.04"),
    ),
    "image_mutable_tag": (c(1, "image", "rlinf/rlinf:latest"), c(1, "image", "registry/team/image@sha256:abc")),
    "image_registry_no_credentials": (
        c(1, "image", "private.example.com/team/app:v1"),
        c(1, "image", "docker.io/library/ubuntu:22.04"),
    ),
    "node_selector_empty": (t1("nodeSelector", {}), None),
    "node_selector_multivalue": (
        t1("nodeSelector", "kubernetes.io/hostname=gpu-1,gpu-2"),
        t1("nodeSelector", "pool=rollout"),
    ),
    "node_selector_no_match": (t1("nodeSelector", {"pool": "nothing"}), None),
    "node_selector_cross_cluster": (
        both(add_node("other", "o-1", pool="rollout"), replicas(1, 3)),
        add_node("other", "o-1", pool="other-rollout"),
    ),
    "header_match_not_one": (add_node("local", "gpu-9", pool="head"), add_node("local", "gpu-9", pool="head2")),
    "replicas_mismatch": (replicas(1, 3), replicas(1, 2)),
    "replicas_zero": (replicas(1, 0), None),
    "gpu_exceeds_node": (gpu(1, "9"), gpu(1, "8")),
    "shared_node_overcommit": (
        both(
            lambda d, inv: d["spec"]["tasks"].append(template("env", {"pool": "rollout"}, replicas=2, gpu="4")),
            gpu(1, "5"),
        ),
        lambda d, inv: d["spec"]["tasks"].append(template("env", {"pool": "rollout"}, replicas=2, gpu="4")),
    ),
    "mount_path_missing": (
        mount(1, "", {"name": "x", "emptyDir": {}}),
        mount(1, "/data", {"name": "x", "emptyDir": {}}),
    ),
    "host_path_missing": (
        mount(1, "/data", {"name": "data", "hostPath": {"path": ""}}),
        mount(1, "/data", {"name": "data", "hostPath": {"path": "/srv/data"}}),
    ),
    "host_path_outside_roots": (
        mount(1, "/data", {"name": "data", "hostPath": {"path": "/opt/datasets"}}),
        mount(1, "/data", {"name": "data", "hostPath": {"path": "/srv/datasets"}}),
    ),
    "host_path_forbidden": (  # the first entry of the host Python's sys.path: an import path for root
        mount(1, "/data", {"name": "data", "hostPath": {"path": "/usr/lib/python311.zip"}}),
        mount(1, "/data", {"name": "data", "hostPath": {"path": "/srv/python311.zip"}}),
    ),
    "sub_path_invalid": (  # out of an allowed root: /srv/data/../../etc/... is /etc/...
        mount(1, "/data", {"name": "data", "hostPath": {"path": "/srv/data"}}, "../../etc/rlark"),
        mount(1, "/data", {"name": "data", "hostPath": {"path": "/srv/data"}}, "runs/rlark"),
    ),
    "host_path_relative": (
        mount(1, "/data", {"name": "data", "hostPath": {"path": "srv/data"}}),
        mount(1, "/data", {"name": "data", "hostPath": {"path": "/srv/data"}}),
    ),
    "storage_class_missing": (storage_mount(1, "/data", None), storage_mount(1, "/data", "oss-a")),
    "storage_class_wrong_cluster": (storage_mount(1, "/data", "oss-b"), storage_mount(1, "/data", "oss-a")),
    "mount_shadows_path": (
        mount(1, "/root", {"name": "root", "emptyDir": {}}),
        mount(1, "/root/data", {"name": "root-data", "emptyDir": {}}),
    ),
    "env_name_invalid": (env(1, "1BAD", "x"), env(1, "GOOD_1", "x")),
    "env_reserved": (env(1, "RLINF_NODE_RANK", "3"), env(1, "RLINF_LOG_LEVEL", "DEBUG")),
    "secret_in_spec": (env(1, "HF_TOKEN", "hf_abcdefghijklmnopqrstuvwxyz0123456789"), env(1, "MAX_TOKENS", "4096")),
    "domain_unknown": (lambda d, inv: d["spec"].update(domain="d9"), lambda d, inv: d["spec"].update(domain="d1")),
    "ssh_key_unknown": (
        lambda d, inv: d["spec"].update(sshPublicKeys=["ssh-ed25519 AAAAnotmine"]),
        lambda d, inv: d["spec"].update(sshPublicKeys=[SSH_KEY.rsplit(" ", 1)[0] + " other-comment"]),
    ),
    "role_invalid": (t1("role", "Learner"), t1("role", "Env")),
    "agent_type_invalid": (t1("agentType", "Docker"), t1("agentType", "Kubernetes")),
    "volume_name_collision": (
        both(
            mount(1, "/mnt/a-b", {"name": "mnt-a-b", "emptyDir": {}}),
            mount(1, "/mnt/a/b", {"name": "mnt-a-b", "emptyDir": {}}),
        ),
        both(
            mount(1, "/mnt/a-b", {"name": "mnt-a-b", "emptyDir": {}}),
            mount(1, "/mnt/c", {"name": "mnt-c", "emptyDir": {}}),
        ),
    ),
    "quantity_invalid": (
        lambda d, inv: container(d, 1)["resources"]["requests"].update(memory="16 GB"),
        lambda d, inv: container(d, 1)["resources"]["requests"].update(memory="16G"),
    ),
    "host_path_not_allowed": (
        both(
            t1("cluster", "other"),
            t1("nodeSelector", {"pool": "other"}),
            replicas(1, 1),
            mount(1, "/data", {"name": "data", "hostPath": {"path": "/srv"}}),
        ),
        both(t1("cluster", "other"), t1("nodeSelector", {"pool": "other"}), replicas(1, 1)),
    ),
    "node_selector_cluster_mismatch": (
        both(t1("nodeSelector", {"pool": "other"}), replicas(1, 1)),
        both(t1("cluster", "other"), t1("nodeSelector", {"pool": "other"}), replicas(1, 1)),
    ),
    "resource_exceeds_node": (
        lambda d, inv: container(d, 1)["resources"]["requests"].update(memory="65Gi", cpu="4"),
        lambda d, inv: container(d, 1)["resources"].update(requests={"memory": "64Gi"}, limits={}),
    ),
    "env_name_duplicate": (env(1, "FOO", "2"), env(1, "BAR", "2")),
    "header_not_first": (lambda d, inv: d["spec"]["tasks"].reverse(), None),
    "task_name_too_long": (name("a" * 63), name("a" * 40)),
}


@pytest.mark.parametrize("code", sorted(CASES))
def test_code_triggered_and_near_miss(code):
    trigger, near_miss = CASES[code]
    doc, inv = base_doc(), inventory()
    trigger(doc, inv)
    result = run(doc, inv)
    assert code in codes(result), result.to_dict("en")
    # Every problem carries a path and both messages are filled.
    for p in result.problems:
        assert p.message("en") and p.message("zh-hans") and "{" not in p.message("en")
    if near_miss is not None:
        doc, inv = base_doc(), inventory()
        near_miss(doc, inv)
        result = run(doc, inv)
        assert code not in codes(result), result.to_dict("en")


def test_all_problems_at_once():
    doc = base_doc()
    doc["metadata"]["name"] = "Bad_Name"
    container(doc, 1)["image"] = ""
    doc["spec"]["tasks"][1]["nodeSelector"] = {}
    doc["spec"]["domain"] = "nope"
    result = run(doc)
    assert {"job_name_invalid", "image_missing", "node_selector_empty", "domain_unknown"} <= set(result.codes())


def test_header_message_is_upstreams_exact_string():
    doc = base_doc()
    doc["spec"]["tasks"][0]["kubernetes"]["workload"]["replicas"] = 2
    p = next(p for p in run(doc).errors if p.code == "header_replicas_not_one")
    assert p.message("zh-hans") == "Header 角色只能有 1 个 Worker。"
    assert p.message("en") == "The header role must have exactly 1 worker."
    assert p.path == "spec.tasks[0].kubernetes.workload.replicas"


def test_job_name_messages():
    doc = base_doc()
    doc["metadata"] = {"name": ""}
    p = run(doc).errors[0]
    assert (p.code, p.message("zh-hans"), p.message("en")) == (
        "job_name_invalid",
        "请输入任务名称。",
        "Enter a job name.",
    )
    doc["metadata"]["name"] = "x" * 64
    assert run(doc).errors[0].message("en").startswith("Use 1-63 lowercase letters")


def test_empty_name_is_generated_from_display_name():
    doc = base_doc()
    doc["metadata"]["name"] = ""
    normalized = normalize(doc)
    assert normalized["metadata"]["name"].startswith("ppo-20-8bad-7ec3-")
    assert validate(normalized, inventory()).valid


def test_node_matching_is_global_and_counts_every_cluster():
    inv = inventory()
    doc = base_doc()
    # A second cluster's node with the head label: the header now matches 2 nodes globally.
    from tests.spec_fixtures import node

    inv.nodes.append(node("other", "o-head", pool="head"))
    result = run(doc, inv)
    assert {"header_match_not_one", "node_selector_cross_cluster"} <= set(result.codes())


def test_gpu_pool_message_when_total_free_is_short():
    inv = inventory()
    next(n for n in inv.nodes if n.name == "gpu-2").used["nvidia.com/gpu"] = 7
    doc = base_doc()
    for i in (1,):
        container(doc, i)["resources"]["requests"]["nvidia.com/gpu"] = "2"
    result = run(doc, inv)
    # gpu-2 has 1 free: the role of 2 workers x 2 GPUs does not fit (free 8 + 1 = 9 >= 4, so per-pool passes) ...
    assert "gpu_exceeds_node" not in result.codes()
    assert "resource_short_nodes" in {p.code for p in result.warnings}
    next(n for n in inv.nodes if n.name == "gpu-1").used["nvidia.com/gpu"] = 7
    container(doc, 1)["resources"]["requests"]["nvidia.com/gpu"] = "1"
    container(doc, 1)["resources"]["limits"]["nvidia.com/gpu"] = "1"
    doc["spec"]["tasks"][1]["nodeSelector"] = {"pool": "rollout"}
    assert run(doc, inv).valid


def test_secret_heuristics():
    doc = base_doc()
    doc["spec"]["tasks"][0]["runScript"] = "export WANDB_API_KEY=0123456789abcdef && python train.py"
    assert "secret_in_spec" in run(doc).codes()
    doc["spec"]["tasks"][0]["runScript"] = 'export WANDB_API_KEY="$WANDB_KEY" && python train.py'
    assert "secret_in_spec" not in run(doc).codes()
    doc["spec"]["tasks"][0]["prepareScript"] = "git clone https://bob:hunter2@git.example.com/x.git"
    assert "secret_in_spec" in run(doc).codes()
    doc = base_doc()
    container(doc, 1)["env"].insert(0, {"name": "AWS_SECRET_ACCESS_KEY", "value": "abc"})
    assert "secret_in_spec" in run(doc).codes()
    doc = base_doc()
    doc["spec"]["sshPublicKeys"] = ["-----BEGIN OPENSSH PRIVATE KEY-----\nabc\n-----END OPENSSH PRIVATE KEY-----"]
    assert "secret_in_spec" in run(doc).codes()


def test_shm_volume_is_accepted_and_size_checked():
    doc = base_doc()
    mount(1, "/dev/shm", {"name": "dshm", "emptyDir": {"medium": "Memory", "sizeLimit": "20Gi"}})(doc, None)
    assert run(doc).problems == []
    pod_spec(doc, 1)["volumes"][0]["emptyDir"]["sizeLimit"] = "twenty"
    assert "quantity_invalid" in run(doc).codes()


def test_rlinf_config_checks():

    charger = (RLINF_CONFIGS / "emb_realworld_charger_sac_cnn_async.yaml").read_text()
    doc = base_doc()  # 1 + 2 workers vs num_nodes 2
    assert "num_nodes_mismatch" in run(doc, rlinf_config=charger).codes()
    doc["spec"]["tasks"][1]["kubernetes"]["workload"]["replicas"] = 1
    doc["spec"]["tasks"][1]["nodeSelector"] = {"kubernetes.io/hostname": "gpu-1"}
    doc["metadata"]["annotations"]["rlark.io/acknowledged-checks"] = "rlinf_robot_ip_invalid"  # robot_ip: ROBOT_IP
    result = run(doc, rlinf_config=charger)
    assert result.valid, result.to_dict("en")
    dual = (RLINF_CONFIGS / "emb_realworld_dual_franka_dagger_openpi.yaml").read_text()
    doc["spec"]["tasks"][1]["kubernetes"]["workload"]["replicas"] = 2
    doc["spec"]["tasks"][1]["nodeSelector"] = {"pool": "rollout"}
    result = run(doc, rlinf_config=dual)
    assert "node_ranks_mismatch" in result.codes()
    assert "num_nodes_mismatch" not in result.codes()


def test_node_ranks_mismatch_when_a_template_spans_two_groups():

    peg = (RLINF_CONFIGS / "emb_realworld_peginsertion_rlpd_cnn_async.yaml").read_text()
    doc = base_doc()
    # header (rank 0) + rollout x2 = 3 ranks vs 2 nodes; make rank layout [head x1][rollout x1] -> valid
    doc["spec"]["tasks"][1]["kubernetes"]["workload"]["replicas"] = 1
    doc["spec"]["tasks"][1]["nodeSelector"] = {"kubernetes.io/hostname": "gpu-1"}
    doc["metadata"]["annotations"]["rlark.io/acknowledged-checks"] = "rlinf_robot_ip_invalid"  # robot_ip: ROBOT_IP
    assert run(doc, rlinf_config=peg).valid
    # a 3-node config with groups [0], [1], [2]: a template with ranks 1-2 spans two groups
    cfg = {
        "cluster": {
            "num_nodes": 3,
            "component_placement": {"actor": "0"},
            "node_groups": [
                {"label": "gpu", "node_ranks": 0},
                {"label": "a", "node_ranks": 1},
                {"label": "b", "node_ranks": 2},
            ],
        }
    }
    doc["spec"]["tasks"][1]["kubernetes"]["workload"]["replicas"] = 2
    doc["spec"]["tasks"][1]["nodeSelector"] = {"pool": "rollout"}
    result = run(doc, rlinf_config=cfg)
    assert "node_ranks_mismatch" in result.codes() and "num_nodes_mismatch" not in result.codes()


ISSUE_CODES = """job_name_invalid display_name_too_long roles_empty role_name_empty role_name_duplicate header_missing
header_multiple header_replicas_not_one run_script_missing run_script_not_on_header cluster_missing cluster_unknown
image_missing image_whitespace image_mutable_tag node_selector_empty node_selector_multivalue node_selector_no_match
node_selector_cross_cluster header_match_not_one replicas_mismatch replicas_zero gpu_exceeds_node
shared_node_overcommit mount_path_missing host_path_missing storage_class_missing storage_class_wrong_cluster
mount_shadows_path env_name_invalid env_reserved secret_in_spec domain_unknown ssh_key_unknown""".split()


def test_every_issue_code_has_a_case():
    assert set(ISSUE_CODES) <= set(CASES)
    from jobs.jobspec.messages import MESSAGES

    assert set(CASES) <= set(MESSAGES)


def test_pvc_options_checked_and_rwo_warning():
    doc = base_doc()
    storage_mount(1, "/data", "oss-a")(doc, None)
    wl = doc["spec"]["tasks"][1]["kubernetes"]["workload"]
    claim = next(iter(wl["pvcStorageMap"]))
    result = run(doc)
    assert result.valid and {p.code for p in result.warnings} == {"pvc_shared_rwo"}
    wl["pvcOptions"] = {claim: {"size": "20Gi", "accessMode": "ReadWriteMany"}}
    assert run(doc).problems == []
    wl["pvcOptions"] = {claim: {"size": "lots", "accessMode": "Sometimes", "reclaimPolicy": "Keep"}}
    assert {"quantity_invalid", "pvc_options_invalid"} <= set(run(doc).codes())
    n = normalize(doc)
    new_claim = next(iter(n["spec"]["tasks"][1]["kubernetes"]["workload"]["pvcStorageMap"]))
    assert new_claim == "pvc-ppo-job-rollout-data"
    assert list(n["spec"]["tasks"][1]["kubernetes"]["workload"]["pvcOptions"]) == [new_claim]


def test_offline_or_cordoned_nodes():
    inv = inventory()
    next(n for n in inv.nodes if n.name == "gpu-2").online = False
    result = run(base_doc(), inv)
    assert result.valid and {p.code for p in result.warnings} == {"node_unschedulable"}
    next(n for n in inv.nodes if n.name == "gpu-0").unschedulable = True
    assert "node_selector_no_match" in run(base_doc(), inv).codes()


def test_absurd_quantities_are_invalid_not_expanded():
    """A GPU count of ``1e308`` (or a 20-digit memory) is beyond what Kubernetes stores (2^63-1): a clear
    quantity_invalid, never a 309-digit number in the messages (found by a new user in the wizard)."""
    from clusters.quantity import parse_quantity

    for bad in ("1e308", 1e308, float("inf"), "99999999999999999999E", "9" * 80):
        with pytest.raises(ValueError):
            parse_quantity(bad)
    assert parse_quantity("8") == 8 and parse_quantity("512Gi") == 512 * 2**30
    doc = base_doc()
    container(doc, 1)["resources"]["requests"]["nvidia.com/gpu"] = "1e308"
    result = run(doc)
    assert "quantity_invalid" in result.codes()
    assert not [p for p in result.problems if "0" * 30 in str(p)]


def test_an_exported_shell_function_is_not_a_valid_env_name():
    """``BASH_FUNC_<name>%%`` is how bash imports a function from the environment: it can only serve an attack on
    a shell, so its name is refused with the same localized message as any invalid name (Kubernetes refuses it too)."""
    doc, inv = base_doc(), inventory()
    env(1, "BASH_FUNC_mount%%", "() { id; }")(doc, inv)
    result = run(doc, inv)
    assert "env_name_invalid" in codes(result)
    problem = next(p for p in result.problems if p.code == "env_name_invalid")
    assert "BASH_FUNC_mount%%" in problem.message("en") and "BASH_FUNC_mount%%" in problem.message("zh-hans")
