"""A Kubernetes job end to end in-process: register a Kubernetes cluster (the fake API server over real
HTTP), see its nodes, submit a 3-role job through the jobs API, see the StatefulSets/Service/ConfigMaps/PVC/Secret
exactly as built by the manifests, Pods progressing in the Workers tab, logs (incl. previous), an exec stream,
stop (replicas 0), start, delete (nothing left) - through the real controller and status sync."""

from __future__ import annotations

import base64
import json
import time

import pytest
import yaml
from rest_framework.test import APIClient

from clusters.models import Cluster, ImageRegistry
from clusters.ray_auth import job_token
from clusters.runtime import registry
from jobs.jobspec.manifests import build_task_manifests
from jobs.models import Job, Pod
from jobs.observe.sync import sync_all_clusters
from storage.models import StorageClass
from tests.fake_k8s.fixtures import MARKER_TOKEN, fake_k8s  # noqa: F401

pytestmark = pytest.mark.django_db
NS = "rlark-system"
IMAGE = "registry.example.com/rlinf/rlinf:0.2.1"


def template(name, head, replicas, pool, role, resources=None, mounts=()):
    container = {
        "name": "main",
        "image": IMAGE,
        "env": [{"name": "RLARK_TASK_ROLE", "value": name.title()}],
    }
    if resources:
        container["resources"] = {"requests": dict(resources), "limits": dict(resources)}
    volumes = []
    pvc_map = {}
    for path, sc in mounts:
        vol = path.strip("/").replace("/", "-")
        claim = f"pvc-flow-{name}-{vol}"
        container.setdefault("volumeMounts", []).append({"name": vol, "mountPath": path})
        volumes.append({"name": vol, "persistentVolumeClaim": {"claimName": claim}})
        pvc_map[claim] = sc
    spec = {"containers": [container]}
    if volumes:
        spec["volumes"] = volumes
    workload = {"kind": "StatefulSet", "replicas": replicas, "template": {"spec": spec}}
    if pvc_map:
        workload["pvcStorageMap"] = pvc_map
    task = {
        "name": name,
        "head": head,
        "agentType": "Kubernetes",
        "role": role,
        "cluster": "gpu-a",
        "nodeSelector": {"pool": pool},
        "kubernetes": {"workload": workload},
    }
    if head:
        task["runScript"] = "python train.py"
    return task


DOCUMENT = {
    "apiVersion": "rlinf.io/v1alpha1",
    "kind": "Job",
    "metadata": {"name": "flow"},
    "spec": {
        "tasks": [
            template("actor", True, 1, "head", "Actor", {"nvidia.com/gpu": "8"}, [("/mnt/ckpt", "oss-ckpt")]),
            template("rollout", False, 2, "rollout", "Rollout", {"nvidia.com/gpu": "1"}),
            template("env", False, 2, "env", "Env"),
        ]
    },
}


@pytest.fixture
def setup(fake_k8s, admin_user, settings, tmp_path):  # noqa: F811
    settings.CELERY_TASK_ALWAYS_EAGER = True
    settings.VAR_DIR = tmp_path
    settings.RLARK_K8S_CONNECT_TIMEOUT = 1
    settings.RLARK_K8S_READ_TIMEOUT = 3
    fake_k8s.add_node("head-0", {"pool": "head"}, {"nvidia.com/gpu": 8, "cpu": 64, "memory": "512Gi"})
    for i in range(2):
        fake_k8s.add_node(f"roll-{i}", {"pool": "rollout"}, {"nvidia.com/gpu": 8, "cpu": 64, "memory": "512Gi"})
        fake_k8s.add_node(f"env-{i}", {"pool": "env"}, {"cpu": 16, "memory": "64Gi"})
    admin = APIClient()
    admin.force_authenticate(admin_user)
    resp = admin.post(
        "/api/v1/clusters/",
        {"name": "gpu-a", "runtime": "kubernetes", "kubeconfig": yaml.safe_dump(fake_k8s.kubeconfig())},
        format="json",
    )
    assert resp.status_code == 201, resp.content
    cluster = Cluster.objects.get(name="gpu-a")
    StorageClass.objects.create(
        cluster=cluster, name="oss-ckpt", provider="kubernetes", parameters={"storage_class_name": "rclone-ckpt"}
    )
    ImageRegistry.objects.create(name="corp", registry="registry.example.com", username="bot", password="pw-xyz")
    return cluster


def names(fake, plural):
    return sorted(o["metadata"]["name"] for o in fake.list(plural, NS))


def test_three_role_job_on_kubernetes(setup, fake_k8s, alice, client):  # noqa: F811
    cluster = setup
    assert sorted(cluster.nodes.values_list("name", flat=True)) == ["env-0", "env-1", "head-0", "roll-0", "roll-1"]
    api = APIClient()
    api.force_authenticate(alice)
    resp = api.post("/api/v1/jobs/", DOCUMENT, format="json")
    assert resp.status_code == 201, resp.content
    job = Job.objects.get(name="flow")

    # exactly the objects the manifests describe, applied by server-side apply
    assert names(fake_k8s, "statefulsets") == ["flow-actor", "flow-env", "flow-rollout"]
    assert names(fake_k8s, "services") == ["flow-actor-ray-head"]
    assert names(fake_k8s, "configmaps") == [
        "flow-actor-rlark-scripts",
        "flow-env-rlark-scripts",
        "flow-rollout-rlark-scripts",
    ]
    assert names(fake_k8s, "persistentvolumeclaims") == ["pvc-flow-actor-mnt-ckpt"]
    token = job_token(job.pk, job.created_at.isoformat())
    assert names(fake_k8s, "secrets") == [
        "flow-actor-ray-auth",
        "flow-env-ray-auth",
        "flow-rollout-ray-auth",
        "rlark-registry-corp",
    ]
    for task in ("flow-actor", "flow-env", "flow-rollout"):  # the job's Ray token, one Secret per Task
        assert base64.b64decode(fake_k8s.get("secrets", NS, f"{task}-ray-auth")["data"]["token"]).decode() == token
    expected = build_task_manifests(
        "flow",
        job.spec,
        clusters={"gpu-a": cluster},
        ssh_keys=[],
        storage_classes={"oss-ckpt": "rclone-ckpt"},
        ray_auth_token=token,
    )
    for m in expected:
        assert fake_k8s.get("statefulsets", NS, m.task)["spec"] == m.workload["spec"]
    assert fake_k8s.get("persistentvolumeclaims", NS, "pvc-flow-actor-mnt-ckpt")["spec"]["storageClassName"] == (
        "rclone-ckpt"
    )

    # Pods progress: Pending -> Running, visible in the Workers tab after a sync
    sync_all_clusters(force=True)
    assert set(Pod.objects.filter(task__job=job).values_list("phase", flat=True)) == {"Pending"}
    nodes = {
        "flow-actor-0": "head-0",
        "flow-rollout-0": "roll-0",
        "flow-rollout-1": "roll-1",
        "flow-env-0": "env-0",
        "flow-env-1": "env-1",
    }
    for i, (pod, node) in enumerate(nodes.items()):
        fake_k8s.set_pod(NS, pod, "Running", node=node, ip=f"10.244.1.{i + 1}")
    fake_k8s.set_log(NS, "flow-actor-0", "Ray cluster is ready\nGlobal Step: 1/10\n", previous="old run\n")
    sync_all_clusters(force=True)
    pods = {p.name: p for p in Pod.objects.filter(task__job=job)}
    assert {n: (p.phase, p.node) for n, p in pods.items()} == {n: ("Running", node) for n, node in nodes.items()}
    job.refresh_from_db()
    assert job.phase == "Running"
    assert token not in json.dumps(job.spec) and token not in api.get("/api/v1/jobs/flow/").content.decode()
    client.force_login(alice)
    html = client.get("/jobs/flow/", {"tab": "workers"}).content.decode()
    assert token not in html and token not in client.get("/jobs/flow/", {"tab": "yaml"}).content.decode()
    for pod in nodes:
        assert pod in html
    assert "10.244.1.1" in html

    # logs, previous instance, exec
    html = client.get("/jobs/flow/log/", {"pod": "flow-actor-0"}).content.decode()
    assert "Ray cluster is ready" in html
    html = client.get("/jobs/flow/log/", {"pod": "flow-actor-0", "previous": "1"}).content.decode()
    assert "old run" in html
    html = client.get("/jobs/flow/log/", {"pod": "flow-env-0", "previous": "1"}).content.decode()
    assert "flow-env-0 没有上一个容器实例。" in html  # the zh page says it in zh (the runtime's words were English)
    stream = registry.runtime_for(cluster).exec(NS, "flow-rollout-1")
    stream.write(b"echo $RLARK_NODE_RANK_START $RLARK_HEAD_ADDRESS\n")
    out, deadline = b"", time.monotonic() + 5
    while b"flow-actor-ray-head" not in out and time.monotonic() < deadline:
        out += stream.read(0.2) or b""
    assert b"1 flow-actor-ray-head" in out
    stream.close()

    # stop = replicas 0 everywhere, PVC kept; start brings the Workers back
    assert api.post("/api/v1/jobs/flow/stop/").status_code == 200
    assert [s["spec"]["replicas"] for s in fake_k8s.list("statefulsets", NS)] == [0, 0, 0]
    assert names(fake_k8s, "pods") == [] and names(fake_k8s, "persistentvolumeclaims") == ["pvc-flow-actor-mnt-ckpt"]
    assert api.post("/api/v1/jobs/flow/start/").status_code == 200
    assert sorted(names(fake_k8s, "pods")) == sorted(nodes)

    # delete: nothing of the job is left in the cluster
    assert api.delete("/api/v1/jobs/flow/").status_code in (200, 204)
    for plural in ("statefulsets", "pods", "services", "configmaps", "persistentvolumeclaims", "secrets"):
        assert names(fake_k8s, plural) == [], plural
    assert not Job.objects.filter(name="flow").exists()
    assert all(MARKER_TOKEN not in p for _, p in fake_k8s.requests)
