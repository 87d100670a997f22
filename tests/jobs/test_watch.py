"""Status that follows changes at once: per-cluster watches of Pods and StatefulSets.

Watch mechanics (resume from the last resourceVersion, relist on ``410 Gone``, bookmarks) are driven against the
fake API server here because ``410 Gone`` on demand needs a compaction the test controls (``FakeKubernetes.compact``);
the latency of a real Pod change through a real API server is measured by the real-control-plane suite.
"""

from __future__ import annotations

import threading
import time

import pytest
import yaml
from django.db import OperationalError

from clusters.models import Cluster
from clusters.runtime import registry
from clusters.runtime.kubernetes import KubernetesRuntime
from jobs.control import controller
from jobs.models import Job, Pod
from jobs.observe.watcher import ClusterWatch, Dispatcher, Watcher
from tests.fake_k8s.fixtures import fake_k8s  # noqa: F401
from tests.fake_runtime import FakeRuntime, job_document

NS = "rlark-system"


def pod(name: str, job: str) -> dict:
    return {
        "metadata": {"name": name, "labels": {"rlinf.io/job": job, "rlinf.io/task": name.rsplit("-", 1)[0]}},
        "spec": {"containers": [{"name": "main"}]},
        "status": {"phase": "Pending"},
    }


@pytest.mark.django_db
def test_watch_resumes_relists_after_410_and_passes_bookmarks(fake_k8s, settings):  # noqa: F811
    settings.RLARK_K8S_READ_TIMEOUT = 3
    fake_k8s.bookmark_interval = 0.3
    fake_k8s.put("pods", NS, pod("a-header-0", "a"))
    fake_k8s.put("pods", NS, {"metadata": {"name": "not-ours"}, "spec": {"containers": [{"name": "main"}]}})
    cluster = Cluster.objects.create(name="k", runtime="kubernetes", kubeconfig=yaml.safe_dump(fake_k8s.kubeconfig()))
    runtime = KubernetesRuntime(cluster)

    events = runtime.watch(NS, "pods", "", timeout_seconds=6)
    first = next(events)
    assert first.type == "RELIST" and first.objects == (("a", "a-header-0"),)  # label-selected: ours only
    fake_k8s.put("pods", NS, pod("b-header-0", "b"))
    fake_k8s.put("pods", NS, {"metadata": {"name": "other"}, "spec": {"containers": [{"name": "x"}]}})
    added = next(e for e in events if e.type != "BOOKMARK")
    assert (added.type, added.job, added.name) == ("ADDED", "b", "b-header-0")
    bookmark = next(e for e in events if e.type == "BOOKMARK")
    assert int(bookmark.resource_version) >= int(added.resource_version)
    events.close()

    # Resume from where we were: only what happened since, no relist.
    fake_k8s.set_pod(NS, "a-header-0", phase="Running", node="n0")
    resumed = runtime.watch(NS, "pods", bookmark.resource_version, timeout_seconds=3)
    event = next(e for e in resumed if e.type != "BOOKMARK")
    assert (event.type, event.job, event.name) == ("MODIFIED", "a", "a-header-0")
    resumed.close()

    # The history is compacted: resuming from the old version gets 410 Gone, and the watch relists by itself.
    fake_k8s.compact()
    fake_k8s.put("pods", NS, pod("c-header-0", "c"))
    relisted = runtime.watch(NS, "pods", bookmark.resource_version, timeout_seconds=3)
    event = next(relisted)
    assert event.type == "RELIST"
    assert {job for job, _ in event.objects} == {"a", "b", "c"}
    relisted.close()

    sts = runtime.watch(NS, "statefulsets", "", timeout_seconds=3)
    assert next(sts).type == "RELIST"
    sts.close()


def pod_phase(name: str) -> str | None:
    """The stored phase; None while another thread writes (SQLite's shared cache locks the table meanwhile)."""
    try:
        return Pod.objects.get(name=name).phase
    except OperationalError:
        return None


@pytest.mark.django_db(transaction=True)
def test_a_pod_change_reaches_the_job_status_through_the_watch_alone(fake_k8s, settings, alice, tmp_path):  # noqa: F811
    settings.CELERY_TASK_ALWAYS_EAGER = True
    settings.VAR_DIR = tmp_path
    settings.RLARK_K8S_READ_TIMEOUT = 5
    fake_k8s.add_node("n0", {"kubernetes.io/hostname": "n0"}, {"cpu": 16, "memory": "64Gi"})
    Cluster.objects.create(name="alpha", runtime="kubernetes", kubeconfig=yaml.safe_dump(fake_k8s.kubeconfig()))
    job = Job.objects.create(name="quick", owner=alice, spec=job_document("quick", roles=[("header", True, 1)]))
    controller.request_reconcile(job)
    assert Pod.objects.get(name="quick-header-0").phase == "Pending"

    watcher = Watcher(Dispatcher())
    stop = threading.Event()
    runner = threading.Thread(target=watcher.run, args=(stop,), daemon=True)
    runner.start()
    try:
        deadline = time.monotonic() + 10
        while not all(w.resource_version for w in watcher.watches.values()) or len(watcher.watches) < 2:
            assert time.monotonic() < deadline, "the watches did not start"
            time.sleep(0.05)
        for phase, node in (("Running", "n0"), ("Failed", "n0")):
            t0 = time.monotonic()
            if phase == "Failed":
                fake_k8s.set_pod(NS, "quick-header-0", phase="Failed", terminated=("Error", 2))
            else:
                fake_k8s.set_pod(NS, "quick-header-0", phase=phase, node=node, ip="10.1.0.5")
            while pod_phase("quick-header-0") != phase:  # no sync runs here: only the watch can bring it
                assert time.monotonic() - t0 < 5, f"{phase} did not arrive"  # the latency is bench/watch_latency.py's
                time.sleep(0.02)
        job.refresh_from_db()
        assert job.phase == "Failed" and "exited with code 2" in job.message
        pods_watch = watcher.watches[(Cluster.objects.get(name="alpha").pk, "pods")]
        assert pods_watch.events >= 2 and not pods_watch.unsupported
    finally:
        stop.set()
        runner.join(5)
        for w in list(watcher.watches.values()):
            w.stop()


@pytest.mark.django_db(transaction=True)
def test_a_change_made_before_the_watcher_started_arrives_with_its_first_list(fake_k8s, settings, alice, tmp_path):  # noqa: F811
    """The watcher (re)starts after a Pod changed: its first list syncs the jobs it names, without waiting for the
    periodic resync (found by bench/watch_latency.py: kwok made the Header Running before the watch opened)."""
    settings.CELERY_TASK_ALWAYS_EAGER = True
    settings.VAR_DIR = tmp_path
    settings.RLARK_K8S_READ_TIMEOUT = 5
    fake_k8s.add_node("n0", {"kubernetes.io/hostname": "n0"}, {"cpu": 16, "memory": "64Gi"})
    Cluster.objects.create(name="alpha", runtime="kubernetes", kubeconfig=yaml.safe_dump(fake_k8s.kubeconfig()))
    job = Job.objects.create(name="early", owner=alice, spec=job_document("early", roles=[("header", True, 1)]))
    controller.request_reconcile(job)
    assert Pod.objects.get(name="early-header-0").phase == "Pending"
    fake_k8s.set_pod(NS, "early-header-0", phase="Running", node="n0", ip="10.1.0.6")

    watcher = Watcher(Dispatcher())
    stop = threading.Event()
    runner = threading.Thread(target=watcher.run, args=(stop,), daemon=True)
    runner.start()
    try:
        deadline = time.monotonic() + 10
        while pod_phase("early-header-0") != "Running":  # no sync runs here, and no event follows the first list
            assert time.monotonic() < deadline, "the first list did not sync the job"
            time.sleep(0.05)
    finally:
        stop.set()
        runner.join(5)
        for w in list(watcher.watches.values()):
            w.stop()


def test_runtimes_without_a_watch_are_left_to_the_periodic_sync(monkeypatch):
    cluster = Cluster(name="loc", runtime="local")
    watch = ClusterWatch(cluster, "pods", Dispatcher(sync=lambda names: None))
    monkeypatch.setattr(registry, "runtime_for", lambda c: FakeRuntime("loc"))
    watch.run()  # returns at once
    assert watch.unsupported
