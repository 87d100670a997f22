"""The cost of sync must not grow with the number of jobs, and log signals are read incrementally,
against the in-memory runtime (tests/fake_runtime.py) and, for the Kubernetes log cursor, the fake API server:

- a steady cycle (nothing changed) costs the same number of DB queries with 10 and with 100 active jobs, one Pod
  list per cluster and no log read at all;
- a header that prints 5,000 lines right after ``Ray cluster is ready`` before the first sync still leaves
  Pending (the whole log is read from a cursor, not its last 400 lines), with and without log sizes;
- log cursors: byte offsets on the local runtime, line counts / timestamps through ``pods/log``;
- CPU/memory samples: one metrics call per cluster per cycle, not one per job.
"""

from __future__ import annotations

import pytest
import yaml
from django.db import connection
from django.test.utils import CaptureQueriesContext

from clusters.models import Cluster
from clusters.runtime import registry
from jobs.control import controller
from jobs.models import Job, Phase
from jobs.models_metrics import MetricSample
from jobs.observe import metrics
from jobs.observe.log_markers import log_signals, merge_signals
from jobs.observe.sync import sync_all_clusters, sync_job
from tests.fake_k8s.fixtures import fake_k8s  # noqa: F401
from tests.fake_runtime import FakeRuntime, job_document

pytestmark = pytest.mark.django_db

HEAD_READY = [
    "RLINF_NODE_RANK: 0",
    "Waiting for 3 nodes to join the Ray cluster...",
    "Ray cluster is ready. Printing cluster information:",
    "==========================================",
    "Executing run script...",
]


class MeteredRuntime(FakeRuntime):
    """The fake runtime with CPU/memory for every Pod, counting metrics calls."""

    def pod_metrics(self, namespace, job):
        self._count("pod_metrics")
        return {p.name: {"cpu": 1.0, "memory": 2**20} for p in self.pods.values() if p.job == job}

    def pod_metrics_all(self, namespace, jobs):
        self._count("pod_metrics_all")
        return {p.name: {"cpu": 1.0, "memory": 2**20} for p in self.pods.values() if p.job in jobs}


@pytest.fixture
def alpha(monkeypatch, settings, tmp_path):
    settings.CELERY_TASK_ALWAYS_EAGER = True
    settings.VAR_DIR = tmp_path
    settings.RLARK_SYNC_INTERVAL = 0  # every sync_all_clusters() call is a cycle (no "ran recently" skip)
    fake = MeteredRuntime("alpha")
    Cluster.objects.create(name="alpha", runtime="local", namespace="ns-alpha", status="online")
    monkeypatch.setattr(registry, "runtime_for", lambda cluster: fake)
    metrics._last_sync_sample.clear()
    return fake


def submit(owner, name: str) -> Job:
    job = Job.objects.create(name=name, owner=owner, spec=job_document(name))
    controller.request_reconcile(job)
    return job


def running_jobs(fake: FakeRuntime, owner, start: int, count: int) -> None:
    for i in range(start, start + count):
        submit(owner, f"job-{i}")
    fake.set_running()
    for i in range(start, start + count):
        fake.log(f"job-{i}-header-0", *HEAD_READY)


def steady_queries(fake: FakeRuntime) -> tuple[int, dict[str, int]]:
    sync_all_clusters()  # absorbs the change
    sync_all_clusters()
    before = dict(fake.counts)
    with CaptureQueriesContext(connection) as ctx:
        result = sync_all_clusters()
    assert result["clusters"] == {"alpha": "online"}
    calls = {k: v - before.get(k, 0) for k, v in fake.counts.items() if v != before.get(k, 0)}
    return len(ctx.captured_queries), calls


def test_steady_cycle_costs_the_same_with_10_and_100_jobs(alpha, alice, settings):
    settings.RLARK_SYNC_INTERVAL = 0
    metrics.SYNC_SAMPLE_INTERVAL, old_interval = 1e9, metrics.SYNC_SAMPLE_INTERVAL  # no samples in this test
    try:
        running_jobs(alpha, alice, 0, 10)
        q10, calls10 = steady_queries(alpha)
        assert Job.objects.filter(phase=Phase.RUNNING).count() == 10
        running_jobs(alpha, alice, 10, 90)
        q100, calls100 = steady_queries(alpha)
        assert Job.objects.filter(phase=Phase.RUNNING).count() == 100
    finally:
        metrics.SYNC_SAMPLE_INTERVAL = old_interval
    assert q100 <= q10 <= 20, (q10, q100)
    # one Pod list and one log-size call per cluster; nothing read, since no log grew
    assert calls10 == calls100 == {"list_pods_all": 1, "log_sizes": 1}, (calls10, calls100)


def test_a_new_log_line_is_read_once_from_its_cursor(alpha, alice):
    running_jobs(alpha, alice, 0, 3)
    sync_all_clusters()
    reads = alpha.counts.get("read_log", 0)
    alpha.log("job-1-header-0", "Global Step 1")
    sync_all_clusters()
    assert alpha.counts["read_log"] == reads + 1  # only the header whose log grew
    sync_all_clusters()
    assert alpha.counts["read_log"] == reads + 1
    alpha.log("job-1-header-0", "Run script exited with code 0")
    sync_all_clusters()
    assert Job.objects.get(name="job-1").phase == Phase.SUCCEEDED
    assert Job.objects.get(name="job-0").phase == Phase.RUNNING


@pytest.mark.parametrize("sizes", [True, False], ids=["log-sizes", "no-log-sizes"])
def test_5000_lines_after_ray_ready_before_the_first_sync(alpha, alice, sizes):
    alpha.report_log_sizes = sizes  # False: like Kubernetes, which cannot tell a log's size without reading it
    job = submit(alice, "chatty")
    alpha.set_running()
    alpha.log("chatty-header-0", *HEAD_READY[:3])
    alpha.log("chatty-header-0", *(f"(pid=42) step {i} loss=0.{i:04d}" for i in range(5000)))
    sync_all_clusters()
    job.refresh_from_db()
    assert job.phase == Phase.RUNNING, job.message
    alpha.log("chatty-header-0", *(f"more {i}" for i in range(5000)), "Run script exited with code 3")
    sync_job(job)
    job.refresh_from_db()
    assert job.phase == Phase.FAILED and "run script exited with code 3" in job.message


def test_merge_signals_equals_log_signals_of_the_whole_log():
    lines = [
        *HEAD_READY,
        "Traceback (most recent call last):",
        "  File 'train.py', line 3",
        "RuntimeError: CUDA out of memory",
        "Warning: Ray cluster check failed, proceeding anyway.",
        "Run script exited with code 1",
    ]
    whole = log_signals("\n".join(lines) + "\n")
    for cut in range(len(lines) + 1):
        first = merge_signals({}, "".join(line + "\n" for line in lines[:cut]))
        assert merge_signals(first, "".join(line + "\n" for line in lines[cut:])) == whole, cut


def test_metrics_one_call_per_cluster_not_per_job(alpha, alice):
    running_jobs(alpha, alice, 0, 5)
    metrics._last_sync_sample.clear()
    before = dict(alpha.counts)
    samples = MetricSample.objects.count()
    sync_all_clusters()
    assert alpha.counts.get("pod_metrics_all", 0) - before.get("pod_metrics_all", 0) == 1
    assert alpha.counts.get("pod_metrics", 0) == before.get("pod_metrics", 0)
    assert MetricSample.objects.count() == samples + 15  # 5 jobs x 3 Workers
    sync_all_clusters()  # within SYNC_SAMPLE_INTERVAL: no second sample
    assert MetricSample.objects.count() == samples + 15


def test_local_runtime_byte_cursor(tmp_path):
    from clusters.runtime.local.runtime import LocalRuntime
    from clusters.runtime.local.supervision import pod_dir

    class C:
        name = "c1"

    runtime = LocalRuntime(C(), root=tmp_path, nodes=[])
    path = pod_dir(tmp_path, "c1", "p-0") / "main.log"
    path.parent.mkdir(parents=True)
    path.write_bytes(b"one\ntwo\nthr")
    first = runtime.read_log_from("", "p-0", "")
    assert (first.text, first.cursor, first.reset) == ("one\ntwo\n", "B8", False)
    assert runtime.log_sizes("", ["p-0", "gone-0"]) == {"p-0": 11}
    with open(path, "ab") as f:
        f.write(b"ee\n")
    second = runtime.read_log_from("", "p-0", first.cursor)
    assert (second.text, second.cursor) == ("three\n", "B14")
    path.write_bytes(b"new\n")  # a new container instance: the file starts over
    third = runtime.read_log_from("", "p-0", second.cursor)
    assert (third.text, third.reset) == ("new\n", True)


def test_kubernetes_log_cursor_through_pods_log(fake_k8s, settings):  # noqa: F811
    from clusters.runtime.kubernetes import KubernetesRuntime

    settings.RLARK_K8S_READ_TIMEOUT = 3
    cluster = Cluster.objects.create(
        name="k", runtime="kubernetes", kubeconfig=yaml.safe_dump(fake_k8s.kubeconfig()), namespace="rlark-system"
    )
    fake_k8s.put("pods", "rlark-system", {"metadata": {"name": "w-0"}, "spec": {"containers": [{"name": "main"}]}})
    runtime = KubernetesRuntime(cluster)
    fake_k8s.set_log("rlark-system", "w-0", "a\nb\n")
    first = runtime.read_log_from("rlark-system", "w-0", "")
    assert first.text == "a\nb\n"
    fake_k8s.set_log("rlark-system", "w-0", "a\nb\nc\n")
    second = runtime.read_log_from("rlark-system", "w-0", first.cursor)
    assert second.text == "c\n"
    # A server that sends timestamps: the cursor is the last line's timestamp and count (sinceTime next time).
    stamped = "2026-01-01T00:00:01.000000001Z a\n2026-01-01T00:00:01.000000001Z b\n2026-01-01T00:00:02.5Z c\n"
    fake_k8s.set_log("rlark-system", "w-0", stamped)
    third = runtime.read_log_from("rlark-system", "w-0", "")
    assert (third.text, third.cursor) == ("a\nb\nc\n", "T2026-01-01T00:00:02.5Z|1")
    fake_k8s.set_log("rlark-system", "w-0", stamped + "2026-01-01T00:00:02.5Z d\n2026-01-01T00:00:03Z e\n")
    fourth = runtime.read_log_from("rlark-system", "w-0", third.cursor)
    assert fourth.text == "d\ne\n"
    assert any("sinceTime=2026-01-01T00%3A00%3A02Z" in path for _, path in fake_k8s.requests)
