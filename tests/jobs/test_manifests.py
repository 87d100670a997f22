"""Golden tests of ``jobs.jobspec.manifests``: a real 3-role Job YAML -> StatefulSets, Service, ConfigMaps, PVCs,
registry Secret, exactly as specified (upstream-rlark 4 without its flaws).

Regenerate the golden file after an intended change with ``RLARK_UPDATE_GOLDEN=1 .venv/bin/pytest
tests/jobs/test_manifests.py`` and review the diff.
"""

from __future__ import annotations

import base64
import json
import os
from pathlib import Path
from types import SimpleNamespace

import pytest
import yaml

from jobs.jobspec.manifests import SCRIPTS_DIR, build_task_manifests, node_affinity, redacted, registry_for_image

GOLDEN = Path(__file__).parents[1] / "fake_k8s" / "golden"
JOB = yaml.safe_load((GOLDEN / "job_3role.yaml").read_text())
CLUSTERS = {"gpu-a": SimpleNamespace(name="gpu-a", namespace="rlark-gpu")}
REGISTRY = SimpleNamespace(
    name="corp", registry="registry.example.com", username="robot", password="s3cr3t-Registry-Pass", public=False
)
KEYS = ["ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIA alice@laptop", "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIB alice@ci"]


def build(**kw):
    return build_task_manifests(
        "robot-policy-training",
        JOB,
        clusters=CLUSTERS,
        registries=kw.pop("registries", [REGISTRY]),
        ssh_keys=kw.pop("ssh_keys", KEYS),
        **kw,
    )


def as_plain(manifests) -> list[dict]:
    """Everything of each TaskManifest, with ConfigMap script bodies replaced by their file names."""
    out = []
    for m in manifests:
        extra = []
        for obj in m.extra_objects:
            obj = json.loads(json.dumps(obj))
            if obj["kind"] == "ConfigMap":
                obj["data"] = {k: f"<clusters/scripts/{k}>" for k in obj["data"]}
            extra.append(obj)
        out.append(
            {
                "job": m.job,
                "task": m.task,
                "namespace": m.namespace,
                "ray_role": m.ray_role,
                "replicas": m.replicas,
                "rank_start": m.rank_start,
                "total_nodes": m.total_nodes,
                "head_task": m.head_task,
                "workload": m.workload,
                "extra_objects": extra,
            }
        )
    return out


def test_golden_three_role_job():
    got = as_plain(build())
    path = GOLDEN / "job_3role.manifests.yaml"
    if os.environ.get("RLARK_UPDATE_GOLDEN") or not path.exists():
        path.write_text(yaml.safe_dump(got, sort_keys=False, allow_unicode=True, width=120))
    assert got == yaml.safe_load(path.read_text())


def by_kind(m, kind):
    return [o for o in m.extra_objects if o["kind"] == kind]


def main_of(m):
    return next(c for c in m.workload["spec"]["template"]["spec"]["containers"] if c["name"] == "main")


def test_statefulsets_names_labels_annotations_ranks():
    actor, rollout, env = build()
    assert [m.task for m in (actor, rollout, env)] == [
        "robot-policy-training-actor",
        "robot-policy-training-rollout-20-worker",
        "robot-policy-training-env-20-worker",
    ]
    assert [(m.rank_start, m.replicas, m.total_nodes) for m in (actor, rollout, env)] == [
        (0, 1, 5),
        (1, 2, 5),
        (3, 2, 5),
    ]
    for m in (actor, rollout, env):
        sts = m.workload
        assert sts["kind"] == "StatefulSet" and sts["apiVersion"] == "apps/v1"
        assert sts["metadata"]["name"] == m.task and sts["metadata"]["namespace"] == "rlark-gpu"
        assert sts["spec"]["podManagementPolicy"] == "Parallel"
        assert sts["spec"]["serviceName"] == "robot-policy-training-actor-ray-head"
        labels = sts["spec"]["template"]["metadata"]["labels"]
        assert labels["rlinf.io/job"] == "robot-policy-training"
        assert labels["rlinf.io/task"] == m.task and labels["app"] == m.task
        ann = sts["metadata"]["annotations"]
        assert ann["rlark.io/ray-role"] == m.ray_role
        assert ann["rlark.io/ray-total-nodes"] == "5"
        assert ann["rlark.io/ray-node-rank-start"] == str(m.rank_start)
        assert ann["rlark.io/ray-head-task-name"] == "robot-policy-training-actor"
        spec = sts["spec"]["template"]["spec"]
        assert "hostNetwork" not in spec  # opt-in only (upstream forces it on workers)
        for c in spec["containers"]:
            assert c["securityContext"]["privileged"] is False
            assert c["securityContext"]["allowPrivilegeEscalation"] is False
    # user labels are kept next to ours (upstream dropped app=<task> then)
    assert actor.workload["spec"]["template"]["metadata"]["labels"]["team"] == "robotics"


def test_head_service_headless_never_exposed():
    actor, rollout, env = build()
    (svc,) = by_kind(actor, "Service")
    assert not by_kind(rollout, "Service") and not by_kind(env, "Service")
    assert svc["metadata"]["name"] == "robot-policy-training-actor-ray-head"
    assert svc["spec"]["clusterIP"] == "None" and svc["spec"]["type"] == "ClusterIP"
    assert {(p["name"], p["port"]) for p in svc["spec"]["ports"]} == {
        ("gcs", 6379),
        ("dashboard", 8265),
        ("client", 10001),
    }
    pod_labels = actor.workload["spec"]["template"]["metadata"]["labels"]
    assert all(pod_labels[k] == v for k, v in svc["spec"]["selector"].items())


def test_configmap_scripts_and_command():
    actor, rollout, _ = build()
    (cm,) = by_kind(actor, "ConfigMap")
    for name in ("ray_head.sh", "ray_worker.sh", "ray_check.py"):
        assert cm["data"][name] == (SCRIPTS_DIR / name).read_text()
    assert main_of(actor)["command"] == ["bash", "/rlark/scripts/ray_head.sh"]
    assert main_of(rollout)["command"] == ["bash", "/rlark/scripts/ray_worker.sh"]
    spec = actor.workload["spec"]["template"]["spec"]
    vol = next(v for v in spec["volumes"] if v["name"] == "rlark-scripts")
    assert vol["configMap"]["name"] == cm["metadata"]["name"]
    assert {"name": "rlark-scripts", "mountPath": "/rlark/scripts", "readOnly": True} in main_of(actor)["volumeMounts"]


def test_env_order_exactly_as_upstream():
    actor, rollout, env = build()
    names = [e["name"] for e in main_of(actor)["env"]]
    assert names == [
        "HYDRA_FULL_ERROR",
        "RLARK_TASK_ROLE",
        "RLARK_RAY_PORT",
        "RLARK_PREPARE_SCRIPT",
        "RLARK_RUN_SCRIPT",
        "RLARK_SSH_PUBLIC_KEYS",
        "RLARK_NODE_RANK_START",
        "POD_NAME",
        "RLARK_TOTAL_NODES",
        "RLARK_NODE_IP",
        "RLARK_RUN_ID",  # RLark goes further: the per-run output prefix, after upstream's env
    ]
    envmap = {e["name"]: e for e in main_of(actor)["env"]}
    assert envmap["RLARK_SSH_PUBLIC_KEYS"]["value"] == "\n".join(KEYS)
    assert envmap["POD_NAME"]["valueFrom"]["fieldRef"]["fieldPath"] == "metadata.name"
    assert envmap["RLARK_NODE_IP"]["valueFrom"]["fieldRef"]["fieldPath"] == "status.podIP"
    assert envmap["RLARK_TOTAL_NODES"]["value"] == "5"
    w = {e["name"]: e.get("value") for e in main_of(rollout)["env"]}
    assert list(w)[-3:] == ["RLARK_NODE_RANK_START", "POD_NAME", "RLARK_HEAD_ADDRESS"]
    assert w["RLARK_HEAD_ADDRESS"] == "robot-policy-training-actor-ray-head"
    assert "RLARK_RUN_SCRIPT" not in w and "RLARK_PREPARE_SCRIPT" not in w
    e = {x["name"]: x.get("value") for x in main_of(env)["env"]}
    assert e["RLARK_PREPARE_SCRIPT"] == "export MUJOCO_GL=egl" and e["RLARK_NODE_RANK_START"] == "3"


def test_domain_changes_head_address():
    doc = json.loads(json.dumps(JOB))
    doc["spec"]["domain"] = "lab"
    actor, rollout, _ = build_task_manifests(
        "robot-policy-training", doc, clusters=CLUSTERS, registries=[], ssh_keys=[]
    )
    assert {e["name"]: e.get("value") for e in main_of(rollout)["env"]}["RLARK_HEAD_ADDRESS"] == (
        "robot-policy-training-actor-0.rlark-domain"
    )
    assert {e["name"]: e.get("value") for e in main_of(actor)["env"]}["RLARK_DOMAIN"] == "lab"
    assert "RLARK_SSH_PUBLIC_KEYS" not in {e["name"] for e in main_of(actor)["env"]}


def test_resources_gpu_device_requests_equal_limits_cpu_memory_kept():
    actor, rollout, env = build()
    assert main_of(actor)["resources"] == {
        "requests": {"cpu": "32", "memory": "256Gi", "nvidia.com/gpu": "8"},
        "limits": {"cpu": "32", "memory": "256Gi", "nvidia.com/gpu": "8"},
    }
    # device given only as a request -> also a limit; GPU both sides
    assert main_of(rollout)["resources"] == {
        "requests": {"nvidia.com/gpu": "1", "rlinf.io/device-franka": "1"},
        "limits": {"nvidia.com/gpu": "1", "rlinf.io/device-franka": "1"},
    }
    # CPU/memory request without a limit stays burstable
    assert main_of(env)["resources"] == {"requests": {"cpu": "4", "memory": "16Gi"}}


def test_shm_hostpath_and_pvcs():
    actor, _, env = build()
    vols = {v["name"]: v for v in actor.workload["spec"]["template"]["spec"]["volumes"]}
    assert vols["dshm"] == {"name": "dshm", "emptyDir": {"medium": "Memory", "sizeLimit": "64Gi"}}
    (pvc,) = by_kind(actor, "PersistentVolumeClaim")
    assert pvc["metadata"]["name"] == "pvc-robot-policy-training-actor-mnt-checkpoints"
    assert pvc["spec"] == {
        "accessModes": ["ReadWriteMany"],
        "resources": {"requests": {"storage": "50Gi"}},
        "storageClassName": "oss-ckpt",
    }
    assert pvc["metadata"]["annotations"]["rlark.io/pvc-reclaim"] == "Retain"  # explicit pvcOptions reclaimPolicy
    (pvc2,) = by_kind(env, "PersistentVolumeClaim")
    assert pvc2["metadata"]["annotations"]["rlark.io/pvc-reclaim"] == "Delete"  # default: goes with its Task (4.9)
    assert pvc2["spec"]["accessModes"] == ["ReadWriteOnce"] and pvc2["spec"]["resources"]["requests"] == {
        "storage": "10Gi"
    }
    evols = {v["name"]: v for v in env.workload["spec"]["template"]["spec"]["volumes"]}
    assert evols["datasets"]["hostPath"] == {"path": "/data/datasets"}
    # explicit policy + mapping of a console storage class to a Kubernetes StorageClass
    (_, _, env2) = build(pvc_policy="Retain", storage_classes={"oss-data": "rclone-oss-data"})
    (pvc3,) = by_kind(env2, "PersistentVolumeClaim")
    assert pvc3["metadata"]["annotations"]["rlark.io/pvc-reclaim"] == "Retain"
    assert pvc3["spec"]["storageClassName"] == "rclone-oss-data"


def test_node_selector_one_term_anded():
    _, rollout, _ = build()
    aff = rollout.workload["spec"]["template"]["spec"]["affinity"]
    terms = aff["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
    assert terms == [
        {
            "matchExpressions": [
                {"key": "rlark.io/node-category", "operator": "In", "values": ["edge"]},
                {"key": "kubernetes.io/hostname", "operator": "In", "values": ["edge-1", "edge-2"]},
            ]
        }
    ]
    assert "nodeSelector" not in rollout.workload["spec"]["template"]["spec"]
    anti = aff["podAntiAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"][0]
    assert anti["topologyKey"] == "kubernetes.io/hostname"
    assert node_affinity({}) is None


def test_registry_secrets_only_in_extra_objects():
    actor, rollout, env = build()
    (secret,) = by_kind(actor, "Secret")
    assert secret["type"] == "kubernetes.io/dockerconfigjson"
    conf = json.loads(base64.b64decode(secret["data"][".dockerconfigjson"]))
    assert conf["auths"]["registry.example.com"]["password"] == "s3cr3t-Registry-Pass"
    assert actor.workload["spec"]["template"]["spec"]["imagePullSecrets"] == [{"name": "rlark-registry-corp"}]
    # the docker.io image matches no registry: no pull secret
    assert "imagePullSecrets" not in env.workload["spec"]["template"]["spec"]
    assert not by_kind(env, "Secret")
    # the password is nowhere but in the Secret's data
    assert "s3cr3t" not in json.dumps(actor.workload)
    assert "s3cr3t" not in json.dumps(redacted(secret))
    assert registry_for_image("registry.example.com.evil.io/x:1", [REGISTRY]) is None
    public = SimpleNamespace(name="pub", registry="registry.example.com", username="", password="", public=True)
    (a2, _, _) = build(registries=[public])
    assert not by_kind(a2, "Secret")


def test_stopped_job_has_zero_replicas():
    doc = json.loads(json.dumps(JOB))
    doc["spec"]["stopped"] = True
    ms = build_task_manifests("robot-policy-training", doc, clusters=CLUSTERS, registries=[], ssh_keys=[])
    assert [m.workload["spec"]["replicas"] for m in ms] == [0, 0, 0]
    assert [m.rank_start for m in ms] == [0, 1, 3]  # ranks still from the declared replicas


def test_unknown_cluster_is_an_error():
    from jobs.jobspec.manifests import ManifestError

    with pytest.raises(ManifestError, match="unknown cluster"):
        build_task_manifests("x", JOB, clusters={}, registries=[], ssh_keys=[])
