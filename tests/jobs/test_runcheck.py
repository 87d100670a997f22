"""Run check (seed 02): five checks with evidence on a demo-like job, a Worker that never joins, Markdown record."""

from __future__ import annotations

import re
from datetime import timedelta

import pytest
from django.utils import timezone

from clusters.models import Cluster
from clusters.services.inventory import upsert_local_nodes
from jobs.explain import runcheck
from jobs.explain.runcheck import MET, NOT_MET, TO_CONFIRM, clean_settings, gather, markdown_record, run_checks
from jobs.models import Job, Pod, Task

pytestmark = pytest.mark.django_db

SECRET = "hf_SuperSecretToken123"


def template(name, image, selector, replicas, head=False, mounts=None):
    container = {
        "name": "main",
        "image": image,
        "env": [{"name": "HF_TOKEN", "value": SECRET}, {"name": "RLARK_TASK_ROLE", "value": name.title()}],
        "resources": {"requests": {"nvidia.com/gpu": "1"}, "limits": {"nvidia.com/gpu": "1"}},
        "volumeMounts": [{"name": "data", "mountPath": "/data"}] if mounts else [],
    }
    t = {
        "name": name,
        "head": head,
        "agentType": "Kubernetes",
        "role": "Actor",
        "nodeSelector": selector,
        "kubernetes": {
            "workload": {
                "kind": "StatefulSet",
                "replicas": replicas,
                "template": {
                    "spec": {
                        "containers": [container],
                        "volumes": [{"name": "data", "hostPath": {"path": str(mounts)}}] if mounts else [],
                    }
                },
            }
        },
    }
    if head:
        t["runScript"] = "python train.py"
    return t


HEAD_LOG = """RLINF_NODE_RANK: 0
Executing prepare script...
Waiting for 3 nodes to join the Ray cluster...
Waiting for cluster to have at least 3 nodes.
Current node count: 3
Cluster is ready: 3 nodes available (required: 3).
Ray cluster check passed.
Ray cluster is ready. Printing cluster information:
==========================================
==========================================
Executing run script...
[INFO 10:00:01 RLinf] RLinf is running on a cluster with 3 nodes and 24 accelerators. token=abc123456
│ Global Step:    1/100 │ Progress: …│   1.0%
"""


def worker_log(rank):
    return (
        f"RLINF_NODE_RANK: {rank}\nExecuting prepare script...\n"
        "Connecting to Ray head at demo-header-ray-head:6379...\n"
        "HEAD IP: 10.0.0.1\nHead is reachable at 10.0.0.1:6379\n"
    )


@pytest.fixture
def demo(admin_user, tmp_path):
    cluster = Cluster.objects.create(name="local", runtime="local", status="online")
    upsert_local_nodes(
        cluster,
        [
            {"name": "local-gpu-0", "labels": {"pool": "head"}, "capacity": {"nvidia.com/gpu": 8}},
            {"name": "local-gpu-1", "labels": {"pool": "rollout"}, "capacity": {"nvidia.com/gpu": 8}},
        ],
    )
    data = tmp_path / "data"
    (data / "ckpt" / "global_step_1").mkdir(parents=True)
    (data / "ckpt" / "global_step_1" / "actor.pt").write_bytes(b"weights" * 100)
    doc = {
        "apiVersion": "rlinf.io/v1alpha1",
        "kind": "Job",
        "metadata": {"name": "demo"},
        "spec": {
            "tasks": [
                template("header", "rlinf/rlinf:v1", {"pool": "head"}, 1, head=True, mounts=data),
                template("rollout", "rlinf/rlinf@sha256:" + "a" * 64, {"pool": "rollout"}, 2, mounts=data),
            ]
        },
    }
    now = timezone.now()
    job = Job.objects.create(
        name="demo",
        owner=admin_user,
        spec=doc,
        phase="Running",
        started_at=now - timedelta(minutes=5),
        rlinf_config="cluster:\n  num_nodes: 3\n",
        run_check={"output_path": "/data/ckpt"},
    )
    header = Task.objects.create(
        job=job,
        template_name="header",
        name="demo-header",
        cluster=cluster,
        namespace="rlark-system",
        display_role="Header",
        head=True,
        order=0,
        replicas=1,
        rank_start=0,
    )
    rollout = Task.objects.create(
        job=job,
        template_name="rollout",
        name="demo-rollout",
        cluster=cluster,
        namespace="rlark-system",
        display_role="Rollout",
        order=1,
        replicas=2,
        rank_start=1,
    )
    running = {"state": "running", "ready": True}
    Pod.objects.create(
        task=header,
        name="demo-header-0",
        ordinal=0,
        node="local-gpu-0",
        ip="10.0.0.1",
        phase="Running",
        container_state=running,
    )
    for i in range(2):
        Pod.objects.create(
            task=rollout,
            name=f"demo-rollout-{i}",
            ordinal=i,
            node="local-gpu-1",
            ip=f"10.0.0.{i + 2}",
            phase="Running",
            container_state=running,
        )
    logs = {"demo-header-0": HEAD_LOG, "demo-rollout-0": worker_log(1), "demo-rollout-1": worker_log(2)}
    return job, logs


def test_demo_job_has_five_met_checks_with_evidence(demo):
    job, logs = demo
    results = run_checks(gather(job, logs=logs), "en")
    assert [r.status for r in results] == [MET] * 5, [(r.number, r.evidence) for r in results]
    by = {r.number: "\n".join(r.evidence) for r in results}
    assert "Header (demo-header): image rlinf/rlinf:v1" in by[1]
    assert "Rollout / demo-rollout-1: node local-gpu-1, IP 10.0.0.3, phase Running, restarts: 0." in by[2]
    assert "3 actual Pods in total; RLinf cluster.num_nodes = 3." in by[2]
    assert "Header node check: Cluster is ready: 3 nodes available (required: 3)." in by[3]
    assert "Worker demo-rollout-1: RLINF_NODE_RANK: 2 (expected 2), Head is reachable at 10.0.0.1:6379" in by[3]
    assert "RLinf is running on a cluster with 3 nodes" in by[4]
    assert "Global Step:    1/100" in by[5]
    assert "Output /data/ckpt: 1 files, readable; newest file /data/ckpt/global_step_1/actor.pt (700 bytes" in by[5]
    # No secrets in evidence.
    everything = "\n".join(e for r in results for e in r.evidence)
    assert SECRET not in everything and "abc123456" not in everything
    zh = run_checks(gather(job, logs=logs), "zh-hans")
    assert [r.label("zh-hans") for r in zh] == ["符合预期"] * 5


def test_worker_that_never_joins_fails_check_3_naming_it(demo):
    job, logs = demo
    logs = dict(logs)
    logs["demo-rollout-1"] = (
        "RLINF_NODE_RANK: 2\nConnecting to Ray head at demo-header-ray-head:6379...\n"
        + "Waiting for head to be reachable at demo-header-ray-head:6379... (attempt 1)\n" * 120
    )
    logs["demo-header-0"] = HEAD_LOG.replace(
        "Current node count: 3\nCluster is ready: 3 nodes available (required: 3).\nRay cluster check passed.\n",
        "Current node count: 2\nError: Cluster did not become ready within 15 minutes (required 3 nodes).\n"
        "Ray cluster check failed.\nWarning: Ray cluster check failed, proceeding anyway.\n",
    )
    results = run_checks(gather(job, logs=logs), "en")
    check3 = results[2]
    assert check3.status == NOT_MET
    text = "\n".join(check3.evidence)
    assert "Worker demo-rollout-1 (Rollout) has not connected to the Ray head" in text
    assert "Header log: Warning: Ray cluster check failed, proceeding anyway." in text
    assert "demo-rollout-0" in text  # the healthy Worker is listed as evidence too
    zh = run_checks(gather(job, logs=logs), "zh-hans")[2]
    assert zh.label("zh-hans") == "未符合" and any("demo-rollout-1" in e for e in zh.evidence)


def test_missing_evidence_is_to_confirm_then_not_met_after_max_wait(demo):
    job, logs = demo
    logs = {k: v.replace("│ Global Step:    1/100 │ Progress: …│   1.0%\n", "") for k, v in logs.items()}
    data = gather(job, logs=logs)
    assert run_checks(data, "en")[4].status == TO_CONFIRM
    data = gather(job, logs=logs, now=timezone.now() + timedelta(minutes=40))  # default max wait 30 min
    check5 = run_checks(data, "en")[4]
    assert check5.status == NOT_MET
    assert "No progress line matching Global Step in the logs yet." in check5.evidence


def test_pod_count_and_header_problems(demo):
    job, logs = demo
    Pod.objects.filter(name="demo-rollout-1").delete()
    job.run_check = {"output_path": "/data/nothing-here"}
    job.save()
    results = run_checks(gather(job, logs=logs), "en")
    assert results[1].status == TO_CONFIRM
    assert "Role Rollout: 1 actual Pods, 2 expected." in results[1].evidence
    assert results[4].status == TO_CONFIRM
    assert any("does not exist or cannot be read" in e for e in results[4].evidence)
    Pod.objects.filter(name="demo-rollout-0").update(node="local-gpu-0", restart_count=2)
    results = run_checks(gather(job, logs=logs), "en")
    assert results[1].status == NOT_MET
    text = "\n".join(results[1].evidence)
    assert "demo-rollout-0 runs on node local-gpu-0, which does not match selector pool=rollout." in text
    assert "demo-rollout-0 restarted 2 times; explain why." in text


def test_settings_validation():
    assert clean_settings({"progress_pattern": "step \\d+", "app_patterns": "a\n\nb", "max_wait_minutes": "5"}) == {
        "progress_pattern": "step \\d+",
        "app_patterns": ["a", "b"],
        "output_path": "",
        "max_wait_minutes": 5,
    }
    for bad, field in (
        ({"progress_pattern": "("}, "progress_pattern"),
        ({"output_path": "relative/x"}, "output_path"),
        ({"max_wait_minutes": 0}, "max_wait_minutes"),
        ({"app_patterns": ["[x"]}, "app_patterns"),
    ):
        with pytest.raises(runcheck.SettingsError) as exc:
            clean_settings(bad)
        assert exc.value.field == field


SEED_TEMPLATE_LINES = [
    "# 任务运行检查记录",
    "",
    "- 运行 ID：",
    "- 代码版本、镜像地址和版本；实际 digest（如已记录）：",
    "- Hydra 配置和命令来源：",
    "- RLinf `cluster.num_nodes` 和执行模式：",
    "- 目标集群、节点和资源信息：",
    "- Job 名称：",
    "- 提交 YAML 记录：",
    "- 记录人：",
    "",
    "| 检查项 | 结果（符合预期 / 未符合 / 待确认） | 检查时间 | 记录位置 | 备注/联系人 |",
    "| --- | --- | --- | --- | --- |",
    "| 1. Job 已创建且配置一致 |",
    "| 2. Pod 数量和所在节点正确 |",
    "| 3. Ray 已按预期启动 |",
    "| 4. 应用和配置版本一致 |",
    "| 5. 业务有进展且输出已持久化 |",
    "| 6. 结果已保存并明确后续处理 |",
]


def test_markdown_record_follows_seed_template(demo):
    job, logs = demo
    results = run_checks(gather(job, logs=logs), "zh-hans")
    md = markdown_record(job, results, recorder="root", lang="zh-hans")
    lines = md.splitlines()
    assert len(lines) == len(SEED_TEMPLATE_LINES)
    for got, want in zip(lines, SEED_TEMPLATE_LINES, strict=True):
        assert got.startswith(want), (got, want)
    rows = [line for line in lines if re.match(r"^\| \d\. ", line)]
    assert len(rows) == 6
    for row in rows[:5]:
        cells = [c.strip() for c in re.split(r"(?<!\\)\|", row)[1:-1]]
        # the record's times are in the pages' zone, labelled
        assert len(cells) == 5 and cells[1] == "符合预期" and cells[2].endswith(" " + timezone.localtime().tzname())
    assert rows[5].split("|")[2].strip() == "待确认"
    assert "- Job 名称：demo" in lines
    assert "- 记录人：root" in lines
    assert "sha256:" + "a" * 64 in md  # the digest the YAML records
    assert "- RLinf `cluster.num_nodes` 和执行模式：3；" in md
    assert SECRET not in md and "HF_TOKEN" not in md and "abc123456" not in md


def test_output_defaults_to_the_heads_tensorboard_dir(demo):
    """No output path set: the head's tensorBoardDir (where the job writes) is checked instead."""
    job, logs = demo
    job.run_check = {}
    job.spec["spec"]["tasks"][0]["tensorBoardDir"] = "/data/ckpt"
    results = run_checks(gather(job, logs=logs), "en")
    assert results[4].status == MET, results[4].evidence
    assert any("Output /data/ckpt:" in line for line in results[4].evidence)
    job.spec["spec"]["tasks"][0].pop("tensorBoardDir")
    results = run_checks(gather(job, logs=logs), "en")
    assert results[4].status != MET
