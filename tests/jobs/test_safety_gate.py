"""The real-robot safety gate (seed 03-onboard-existing-rlinf-workload, § 接入真机任务前完成安全确认): which jobs
are robot jobs, the approval by a safety approver who is not the submitter, Start refused until then, an edit that
clears it, and the approval in the audit log and the Run check record."""

from __future__ import annotations

import copy
from pathlib import Path

import pytest
import yaml
from django.contrib.auth.models import Permission
from rest_framework.test import APIClient

from accounts.models import AuditEvent
from clusters.models import Node
from jobs.jobspec import robot
from jobs.jobspec.inventory import NodeInfo
from jobs.models import Job
from launcher.management.commands.seed_demo import DEMO_NODES
from tests.shared_spec import RLINF_CONFIGS
from tests.spec_fixtures import base_doc, container, inventory

pytestmark = pytest.mark.django_db

ITEMS = ["compatibility", "site", "stop", "limits", "data"]
PLAN = "E-stop on the pendant; operator Wang at the cell; power off the arm and reset before any retry."


def client_of(user) -> APIClient:
    c = APIClient()
    c.force_authenticate(user)
    return c


@pytest.fixture
def approver(django_user_model):
    user = django_user_model.objects.create_user("carol", "", "carol-pass-1")
    user.user_permissions.add(Permission.objects.get(codename="approve_robot_job"))
    return user


@pytest.fixture
def robot_job(api):
    """alice's job whose rollout selector matches only nodes of category ``robot`` (created through the API)."""
    Node.objects.filter(name__in=["gpu-1", "gpu-2"]).update(category="robot")
    r = api.post("/api/v1/jobs/", base_doc(), format="json")
    assert r.status_code == 201, r.json()
    return r.json()


def test_the_validator_says_which_jobs_are_robot_jobs_and_why():
    inv = inventory()
    assert robot.robot_reasons(base_doc(), inv.nodes) == []
    inv.nodes[2].category = "robot"  # pool=rollout matches gpu-1 (a GPU node) and gpu-2: it may run on either
    assert robot.robot_reasons(base_doc(), inv.nodes) == []
    inv.nodes[1].category = "edge"  # now the rollout selects robot/edge nodes only
    reasons = robot.robot_reasons(base_doc(), inv.nodes)
    assert [(r.kind, r.role, r.count) for r in reasons] == [("node", "rollout", 2)]  # one finding per role
    assert [r.detail for r in reasons] == ["local/gpu-1 (edge), local/gpu-2 (robot)"]
    message = reasons[0].problem().message("en")
    assert "matches robot nodes local/gpu-1 (edge), local/gpu-2 (robot)." in message, message
    assert "机器人节点 local/gpu-1 (edge), local/gpu-2 (robot)" in reasons[0].problem().message("zh-hans")
    assert reasons[0].problem().severity == "warning"
    inv.nodes[1].category = "gpu"
    inv.nodes[1].labels = {**inv.nodes[1].labels, "pool": "other"}  # the rollout now selects gpu-2 alone
    one = robot.robot_reasons(base_doc(), inv.nodes)[0].problem().message("en")
    assert "matches robot node local/gpu-2 (robot)." in one, one
    doc = base_doc()
    container(doc, 1)["resources"]["requests"]["rlinf.io/device-franka"] = "1"
    kinds = {r.kind: r.detail for r in robot.robot_reasons(doc, inventory().nodes)}
    assert kinds == {"device": "rlinf.io/device-franka"}
    hardware = robot.robot_reasons(
        base_doc(), [], (RLINF_CONFIGS / "emb_realworld_peginsertion_rlpd_cnn_async.yaml").read_text()
    )
    assert [(r.kind, r.detail) for r in hardware] == [("hardware", "Franka")]
    math = robot.robot_reasons(base_doc(), [], (RLINF_CONFIGS / "math_qwen2.5-1.5b-grpo-megatron.yaml").read_text())
    assert math == []


def test_the_demo_job_on_the_demo_nodes_is_no_robot_job():
    """The demo's rollout (pool=rollout) matches a GPU node and the demo robot node: it may run on either and
    requests no device, so the first job of the README starts without a safety approval."""
    nodes = [
        NodeInfo("local", n["name"], labels=n["labels"], category=n["labels"].get("rlark.io/node-category", ""))
        for n in DEMO_NODES
    ]
    assert any(n.category == "robot" for n in nodes)
    demo = yaml.safe_load(Path("examples/demo/job.yaml").read_text())
    assert robot.robot_reasons(demo, nodes) == []


def test_a_robot_job_is_stored_stopped_and_start_is_refused_until_approved(api, robot_job, approver):
    assert "robot_job" in {w["code"] for w in robot_job["warnings"]}
    assert "safety" in robot_job["safety_hold"] or "安全" in robot_job["safety_hold"]
    job = Job.objects.get(name="ppo-job")
    assert job.stopped is True
    refused = api.post("/api/v1/jobs/ppo-job/start/", HTTP_ACCEPT_LANGUAGE="en")
    assert refused.status_code == 409 and refused.json()["code"] == "safety_approval_missing"
    detail = refused.json()["detail"]
    assert "has no safety approval" in detail and "rlark approve ppo-job" in detail and "local/gpu-1" in detail
    zh = api.post("/api/v1/jobs/ppo-job/start/", HTTP_ACCEPT_LANGUAGE="zh-hans").json()["detail"]
    assert "安全审批" in zh
    assert Job.objects.get(name="ppo-job").stopped is True
    assert not AuditEvent.objects.filter(action="job.start").exists()
    # Stop is never gated.
    assert api.post("/api/v1/jobs/ppo-job/stop/").status_code == 200
    ok = client_of(approver).post("/api/v1/jobs/ppo-job/approve/", {"items": ITEMS, "stopPlan": PLAN}, format="json")
    assert ok.status_code == 200, ok.json()
    assert ok.json()["open"] is True and ok.json()["approval"]["approver"] == "carol"
    started = api.post("/api/v1/jobs/ppo-job/start/")
    assert started.status_code == 200, started.json()
    assert Job.objects.get(name="ppo-job").stopped is False
    event = AuditEvent.objects.get(action="job.safety_approve", object_id="ppo-job")
    assert event.actor == approver and event.detail["stopPlan"] == PLAN and event.detail["items"] == ITEMS


def test_the_submitter_cannot_approve_and_every_item_and_a_stop_plan_are_needed(alice, robot_job, approver):
    alice.user_permissions.add(Permission.objects.get(codename="approve_robot_job"))
    own = client_of(alice).post("/api/v1/jobs/ppo-job/approve/", {"items": ITEMS, "stopPlan": PLAN}, format="json")
    assert own.status_code == 403 and own.json()["code"] == "own_job"
    carol = client_of(approver)
    partial = carol.post(
        "/api/v1/jobs/ppo-job/approve/", {"items": ITEMS[:3], "stopPlan": " "}, format="json", HTTP_ACCEPT_LANGUAGE="en"
    )
    assert partial.status_code == 400 and partial.json()["code"] == "invalid"
    text = " ".join(e["message"] for e in partial.json()["errors"])
    assert "Speed, force, travel and workspace limits" in text and "data and control commands" in text
    assert "stop plan" in text
    too_long = carol.post("/api/v1/jobs/ppo-job/approve/", {"items": ITEMS, "stopPlan": "x" * 4001}, format="json")
    assert too_long.status_code == 400
    assert not AuditEvent.objects.filter(action="job.safety_approve").exists()
    gate = carol.get("/api/v1/jobs/ppo-job/approve/").json()
    assert gate["robot"] is True and gate["open"] is False and gate["approval"] is None and gate["canApprove"]


def test_a_user_without_the_permission_cannot_approve(bob, robot_job):
    r = client_of(bob).post("/api/v1/jobs/ppo-job/approve/", {"items": ITEMS, "stopPlan": PLAN}, format="json")
    assert r.status_code == 404  # bob may not even see alice's job
    bob.is_staff = True
    bob.save()
    r = client_of(bob).post("/api/v1/jobs/ppo-job/approve/", {"items": ITEMS, "stopPlan": PLAN}, format="json")
    assert r.status_code == 403 and r.json()["code"] == "forbidden"


def test_an_edit_clears_the_approval(api, robot_job, approver):
    client_of(approver).post("/api/v1/jobs/ppo-job/approve/", {"items": ITEMS, "stopPlan": PLAN}, format="json")
    job = Job.objects.get(name="ppo-job")
    doc = copy.deepcopy(job.spec)
    container(doc, 1)["image"] = "rlinf/rlinf:agentic-rlinf0.4-franka"
    doc["spec"]["stopped"] = True
    edited = api.put("/api/v1/jobs/ppo-job/", doc, format="json")
    assert edited.status_code == 200, edited.json()
    refused = api.post("/api/v1/jobs/ppo-job/start/", HTTP_ACCEPT_LANGUAGE="en")
    assert refused.status_code == 409 and refused.json()["code"] == "safety_approval_stale"
    assert "carol" in refused.json()["detail"] and "no longer applies" in refused.json()["detail"]
    # An edit that would start it at once is refused as a whole, and nothing of it is stored.
    doc["spec"]["stopped"] = False
    container(doc, 1)["image"] = "rlinf/rlinf:agentic-rlinf0.4-franka-2"
    again = api.put("/api/v1/jobs/ppo-job/", doc, format="json", HTTP_ACCEPT_LANGUAGE="en")
    assert again.status_code == 400 and again.json()["errors"][0]["code"] == "safety_approval_stale"
    job.refresh_from_db()
    assert job.stopped is True and container(job.spec, 1)["image"] == "rlinf/rlinf:agentic-rlinf0.4-franka"


def test_the_run_check_export_carries_the_approval_and_stop_plan(api, robot_job, approver):
    client_of(approver).post("/api/v1/jobs/ppo-job/approve/", {"items": ITEMS, "stopPlan": PLAN}, format="json")
    exported = api.get("/api/v1/jobs/ppo-job/run-check/record/", HTTP_ACCEPT_LANGUAGE="zh-hans")
    assert exported.status_code == 200
    md = exported.content.decode()
    row6 = next(line for line in md.splitlines() if line.startswith("| 6. "))
    assert "carol" in row6 and PLAN[:20] in row6
    assert "- [x] 设备、固件、驱动、SDK、控制模式和镜像版本的兼容性。" in md
    assert "- [x] 数据和控制命令的审批、审计与恢复方案。" in md
    assert md.count("- [x] ") == 5


def test_the_reconcile_runs_no_robot_job_without_a_current_approval(monkeypatch, settings, tmp_path, alice, approver):
    """However a robot job came to be marked running (here: stored running, past the submission's hold), the
    reconcile applies none of its Tasks until it is approved; then it runs."""
    from jobs.control import controller, safety
    from tests.fake_runtime import fake_clusters, job_document

    runtimes = fake_clusters(monkeypatch, settings, tmp_path, {"alpha": "ns-alpha"})
    doc = job_document("arm")
    doc["spec"]["tasks"][1]["kubernetes"]["workload"]["template"]["spec"]["containers"][0]["resources"] = {
        "requests": {"rlinf.io/device-franka": "1"}
    }
    job = Job.objects.create(name="arm", owner=alice, spec=doc)
    controller.request_reconcile(job)
    job.refresh_from_db()
    assert runtimes["alpha"].manifests == {}
    assert all(t.applied_replicas == 0 for t in job.tasks.all())
    assert job.stopped is True and job.phase == "Stopped" and job.spec["spec"]["stopped"] is True
    assert "has no safety approval" in job.message and "rlinf.io/device-franka" in job.message, job.message
    event = AuditEvent.objects.get(action="job.stop", object_id="arm")
    assert event.actor is None and event.detail["reason"] == "SafetyApprovalMissing"

    safety.approve(job, approver, ITEMS, PLAN)
    controller.start(job, actor=alice)
    job.refresh_from_db()
    assert sorted(runtimes["alpha"].manifests) == [("ns-alpha", "arm-header"), ("ns-alpha", "arm-rollout")]
    assert job.stopped is False and "safety approval" not in job.message
