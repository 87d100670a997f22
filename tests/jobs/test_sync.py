"""Status sync with an in-memory runtime: Pod -> Task -> Job aggregation, failure and success
detection, conditions, cluster failure isolation and write economy."""

from __future__ import annotations

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from clusters.models import Cluster
from clusters.runtime.base import RuntimeFailure
from jobs.control import controller
from jobs.models import Job, Phase, Pod
from jobs.observe import phases, sync
from jobs.observe.log_markers import log_signals
from jobs.observe.status import get_condition, job_status, read_worker_log
from jobs.observe.sync import sync_all_clusters, sync_job
from tests.fake_runtime import FakeRuntime, fake_clusters, job_document

pytestmark = pytest.mark.django_db

HEAD_READY = [
    "RLINF_NODE_RANK: 0",
    "Waiting for 3 nodes to join the Ray cluster...",
    "Ray cluster is ready. Printing cluster information:",
    "==========================================",
    "Executing run script...",
]


@pytest.fixture
def runtimes(monkeypatch, settings, tmp_path):
    return fake_clusters(monkeypatch, settings, tmp_path, {"alpha": "ns-alpha", "beta": "ns-beta"})


@pytest.fixture
def tmp_var(settings, tmp_path):
    settings.VAR_DIR = tmp_path
    return tmp_path


def submit(owner, name="demo", **kw) -> Job:
    job = Job.objects.create(name=name, owner=owner, spec=job_document(name, **kw))
    controller.request_reconcile(job)
    job.refresh_from_db()
    return job


def resync(job: Job) -> Job:
    sync_job(job)
    job.refresh_from_db()
    return job


def run_ready(fake: FakeRuntime, job: Job) -> Job:
    fake.set_running()
    fake.log("demo-header-0", *HEAD_READY)
    return resync(job)


def test_pending_until_every_worker_is_ready_and_ray_formed(runtimes, alice):
    fake = runtimes["alpha"]
    job = submit(alice)
    assert job.phase == Phase.PENDING
    assert "0/3 ready" in job.message
    fake.set_running("demo-header-0", "demo-rollout-0")
    fake.wait("demo-rollout-1", "ContainerCreating")
    job = resync(job)
    assert job.phase == Phase.PENDING
    rollout = job.tasks.get(name="demo-rollout")
    assert rollout.phase == Phase.PENDING and rollout.ready_replicas == 1
    assert "demo-rollout-1: ContainerCreating" in rollout.message
    assert job.tasks.get(name="demo-header").phase == Phase.RUNNING
    # All Pods ready but the header has not logged "Ray cluster is ready": still Pending.
    fake.set_running()
    job = resync(job)
    assert job.phase == Phase.PENDING
    assert get_condition(job.conditions, "WorkersReady")["status"] == "True"
    assert get_condition(job.conditions, "RayClusterReady")["status"] == "False"
    fake.log("demo-header-0", *HEAD_READY)
    job = resync(job)
    assert job.phase == Phase.RUNNING
    assert job.message == "All 3 Workers running"
    ray = get_condition(job.conditions, "RayClusterReady")
    assert ray["status"] == "True" and ray["reason"] == "RayClusterReady" and ray["lastTransitionTime"]
    assert set(job.tasks.values_list("phase", flat=True)) == {Phase.RUNNING}


def test_job_status_document(runtimes, alice):
    job = submit(alice, roles=[("header", True, 1), ("rollout", False, 2)])
    before = job_status(job)
    assert before["tasks"][1] == {
        "name": "demo-rollout",
        "template": "rollout",
        "phase": "Pending",
        "message": before["tasks"][1]["message"],
        "replicas": 2,
        "ready": 0,
        "rankStart": 1,
        "cluster": "alpha",
    }
    job = run_ready(runtimes["alpha"], job)
    status = job_status(job)
    assert status["phase"] == "Running"
    assert {c["type"] for c in status["conditions"]} >= {"WorkersReady", "RayClusterReady"}
    workers = {w["name"]: w for w in status["workers"]}
    assert set(workers) == {"demo-header-0", "demo-rollout-0", "demo-rollout-1"}
    w = workers["demo-rollout-1"]
    assert w["role"] == "Rollout" and w["task"] == "demo-rollout" and w["pod"] == "demo-rollout-1"
    assert w["rank"] == 2 and w["phase"] == "Running" and w["restarts"] == 0
    assert w["node"] == "alpha-node-0" and w["ip"] == "127.0.0.1" and w["started"]
    assert status["runtimeSeconds"] is not None


def test_workers_without_pods_before_first_sync(runtimes, alice):
    job = Job.objects.create(name="fresh", owner=alice, spec=job_document("fresh"))
    controller.reconcile(job)  # Tasks exist, no sync yet
    workers = job_status(job)["workers"]
    assert [w["name"] for w in workers] == ["fresh-header-0", "fresh-rollout-0", "fresh-rollout-1"]
    assert all(w["pod"] is None for w in workers)


def test_run_script_exit_zero_succeeds_scales_down_and_keeps_logs(runtimes, alice, tmp_var):
    fake = runtimes["alpha"]
    job = run_ready(fake, submit(alice))
    fake.log("demo-header-0", "Global Step: 10/10 loss=0.1", "Run script exited with code 0")
    fake.terminate("demo-header-0", 0)
    # The workers lose the head and exit non-zero: success still wins.
    fake.log("demo-rollout-0", "Ray worker process exited with code 1")
    fake.terminate("demo-rollout-0", 1)
    job = resync(job)
    assert job.phase == Phase.SUCCEEDED
    assert job.finished_at is not None
    assert get_condition(job.conditions, "Succeeded")["status"] == "True"
    assert set(job.tasks.values_list("phase", flat=True)) == {Phase.SUCCEEDED}
    # Resources freed: every Task scaled to 0 on the runtime ...
    assert fake.pods == {}
    assert ("scale", "demo-rollout", 0) in fake.calls
    # ... and the logs stay readable.
    assert "Global Step: 10/10" in read_worker_log(job, "demo-header-0")
    assert "Run script exited with code 0" in read_worker_log(job, "demo-header-0", tail=1)
    # Terminal: further syncs change nothing.
    assert resync(job).phase == Phase.SUCCEEDED


def test_run_script_failure_fails_naming_the_header(runtimes, alice, tmp_var):
    fake = runtimes["alpha"]
    job = run_ready(fake, submit(alice))
    fake.log(
        "demo-header-0", "Traceback (most recent call last):", "ValueError: bad config", "Run script exited with code 3"
    )
    fake.terminate("demo-header-0", 3)
    job = resync(job)
    assert job.phase == Phase.FAILED
    assert "demo-header-0" in job.message and "Header" in job.message and "code 3" in job.message
    failed = get_condition(job.conditions, "Failed")
    assert failed["reason"] == "RunScriptFailed"
    assert job.tasks.get(name="demo-header").phase == Phase.FAILED
    assert fake.pods == {}


def test_worker_ray_exit_fails_naming_the_worker(runtimes, alice, tmp_var):
    fake = runtimes["alpha"]
    job = run_ready(fake, submit(alice))
    fake.log(
        "demo-rollout-1",
        "RLINF_NODE_RANK: 2",
        "Connecting to Ray head at demo-header-ray-head:6379...",
        "Ray worker process exited with code 137",
    )
    fake.terminate("demo-rollout-1", 137)
    job = resync(job)
    assert job.phase == Phase.FAILED
    assert "demo-rollout-1" in job.message and "Rollout" in job.message and "137" in job.message
    assert get_condition(job.conditions, "Failed")["reason"] == "WorkerExited"
    assert job.tasks.get(name="demo-rollout").phase == Phase.FAILED


def test_prepare_failure_names_last_stage_and_first_error(runtimes, alice, tmp_var):
    fake = runtimes["alpha"]
    job = submit(alice)
    fake.set_running()
    fake.log(
        "demo-rollout-0",
        "RLINF_NODE_RANK: 1",
        "Executing prepare script...",
        "pip: error: No such file or directory: requirements.txt",
    )
    fake.terminate("demo-rollout-0", 2)
    job = resync(job)
    assert job.phase == Phase.FAILED  # also from Pending (upstream cannot)
    assert "Executing prepare script..." in job.message
    assert "No such file or directory" in job.message


def test_crash_loop_fails_with_reason(runtimes, alice, tmp_var):
    fake = runtimes["alpha"]
    job = run_ready(fake, submit(alice))
    for _ in range(phases.CRASHLOOP_LIMIT):
        fake.terminate("demo-header-0", 0, restart=True)
    job = resync(job)
    assert job.phase == Phase.FAILED
    assert get_condition(job.conditions, "Failed")["reason"] in {"CrashLoop", "HeaderRestarted"}
    assert "demo-header-0" in job.message


def test_header_restart_fails_the_job(runtimes, alice, tmp_var):
    fake = runtimes["alpha"]
    job = run_ready(fake, submit(alice))
    fake.terminate("demo-header-0", 1, restart=True)
    job = resync(job)
    assert job.phase == Phase.FAILED
    assert get_condition(job.conditions, "Failed")["reason"] in {"HeaderExited", "HeaderRestarted"}


def test_image_pull_condition_at_once_then_failure_after_grace(runtimes, alice, tmp_var, monkeypatch):
    fake = runtimes["alpha"]
    job = submit(alice)
    fake.wait("demo-rollout-0", "ImagePullBackOff", 'Back-off pulling image "rlinf/rlinf:nope"')
    job = resync(job)
    cond = get_condition(job.conditions, "ImagePullBackOff")
    assert cond["status"] == "True" and "demo-rollout-0" in cond["message"]
    assert job.phase == Phase.PENDING
    monkeypatch.setattr(phases, "IMAGE_PULL_GRACE", 0)
    job = resync(job)
    assert job.phase == Phase.FAILED
    assert get_condition(job.conditions, "Failed")["reason"] == "ImagePull"


def test_failing_cluster_is_marked_offline_and_does_not_stop_the_others(runtimes, alice, monkeypatch):
    monkeypatch.setattr(sync, "_backoff", {})
    a = submit(alice, name="ja")
    b = submit(alice, name="jb", cluster="beta")
    runtimes["alpha"].failure = RuntimeFailure("connection refused", reason="unreachable")
    runtimes["beta"].set_running()
    runtimes["beta"].log("jb-header-0", *HEAD_READY)
    result = sync_all_clusters(force=True)
    assert result["clusters"]["alpha"].startswith("offline")
    alpha, beta = Cluster.objects.get(name="alpha"), Cluster.objects.get(name="beta")
    assert alpha.status == "offline" and "connection refused" in alpha.status_message
    assert beta.status == "online"
    b.refresh_from_db()
    assert b.phase == Phase.RUNNING
    a.refresh_from_db()
    assert get_condition(a.conditions, "ClusterReachable")["status"] == "False"
    # Recovery needs no manual action.
    runtimes["alpha"].failure = None
    sync_all_clusters(force=True)
    assert Cluster.objects.get(name="alpha").status == "online"
    a.refresh_from_db()
    assert get_condition(a.conditions, "ClusterReachable")["status"] == "True"


def test_unchanged_sync_writes_nothing(runtimes, alice):
    job = run_ready(runtimes["alpha"], submit(alice))
    resync(job)
    with CaptureQueriesContext(connection) as ctx:
        sync_job(job)
    writes = [q["sql"] for q in ctx.captured_queries if q["sql"].split()[0] in ("UPDATE", "INSERT", "DELETE")]
    assert writes == []


def test_many_pods_are_written_in_bulk(runtimes, alice):
    job = Job.objects.create(
        name="big", owner=alice, spec=job_document("big", roles=[("header", True, 1), ("r", False, 40)])
    )
    controller.reconcile(job)
    with CaptureQueriesContext(connection) as ctx:
        sync_job(job)
    inserts = [q for q in ctx.captured_queries if q["sql"].startswith("INSERT") and "jobs_pod" in q["sql"]]
    assert Pod.objects.filter(task__job=job).count() == 41
    assert len(inserts) <= 2


def test_log_signals():
    s = log_signals(
        "RLINF_NODE_RANK: 0\nExecuting prepare script...\nWaiting for 3 nodes to join the Ray cluster...\n"
        "Warning: Ray cluster check failed, proceeding anyway.\nRay cluster is ready. Printing cluster information:\n"
        "Executing run script...\nRun script exited with code 0\n"
    )
    assert s["runExit"] == 0 and s["rayReady"] and s["clusterCheckFailed"] and s["rayExit"] is None
    assert s["lastStage"] == "Run script exited with code 0"
    s = log_signals("RLINF_NODE_RANK: 1\nError: Ray CLI is not found. Please ensure Ray is installed.\n")
    assert s["firstError"].startswith("Error: Ray CLI is not found") and not s["rayReady"]


def test_idling_header_after_run_script_is_detected(runtimes, alice, tmp_var):
    """The wrapper keeps the header alive after its run script; the marker alone ends the job."""
    fake = runtimes["alpha"]
    job = run_ready(fake, submit(alice))
    fake.log("demo-header-0", *[f"Global Step: {i}/50" for i in range(50)])
    assert resync(job).phase == Phase.RUNNING
    fake.log(
        "demo-header-0", "Traceback (most recent call last):", "RuntimeError: diverged", "Run script exited with code 4"
    )
    job = resync(job)
    assert job.phase == Phase.FAILED
    assert "code 4" in job.message and "RuntimeError: diverged" in job.message
    assert fake.pods == {}


def test_failing_cluster_is_retried_with_back_off(runtimes, alice, monkeypatch):
    monkeypatch.setattr(sync, "_backoff", {})
    monkeypatch.setattr(sync, "_last_full_sync", 0.0)
    calls = []
    alpha = runtimes["alpha"]
    alpha.failure = RuntimeFailure("connection refused", reason="unreachable")
    original = alpha.list_nodes
    monkeypatch.setattr(alpha, "list_nodes", lambda: calls.append(1) or original())
    sync_all_clusters(force=True)
    assert len(calls) == 1
    monkeypatch.setattr(sync, "_last_full_sync", 0.0)
    result = sync_all_clusters()  # within the back-off: not contacted again
    assert len(calls) == 1 and "retry in" in result["clusters"]["alpha"]
    assert result["clusters"]["beta"] == "online"
    alpha.failure = None
    monkeypatch.setattr(sync, "_backoff", {k: (1, 0.0) for k in sync._backoff})  # back-off elapsed
    monkeypatch.setattr(sync, "_last_full_sync", 0.0)
    assert sync_all_clusters()["clusters"]["alpha"] == "online"


def test_unchanged_sync_query_count_does_not_grow_with_pods(runtimes, alice):
    counts = []
    for name, n in (("small", 2), ("large", 30)):
        job = Job.objects.create(
            name=name, owner=alice, spec=job_document(name, roles=[("header", True, 1), ("r", False, n)])
        )
        controller.reconcile(job)
        runtimes["alpha"].set_running()
        runtimes["alpha"].log(f"{name}-header-0", *HEAD_READY)
        sync_job(job)
        sync_job(job)
        with CaptureQueriesContext(connection) as ctx:
            sync_job(job)
        counts.append(len(ctx.captured_queries))
    assert counts[0] == counts[1], counts


def test_failed_ray_cluster_check_is_not_reported_ready(runtimes, alice):
    """Seed 05: `Ray cluster is ready` printed after `Warning: Ray cluster check failed` is no ready cluster."""
    fake = runtimes["alpha"]
    job = submit(alice)
    fake.set_running()
    fake.log(
        "demo-header-0",
        "RLINF_NODE_RANK: 0",
        "Waiting for 3 nodes to join the Ray cluster...",
        "Warning: Ray cluster check failed, proceeding anyway.",
        "Ray cluster is ready. Printing cluster information:",
        "Executing run script...",
    )
    job = resync(job)
    ray = get_condition(job.conditions, "RayClusterReady")
    assert ray["status"] == "False" and ray["reason"] == "RayClusterCheckFailed"
