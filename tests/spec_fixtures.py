"""Shared plain-data fixtures for the job spec tests: a small inventory and a valid 2-role job."""

from __future__ import annotations

import copy

from jobs.jobspec.inventory import ClusterInfo, Inventory, NodeInfo, RegistryInfo, SSHKeyInfo, host_path_policy

GiB = 2**30
# the host directories the "local" cluster's administrator allowed (Cluster.host_path_roots)
HOST_PATH_ROOTS = "/srv\n/data\n/tmp\n/mnt"
SSH_KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOMqqnkVzrm0SdG6UOoqKLsabgH5C9okWi0dh2l9GKJl alice@laptop"


def node(cluster: str, name: str, gpus: int = 8, **labels: str) -> NodeInfo:
    return NodeInfo(
        cluster=cluster,
        name=name,
        labels={"kubernetes.io/hostname": name, **labels},
        capacity={"nvidia.com/gpu": gpus, "cpu": 16, "memory": 64 * GiB},
        allocatable={"nvidia.com/gpu": gpus, "cpu": 16, "memory": 64 * GiB},
        used={},
    )


def inventory() -> Inventory:
    return Inventory(
        clusters={
            "local": ClusterInfo("local", "local", "online", True, host_path_policy(HOST_PATH_ROOTS)),
            "other": ClusterInfo("other", "kubernetes", "online", False),
        },
        nodes=[
            node("local", "gpu-0", pool="head"),
            node("local", "gpu-1", pool="rollout"),
            node("local", "gpu-2", pool="rollout"),
            node("other", "o-0", pool="other"),
        ],
        storage_classes={("local", "oss-a"), ("other", "oss-b")},
        domains={"d1"},
        ssh_keys=[SSHKeyInfo(1, "laptop", SSH_KEY, "SHA256:x")],
        registries=[RegistryInfo("docker.io", public=True)],
    )


def template(name: str, selector: dict, replicas: int = 1, head: bool = False, gpu: str = "1", **extra) -> dict:
    t = {
        "name": name,
        "head": head,
        "agentType": "Kubernetes",
        "role": "Actor" if head else "Rollout",
        "cluster": "local",
        "nodeSelector": selector,
        "prepareScript": "source switch_env openvla",
        "kubernetes": {
            "workload": {
                "kind": "StatefulSet",
                "replicas": replicas,
                "template": {
                    "spec": {
                        "containers": [
                            {
                                "name": "main",
                                "image": "rlinf/rlinf:agentic-rlinf0.4-maniskill_libero",
                                "env": [{"name": "FOO", "value": "1"}, {"name": "RLARK_TASK_ROLE", "value": name}],
                                "resources": {
                                    "requests": {"nvidia.com/gpu": gpu, "cpu": "4", "memory": "16Gi"},
                                    "limits": {"nvidia.com/gpu": gpu, "cpu": "4", "memory": "16Gi"},
                                },
                            }
                        ]
                    }
                },
            }
        },
    }
    if head:
        t["runScript"] = "cd /workspace/RLinf && bash examples/embodiment/run_embodiment.sh maniskill"
    t.update(extra)
    return t


BASE = {
    "apiVersion": "rlinf.io/v1alpha1",
    "kind": "Job",
    "metadata": {"name": "ppo-job", "annotations": {"rlark.io/display-name": "PPO 训练"}},
    "spec": {
        "tasks": [
            template("actor", {"pool": "head"}, head=True, gpu="4"),
            template("rollout", {"pool": "rollout"}, replicas=2, gpu="2"),
        ],
        "stopped": False,
    },
}


def base_doc() -> dict:
    return copy.deepcopy(BASE)


def container(doc: dict, i: int) -> dict:
    return doc["spec"]["tasks"][i]["kubernetes"]["workload"]["template"]["spec"]["containers"][0]


def pod_spec(doc: dict, i: int) -> dict:
    return doc["spec"]["tasks"][i]["kubernetes"]["workload"]["template"]["spec"]


def seed_db(user=None) -> None:
    """The same inventory as ``inventory()`` in the database (clusters, nodes, storage, domain, user's key)."""
    from clusters.models import Cluster, Node
    from domains.models import Domain
    from sshkeys.models import SSHPublicKey
    from storage.models import StorageClass

    inv = inventory()
    clusters = {}
    for info in inv.clusters.values():
        clusters[info.name] = Cluster.objects.create(
            name=info.name,
            runtime=info.runtime,
            status=info.status,
            allow_host_path=info.allow_host_path,
            host_path_roots=HOST_PATH_ROOTS if info.allow_host_path else "",
        )
    for n in inv.nodes:
        Node.objects.create(
            cluster=clusters[n.cluster],
            name=n.name,
            labels=n.labels,
            capacity=n.capacity,
            allocatable=n.allocatable,
            used=n.used,
        )
    for cluster, name in inv.storage_classes:
        StorageClass.objects.create(cluster=clusters[cluster], name=name)
    Domain.objects.create(name="d1", cidr="10.77.0.0/16")
    from clusters.models import ImageRegistry

    for reg in inv.registries:
        ImageRegistry.objects.create(name=reg.registry.replace(".", "-"), registry=reg.registry, public=reg.public)
    if user is not None:
        SSHPublicKey.objects.create(owner=user, name="laptop", key=" ".join(SSH_KEY.split()[:2]), fingerprint="fp1")


def invalid_doc() -> dict:
    """A job with four different errors and one warning (used to compare entry points)."""
    doc = base_doc()
    doc["metadata"]["name"] = "bad-job"
    container(doc, 1)["image"] = "rlinf/rlinf: v1"
    doc["spec"]["tasks"][0]["kubernetes"]["workload"]["replicas"] = 2
    doc["spec"]["tasks"][1]["nodeSelector"] = {"pool": "nothing"}
    doc["spec"]["domain"] = "nowhere"
    container(doc, 0)["image"] = "rlinf/rlinf"
    return doc


INVALID_CODES = {"image_whitespace", "header_replicas_not_one", "node_selector_no_match", "domain_unknown"}
