"""Job controller with an in-memory runtime: Tasks, ranks, stop/start/restart/delete, edits, retries."""

from __future__ import annotations

import pytest

from accounts.models import AuditEvent
from clusters.runtime.base import RuntimeFailure
from jobs.control import controller
from jobs.models import Job, Phase, Pod, Task
from jobs.observe.sync import sync_all_clusters
from tests.fake_runtime import fake_clusters, job_document

pytestmark = pytest.mark.django_db


@pytest.fixture
def runtimes(monkeypatch, settings, tmp_path):
    """Clusters ``alpha`` and ``beta`` backed by FakeRuntimes; reconciles run synchronously."""
    return fake_clusters(monkeypatch, settings, tmp_path, {"alpha": "ns-alpha", "beta": "ns-beta"})


def submit(owner, name="demo", **kw) -> Job:
    job = Job.objects.create(name=name, owner=owner, spec=job_document(name, **kw))
    controller.request_reconcile(job)
    job.refresh_from_db()
    return job


def test_one_task_per_template_with_rank_starts_and_cluster_namespace(runtimes, alice):
    job = submit(alice, roles=[("header", True, 1), ("rollout", False, 2), ("env", False, 3, "beta")])
    tasks = list(job.tasks.order_by("order"))
    assert [t.name for t in tasks] == ["demo-header", "demo-rollout", "demo-env"]
    assert [t.rank_start for t in tasks] == [0, 1, 3]
    assert [t.namespace for t in tasks] == ["ns-alpha", "ns-alpha", "ns-beta"]
    assert [t.cluster.name for t in tasks] == ["alpha", "alpha", "beta"]
    assert tasks[0].head and not tasks[1].head
    assert tasks[1].display_role == "Rollout"
    # Each Task's manifest went to its own cluster's runtime with its replicas and rank start.
    alpha, beta = runtimes["alpha"], runtimes["beta"]
    assert sorted(alpha.manifests) == [("ns-alpha", "demo-header"), ("ns-alpha", "demo-rollout")]
    assert alpha.manifests[("ns-alpha", "demo-rollout")].rank_start == 1
    assert beta.manifests[("ns-beta", "demo-env")].replicas == 3
    assert beta.manifests[("ns-beta", "demo-env")].total_nodes == 6
    # The immediate sync after the action already sees the Pods.
    assert sorted(Pod.objects.filter(task__job=job).values_list("name", flat=True)) == [
        "demo-env-0",
        "demo-env-1",
        "demo-env-2",
        "demo-header-0",
        "demo-rollout-0",
        "demo-rollout-1",
    ]
    assert job.observed_generation == job.generation
    ranks = {p.name: p.rank for p in Pod.objects.filter(task__job=job).select_related("task")}
    assert ranks["demo-rollout-1"] == 2 and ranks["demo-env-2"] == 5


def test_reconcile_is_idempotent(runtimes, alice):
    job = submit(alice)
    before = list(runtimes["alpha"].pods.values())
    uids = {p.name: p.uid for p in before}
    controller.reconcile(job)
    controller.reconcile(job)
    assert Task.objects.filter(job=job).count() == 2
    assert {p.name: p.uid for p in runtimes["alpha"].pods.values()} == uids
    assert not [c for c in runtimes["alpha"].calls if c[0] == "restart"]


def test_stop_scales_to_zero_and_shows_stopped_at_once(runtimes, alice):
    job = submit(alice)
    runtimes["alpha"].set_running()
    job = controller.stop(job, actor=alice)
    assert job.phase == Phase.STOPPED and job.stopped
    assert job.spec["spec"]["stopped"] is True
    assert runtimes["alpha"].pods == {}
    assert ("scale", "demo-header", 0) in runtimes["alpha"].calls
    assert set(job.tasks.values_list("phase", flat=True)) == {Phase.STOPPED}
    assert AuditEvent.objects.filter(action="job.stop", object_id="demo", actor=alice).exists()
    # Pods are kept as history rows, marked Stopped; the runtime has none.
    assert set(Pod.objects.filter(task__job=job).values_list("phase", flat=True)) == {"Stopped"}


def test_start_recreates_workers_as_a_new_attempt(runtimes, alice):
    job = submit(alice)
    old = {p.uid for p in runtimes["alpha"].pods.values()}
    controller.stop(job)
    job = controller.start(Job.objects.get(pk=job.pk), actor=alice)
    job.refresh_from_db()
    assert job.phase == Phase.PENDING and not job.stopped and job.attempt == 2
    assert job.finished_at is None
    new = {p.uid for p in runtimes["alpha"].pods.values()}
    assert len(new) == 3 and not (new & old)
    assert AuditEvent.objects.filter(action="job.start").exists()


def test_restart_running_job_recreates_every_worker(runtimes, alice):
    job = submit(alice)
    runtimes["alpha"].set_running()
    old = {p.name: p.uid for p in runtimes["alpha"].pods.values()}
    controller.restart(job, actor=alice)
    job.refresh_from_db()
    assert job.attempt == 2
    new = {p.name: p.uid for p in runtimes["alpha"].pods.values()}
    assert new.keys() == old.keys() and all(new[k] != old[k] for k in new)
    # A second reconcile of the same attempt does not restart again.
    controller.reconcile(job)
    assert {p.name: p.uid for p in runtimes["alpha"].pods.values()} == new


def test_restart_works_from_failed(runtimes, alice):
    job = submit(alice)
    Job.objects.filter(pk=job.pk).update(phase=Phase.FAILED)
    controller.reconcile(Job.objects.get(pk=job.pk))  # terminal -> scaled to 0
    assert runtimes["alpha"].pods == {}
    controller.restart(Job.objects.get(pk=job.pk))
    job.refresh_from_db()
    assert job.phase == Phase.PENDING and job.attempt == 2
    assert len(runtimes["alpha"].pods) == 3


def test_delete_removes_workloads_and_the_job(runtimes, alice):
    job = submit(alice)
    controller.delete(job, actor=alice)
    assert not Job.objects.filter(name="demo").exists()
    assert runtimes["alpha"].pods == {} and runtimes["alpha"].manifests == {}
    assert AuditEvent.objects.filter(action="job.delete", object_id="demo").exists()


def test_delete_keeps_the_job_when_a_runtime_cannot_delete(runtimes, alice):
    job = submit(alice)
    runtimes["alpha"].failure = RuntimeFailure("connection refused", reason="unreachable")
    with pytest.raises(RuntimeFailure, match="connection refused"):
        controller.delete(job)
    job.refresh_from_db()
    assert job.stopped  # it will be scaled down once the cluster is back


def test_edit_adds_and_removes_tasks(runtimes, alice):
    job = submit(alice)
    job.spec = job_document("demo", roles=[("header", True, 1), ("env", False, 2)])
    job.save()
    controller.request_reconcile(job)
    assert sorted(job.tasks.values_list("name", flat=True)) == ["demo-env", "demo-header"]
    assert ("delete", "demo-rollout") in runtimes["alpha"].calls
    assert not [p for p in runtimes["alpha"].pods.values() if p.task == "demo-rollout"]
    assert sorted(p.name for p in runtimes["alpha"].pods.values()) == ["demo-env-0", "demo-env-1", "demo-header-0"]
    assert job.tasks.get(name="demo-env").rank_start == 1


def test_runtime_error_is_shown_and_retried_by_the_periodic_sync(runtimes, alice):
    runtimes["alpha"].failure = RuntimeFailure("API server timed out", reason="unreachable")
    job = submit(alice)
    assert job.observed_generation < job.generation
    assert "API server timed out" in job.tasks.get(name="demo-header").message
    runtimes["alpha"].failure = None
    sync_all_clusters(force=True)
    job.refresh_from_db()
    assert job.observed_generation == job.generation
    assert len(runtimes["alpha"].pods) == 3
    assert "timed out" not in job.tasks.get(name="demo-header").message


def test_a_lost_reconcile_is_picked_up_by_the_periodic_sync(runtimes, alice):
    """The Celery worker died before running the reconcile: the generation lags, sync catches up."""
    job = Job.objects.create(name="lost", owner=alice, spec=job_document("lost"))
    assert runtimes["alpha"].pods == {}
    sync_all_clusters(force=True)
    assert len(runtimes["alpha"].pods) == 3
    assert Job.objects.get(pk=job.pk).tasks.count() == 2


def test_request_reconcile_enqueues_after_commit_without_eager(runtimes, alice, settings, monkeypatch):
    settings.CELERY_TASK_ALWAYS_EAGER = False
    sent = []
    from jobs import tasks

    monkeypatch.setattr(tasks.reconcile_job, "delay", lambda job_id: sent.append(job_id))
    job = Job.objects.create(name="queued", owner=alice, spec=job_document("queued"))
    from django.test import TestCase

    with TestCase.captureOnCommitCallbacks(execute=True):
        controller.request_reconcile(job)
    assert sent == [job.pk]
    assert Job.objects.get(pk=job.pk).generation == 2
