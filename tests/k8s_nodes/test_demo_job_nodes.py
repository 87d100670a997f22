"""The demo's shape on real Pods through the console's REST API: Header x1 and rollout x2 run as runc containers
from the image built here, Ray forms through the headless Service's DNS names, the job ends Succeeded on the run
script's exit 0 and Failed (naming the Header) on exit 3; each container's RLINF_NODE_RANK is checked from inside."""

from __future__ import annotations

import pytest
from rest_framework.test import APIClient

from tests.k8s_nodes.conftest import namespace_containers
from tests.k8s_nodes.jobs import demo_job, pod_logs, process_env
from tests.k8s_real.conftest import wait_for
from tests.k8s_real.jobs import running, synced

pytestmark = [pytest.mark.k8s_nodes, pytest.mark.django_db(transaction=True)]

RAY_TIMEOUT = 150  # Ray forms in 15-40 s on a quiet machine; CI runs other tests beside this one


def ended(ns, name: str):
    """The job once Succeeded or Failed; on a timeout the failure shows every Pod's log tail."""
    try:
        return synced(name, lambda j: j.phase in ("Succeeded", "Failed"), RAY_TIMEOUT, "the run script's end")
    except pytest.fail.Exception as exc:
        from jobs.models import Job, Pod

        job = Job.objects.get(name=name)
        rows = "\n".join(
            f"{p.name}: {p.phase} {p.message} {p.container_state} {getattr(p, 'log_signals', '')}"
            for p in Pod.objects.filter(task__job=job)
        )
        raise AssertionError(f"{exc}\njob {job.phase}: {job.message}\n{rows}\n{pod_logs(ns)}") from None


def test_demo_job_forms_ray_on_real_pods_and_succeeds(real_nodes, real_cluster, real_namespace, alice):
    ns = real_namespace
    api = APIClient()
    api.force_authenticate(alice)
    resp = api.post("/api/v1/jobs/", demo_job("demo-ok", real_nodes.worker), format="json")
    assert resp.status_code == 201, resp.content

    pods = wait_for(lambda: running(ns, 3), 120, "3 real Pods Running")
    assert sorted(pods) == ["demo-ok-header-0", "demo-ok-rollout-0", "demo-ok-rollout-1"]
    # one Ray node per host within a role: the two rollouts are on the two real nodes
    assert {pods[p]["spec"]["nodeName"] for p in ("demo-ok-rollout-0", "demo-ok-rollout-1")} == {"real-0", "real-1"}
    for pod in pods.values():
        status = pod["status"]["containerStatuses"][0]
        assert status["containerID"].startswith("containerd://"), status  # a real container, not kwok's
        assert pod["status"]["podIP"].startswith("10.219.")

    job = ended(ns, "demo-ok")
    assert job.phase == "Succeeded", f"{job.message}\n{pod_logs(ns)}"

    head_log = ns.kubectl("logs", "demo-ok-header-0", "-c", "main")
    assert "alive ray nodes: 3" in head_log, head_log[-3000:]
    # each Ray node's task saw its Pod's rank (the workers resolved the head through the headless Service)
    for pod, rank in (("demo-ok-header-0", 0), ("demo-ok-rollout-0", 1), ("demo-ok-rollout-1", 2)):
        assert f"ray task on {pod}: RLINF_NODE_RANK={rank}" in head_log, head_log[-3000:]
        assert process_env(ns, pod, "RLINF_NODE_RANK") == {str(rank)}, pod
    for pod in ("demo-ok-rollout-0", "demo-ok-rollout-1"):
        worker_log = ns.kubectl("logs", pod, "-c", "main")
        assert "Head is reachable at " in worker_log, worker_log[-2000:]
        assert "demo-ok-header-ray-head" in worker_log  # it connected by the Service's DNS name

    status = api.get("/api/v1/jobs/demo-ok/").json()["status"]
    workers = {w["pod"]: w for w in status["workers"]}
    assert {w: workers[w]["rank"] for w in workers} == {
        "demo-ok-header-0": 0,
        "demo-ok-rollout-0": 1,
        "demo-ok-rollout-1": 2,
    }
    assert all(w["node"] in ("real-0", "real-1") for w in workers.values())

    # delete: nothing of the job stays in the namespace or in the nodes' containerd
    assert api.delete("/api/v1/jobs/demo-ok/").status_code in (200, 202, 204)
    wait_for(lambda: not ns.names("statefulsets") and not ns.pods(), 90, "the job's objects gone")
    wait_for(lambda: not namespace_containers(real_nodes.nodes, ns.name), 90, "no container of the job on the nodes")


def test_demo_job_fails_on_exit_3_naming_the_header(real_nodes, real_cluster, real_namespace, alice):
    api = APIClient()
    api.force_authenticate(alice)
    resp = api.post("/api/v1/jobs/", demo_job("demo-bad", real_nodes.worker, exit_code=3), format="json")
    assert resp.status_code == 201, resp.content
    job = ended(real_namespace, "demo-bad")
    assert job.phase == "Failed", job.message
    assert "demo-bad-header-0" in job.message and "exited with code 3" in job.message, job.message
