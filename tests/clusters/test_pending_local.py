"""Pending reasons on the real local runtime: a role asking for more GPUs than any matching node has stays Pending
and its reason names the job, the role, the Worker and the blocking resource; the Diagnosis tab shows it."""

from __future__ import annotations

import time

import pytest

from clusters.models import Cluster
from clusters.services.inventory import upsert_local_nodes
from jobs.control import controller
from jobs.explain.pending import job_pending_reasons
from jobs.models import Job
from jobs.observe.sync import sync_job
from launcher.management.commands.seed_demo import DEMO_NODES
from tests.clusters.test_local_runtime_support import SupervisorProcess
from tests.clusters.test_runcheck_local import demo_document

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.timeout(300)]


@pytest.fixture
def local(settings, tmp_path):
    settings.CELERY_TASK_ALWAYS_EAGER = True
    settings.VAR_DIR = tmp_path / "var"
    settings.RLARK_LOCAL_ROOT = tmp_path / "local"
    sup = SupervisorProcess(settings.RLARK_LOCAL_ROOT).start()
    cluster = Cluster.objects.create(
        name="local", runtime="local", status="online", allow_host_path=True, host_path_roots="/tmp"
    )
    upsert_local_nodes(cluster, DEMO_NODES)
    yield tmp_path
    for job in Job.objects.all():
        controller.delete(job)
    sup.stop()


def test_unschedulable_role_names_the_blocking_resource(local, admin_user, client):
    doc = demo_document(local / "out", run_script="sleep 600", rollouts=0)
    container = doc["spec"]["tasks"][0]["kubernetes"]["workload"]["template"]["spec"]["containers"][0]
    container["resources"] = {"requests": {"nvidia.com/gpu": 16}, "limits": {"nvidia.com/gpu": 16}}
    job = Job.objects.create(name="toobig", owner=admin_user, spec=doc)
    controller.request_reconcile(job)
    deadline = time.monotonic() + 60
    reasons = {}
    while time.monotonic() < deadline:
        sync_job(job)
        job.refresh_from_db()
        reasons = job_pending_reasons(job, with_logs=False)
        if reasons.get("header"):
            break
        time.sleep(1)
    assert job.phase == "Pending"
    (reason,) = reasons["header"]
    assert reason.code == "unschedulable"
    assert reason.resource == "nvidia.com/gpu need 16, free 8"
    assert reason.message("en").startswith("Job toobig, role header: Worker toobig-header-0 cannot be scheduled.")
    assert "阻塞资源：nvidia.com/gpu need 16, free 8。" in reason.message("zh-hans")
    client.force_login(admin_user)
    page = client.get("/jobs/toobig/diagnosis/", HTTP_ACCEPT_LANGUAGE="en").content.decode()
    assert '<div class="mono" data-testid="blocking-resource">nvidia.com/gpu need 16, free 8</div>' in page
