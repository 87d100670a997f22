"""Ray nodes joining, live, on the local runtime (real Ray): the job names the Workers that have not joined, RLinf's
own wait for more nodes than the job has is said first in the Diagnosis (not blamed on the network), and with
``spec.startTimeout`` a wait that lasts too long fails the job.

Seed 05-troubleshooting-jobs-workers: "对照 Head ray status 和每个预期 Worker 的连接日志".
"""

from __future__ import annotations

import time

import pytest
from django.test import Client
from rest_framework.test import APIClient

from jobs.control import controller
from jobs.models import Job
from jobs.observe.status import get_condition
from jobs.observe.sync import sync_job
from tests.clusters.test_runcheck_local import demo_document, explain, local  # noqa: F401 - the fixture
from tests.failure_scripts import LOST_ONE

pytestmark = [pytest.mark.ray, pytest.mark.django_db(transaction=True), pytest.mark.timeout(900)]

# RLinf's Cluster waiting for cluster.num_nodes = 4 Ray nodes (rlinf.md 3 and 7), with one Worker in the job
RLINF_WAITS = "while true; do echo 'Waiting for 4 nodes to be ready, currently 1 nodes available.'; sleep 2; done"


def until(jobs: list[Job], predicate, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while True:
        for job in jobs:
            sync_job(job)
            job.refresh_from_db()
        if predicate():
            return
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}\n" + "\n\n".join(explain(j) for j in jobs))
        time.sleep(2)


def test_missing_nodes_are_named_and_rlinf_waiting_longer_than_start_timeout_fails(local, admin_user):  # noqa: F811
    doc = demo_document(local / "nodes", run_script="sleep 600", rollouts=2)
    doc["spec"]["tasks"][1]["prepareScript"] = LOST_ONE
    nodes = Job.objects.create(name="nodes", owner=admin_user, spec=doc)
    doc = demo_document(local / "waits", run_script=RLINF_WAITS, rollouts=0)
    doc["spec"]["startTimeout"] = 30
    waits = Job.objects.create(name="waits", owner=admin_user, spec=doc)
    for job in (nodes, waits):
        controller.request_reconcile(job)

    def joined() -> dict | None:
        return get_condition(nodes.conditions, "RayNodesJoined")

    def two_of_three() -> bool:
        c = joined()
        return bool(c) and c["message"] == "Ray nodes 2/3, missing rollout-1 (rank 2)"

    until([nodes, waits], two_of_three, 300, "Ray nodes 2/3")
    assert joined()["status"] == "False" and joined()["reason"] == "NodesMissing"
    assert nodes.phase != "Failed", nodes.message
    api = APIClient()
    api.force_authenticate(admin_user)
    body = api.get("/api/v1/jobs/nodes/").json()
    conditions = {c["type"]: c for c in body["status"]["conditions"]}
    assert conditions["RayNodesJoined"]["message"] == "Ray nodes 2/3, missing rollout-1 (rank 2)"
    client = Client()
    client.force_login(admin_user)
    for lang, line in (
        ("en", "Ray nodes 2/3, missing rollout-1 (rank 2)"),
        ("zh-hans", "Ray 节点 2/3，缺少 rollout-1 (rank 2)"),
    ):
        page = client.get("/jobs/nodes/?tab=overview", HTTP_ACCEPT_LANGUAGE=lang).content.decode()
        assert 'data-testid="ray-nodes" data-status="False">' + line in page, lang

    # RLinf waits for 4 nodes of a 1-Worker job: said first, and not as "Ray sees only part of the nodes"
    until([waits], lambda: bool(get_condition(waits.conditions, "RLinfWaiting")), 120, "RLinf's wait")
    until([waits], lambda: waits.phase == "Failed", 180, "the start timeout")
    failed = get_condition(waits.conditions, "Failed")
    assert failed["reason"] == "StartTimeout", waits.conditions
    assert waits.message.startswith("RLinf waited more than startTimeout (30 s) for 4 nodes, 1 available: Ray nodes"), (
        waits.message
    )
    assert nodes.phase != "Failed"  # without a start timeout the waiting job stays
    diag = api.get("/api/v1/jobs/waits/diagnosis/", HTTP_ACCEPT_LANGUAGE="en").json()
    first = diag["findings"][0]
    assert first["code"] == "rlinf_num_nodes", diag["findings"]
    assert first["detail"] == "RLinf waits for 4 nodes; this job has 1 Workers."
    assert "ray_partial" not in {f["code"] for f in diag["findings"]}
    zh = api.get("/api/v1/jobs/waits/diagnosis/", HTTP_ACCEPT_LANGUAGE="zh-hans").json()
    assert zh["findings"][0]["detail"] == "RLinf 等待 4 个节点；该任务有 1 个 Worker。"
