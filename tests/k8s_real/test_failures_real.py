"""Worker failures made by kwok stages on real Pods (``rlark.test/fault`` annotations, see
``tools/k8s/kwok.yaml``) and a Header Pod deleted through the real API server (the StatefulSet controller then
recreates it with a new UID)."""

from __future__ import annotations

import pytest
from rest_framework.test import APIClient

from jobs.observe.sync import sync_all_clusters
from tests.k8s_real.conftest import wait_for
from tests.k8s_real.jobs import document, running, synced, task

pytestmark = [pytest.mark.k8s_real, pytest.mark.django_db(transaction=True)]
READY = ["Starting Ray head", "Ray cluster is ready", "Executing run script..."]


@pytest.fixture
def running_job(k8s_cluster, k8s_namespace, alice):
    api = APIClient()
    api.force_authenticate(alice)
    doc = document(
        "fail-a",
        task("header", head=True, replicas=1, selector={"kubernetes.io/hostname": "cpu-0"}),
        task("rollout", head=False, replicas=3, selector={"pool": "gpu"}, gpus=1),
    )
    assert api.post("/api/v1/jobs/", doc, format="json").status_code == 201
    wait_for(lambda: running(k8s_namespace, 4), 60, "4 Running Pods")
    k8s_namespace.write_log("fail-a-header-0", READY)
    for i in range(3):
        k8s_namespace.write_log(f"fail-a-rollout-{i}", ["Ray worker connected to the head"])
    synced("fail-a", lambda j: j.phase == "Running", 30, "job Running")
    return api


def test_crash_looping_worker_fails_the_job_naming_it(running_job, k8s_namespace):
    k8s_namespace.annotate("pod", "fail-a-rollout-1", **{"rlark.test__fault": "crash"})
    job = synced("fail-a", lambda j: j.phase == "Failed", 45, "job Failed")
    assert "fail-a-rollout-1" in job.message
    assert "exited with code 137 (restarted 3 times)" in job.message
    worker = next(
        w for w in running_job.get("/api/v1/jobs/fail-a/").json()["status"]["workers"] if w["pod"] == "fail-a-rollout-1"
    )
    assert worker["restarts"] == 3
    pod = job.tasks.get(template_name="rollout").pods.get(name="fail-a-rollout-1")
    assert pod.exit_code == 137  # the last terminated state's exit code


def test_failed_worker_pod_shows_failed_with_its_exit_code(running_job, k8s_namespace):
    k8s_namespace.annotate("pod", "fail-a-rollout-2", **{"rlark.test__fault": "fail"})
    job = synced("fail-a", lambda j: j.phase == "Failed", 45, "job Failed")
    # The StatefulSet controller deletes a Failed Pod and makes a new one within a second: a sync that saw the
    # Failed instance names its exit code, one that only sees the new Pod says the Worker was replaced.
    assert "fail-a-rollout-2" in job.message
    assert "exited with code 1" in job.message or "replaced by a new Pod" in job.message, job.message


def test_deleted_header_pod_does_not_leave_the_job_running(running_job, k8s_namespace):
    old_uid = k8s_namespace.get("pod", "fail-a-header-0")["metadata"]["uid"]
    k8s_namespace.kubectl("delete", "pod", "fail-a-header-0", "--wait=false")
    # the StatefulSet controller recreates it; the new instance's log starts empty (a new Ray head)
    k8s_namespace.write_log("fail-a-header-0", [])
    wait_for(
        lambda: (p := k8s_namespace.pods().get("fail-a-header-0")) and p["metadata"]["uid"] != old_uid,
        60,
        "a new header Pod",
    )
    job = synced("fail-a", lambda j: j.phase != "Running", 45, "job no longer Running")
    assert job.phase == "Failed", job.phase
    assert "Header fail-a-header-0" in job.message and "new Ray head loses the cluster" in job.message


def test_an_edit_rolling_the_single_header_is_not_a_lost_worker_but_a_later_delete_is(running_job, k8s_namespace):
    """An edit (no restart) that changes the Header's Pod template makes the StatefulSet delete its only Pod and
    create a new one; a sync between the two sees no Header at all. That is the edit rolling out: the job must not
    fail. A Header deleted after the rollout is still a lost Ray head."""
    ns = k8s_namespace
    old = ns.get("pod", "fail-a-header-0")
    edited = document(
        "fail-a",
        task("header", head=True, replicas=1, selector={"kubernetes.io/hostname": "cpu-1"}),
        task("rollout", head=False, replicas=3, selector={"pool": "gpu"}, gpus=1),
    )
    resp = running_job.put("/api/v1/jobs/fail-a/", edited, format="json")
    assert resp.status_code == 200, resp.content
    ns.write_log("fail-a-header-0", [])

    def rolled():
        sync_all_clusters(force=True)  # every poll syncs, so one lands while the Header is gone
        pod = ns.pods().get("fail-a-header-0")
        return pod if pod and pod["metadata"]["uid"] != old["metadata"]["uid"] else None

    new = wait_for(rolled, 60, "the edit's new Header Pod")
    assert new["spec"]["nodeName"] == "cpu-1"
    ns.write_log("fail-a-header-0", READY)
    job = synced("fail-a", lambda j: j.phase != "Pending", 45, "job phase after the rollout")
    assert job.phase == "Running", job.message

    ns.kubectl("delete", "pod", "fail-a-header-0", "--wait=false")
    ns.write_log("fail-a-header-0", [])
    job = synced("fail-a", lambda j: j.phase != "Running", 45, "job no longer Running after the delete")
    assert job.phase == "Failed" and "new Ray head loses the cluster" in job.message, job.message
