"""Metrics: CPU/memory equal the runtime's readings (or "not available"), restarts, Pod age, runtime, and TensorBoard
scalars read from real event files written with tensorboardX; the Metrics, Diagnosis and Run check pages."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from clusters.models import Cluster
from clusters.runtime.base import LogChunk
from jobs.models import Job, MetricSample, Pod, Task
from jobs.observe import metrics as metrics_service
from tests.jobs.test_runcheck import HEAD_LOG, template, worker_log

pytestmark = pytest.mark.django_db


class ReportingRuntime:
    """The data-plane side of this test: a runtime that reports fixed usage per Pod (what pod_metrics returns is
    the input; the console must show exactly it)."""

    def __init__(self, readings):
        self.readings = readings
        self.calls = 0

    def pod_metrics(self, namespace, job):
        self.calls += 1
        return self.readings

    def stream_log(self, namespace, pod, previous=False):
        logs = {"job-header-0": HEAD_LOG, "job-worker-0": worker_log(1)}
        yield logs.get(pod, "").encode()

    def read_log_from(self, namespace, pod, cursor="", limit_bytes=4 << 20):
        """The lines after ``cursor`` (a line count, as ``Runtime.read_log_from`` counts them)."""
        lines = b"".join(self.stream_log(namespace, pod)).decode().splitlines(keepends=True)
        done = int(cursor[1:]) if cursor.startswith("L") else 0
        return LogChunk("".join(lines[done:]), f"L{len(lines)}")


@pytest.fixture
def job(admin_user, tmp_path):
    cluster = Cluster.objects.create(name="local", runtime="local", status="online")
    data = tmp_path / "data"
    data.mkdir()
    head = template("header", "rlinf/rlinf:v1", {}, 1, head=True, mounts=data)
    head["tensorBoardDir"] = "/data/tb"
    doc = {"metadata": {"name": "job"}, "spec": {"tasks": [head, template("worker", "rlinf/rlinf:v1", {}, 1)]}}
    now = timezone.now()
    job = Job.objects.create(
        name="job", owner=admin_user, spec=doc, phase="Running", started_at=now - timedelta(seconds=125)
    )
    t0 = Task.objects.create(
        job=job,
        template_name="header",
        name="job-header",
        cluster=cluster,
        namespace="ns",
        head=True,
        display_role="Header",
        replicas=1,
    )
    t1 = Task.objects.create(
        job=job,
        template_name="worker",
        name="job-worker",
        cluster=cluster,
        namespace="ns",
        display_role="Worker",
        replicas=1,
        rank_start=1,
        order=1,
    )
    Pod.objects.create(
        task=t0, name="job-header-0", phase="Running", restart_count=0, created_at=now - timedelta(seconds=65)
    )
    Pod.objects.create(
        task=t1, name="job-worker-0", phase="Running", restart_count=2, created_at=now - timedelta(seconds=30)
    )
    return job, data


def use_runtime(monkeypatch, runtime):
    monkeypatch.setattr("clusters.runtime.registry.runtime_for", lambda cluster: runtime)


def test_cpu_memory_are_the_runtime_numbers_and_ring_is_bounded(job, monkeypatch):
    job, _ = job
    readings = {"job-header-0": {"cpu": 1.25, "memory": 3 * 2**30}, "job-worker-0": {"cpu": 0.5}, "other": {"cpu": 9}}
    use_runtime(monkeypatch, ReportingRuntime(readings))
    assert metrics_service.sample_job(job)
    rows = {w.pod: w for w in metrics_service.worker_metrics(job)}
    assert rows["job-header-0"].cpu == 1.25 and rows["job-header-0"].memory == 3 * 2**30
    assert rows["job-worker-0"].cpu == 0.5 and rows["job-worker-0"].memory is None  # not reported: not available
    assert not MetricSample.objects.filter(pod_name="other").exists()
    assert rows["job-worker-0"].restarts == 2
    assert 29 <= rows["job-worker-0"].age_seconds <= 40
    start = timezone.now()
    for i in range(metrics_service.RING_SIZE + 5):
        metrics_service.record_pod_metrics(job, {"job-header-0": {"cpu": i, "memory": i}}, start + timedelta(seconds=i))
    samples = MetricSample.objects.filter(job=job, pod_name="job-header-0")
    assert samples.count() == metrics_service.RING_SIZE
    assert metrics_service.worker_metrics(job)[0].cpu == metrics_service.RING_SIZE + 4


def test_runtime_without_metrics_shows_not_available(job, monkeypatch, client, admin_user):
    job, _ = job
    use_runtime(monkeypatch, ReportingRuntime(None))
    client.force_login(admin_user)
    page = client.get(f"/jobs/{job.name}/metrics/", HTTP_ACCEPT_LANGUAGE="en").content.decode()
    assert "not available" in page and 'data-testid="cpu"' not in page
    api = client.get(f"/api/v1/jobs/{job.name}/metrics/", HTTP_ACCEPT_LANGUAGE="en").json()
    assert api["metricsAvailable"] is False
    assert {w["pod"]: (w["cpu"], w["memory"]) for w in api["workers"]} == {
        "job-header-0": (None, None),
        "job-worker-0": (None, None),
    }
    assert 124 <= api["runtimeSeconds"] <= 140
    assert 'data-testid="runtime-label">Running for<' in page
    job.finished_at = job.started_at + timedelta(seconds=90)
    job.phase = "Succeeded"
    job.save(update_fields=["finished_at", "phase"])
    page = client.get(f"/jobs/{job.name}/metrics/", HTTP_ACCEPT_LANGUAGE="en").content.decode()
    assert 'data-testid="runtime-label">Ran for<' in page and '<b data-testid="runtime">1m 30s</b>' in page


def test_metrics_page_and_api_show_runtime_values(job, monkeypatch, client, admin_user):
    job, _ = job
    runtime = ReportingRuntime({"job-header-0": {"cpu": 1.25, "memory": 3 * 2**30}, "job-worker-0": {"cpu": 0.5}})
    use_runtime(monkeypatch, runtime)
    client.force_login(admin_user)
    page = client.get(f"/jobs/{job.name}/metrics/", HTTP_ACCEPT_LANGUAGE="en").content.decode()
    assert '<b data-testid="cpu">1.25</b>' in page
    assert '<b data-testid="memory">3.0 GiB</b>' in page
    assert "not available" in page  # the worker's memory
    api = client.get(f"/api/v1/jobs/{job.name}/metrics/").json()
    workers = {w["pod"]: w for w in api["workers"]}
    assert workers["job-header-0"]["cpu"] == 1.25 and workers["job-header-0"]["memory"] == 3 * 2**30
    assert workers["job-worker-0"]["restarts"] == 2 and api["restarts"] == 2


def test_tensorboard_scalars_from_real_event_files(job, monkeypatch, client, admin_user):
    from tensorboardX import SummaryWriter

    job, data = job
    use_runtime(monkeypatch, ReportingRuntime(None))
    run = data / "tb" / "2026-01-01-run"
    writer = SummaryWriter(logdir=str(run))
    expected = {step: 1.0 / (step + 1) for step in range(1, 31)}
    for step, value in expected.items():
        writer.add_scalar("train/actor/loss", value, step)
        writer.add_scalar("env/success_once", step / 30, step)
    writer.close()
    scalars = metrics_service.read_scalars(str(data / "tb"))
    assert set(scalars) == {"train/actor/loss", "env/success_once"}
    got = dict(scalars["train/actor/loss"])
    assert got.keys() == expected.keys()
    assert all(abs(got[s] - v) < 1e-6 for s, v in expected.items())
    client.force_login(admin_user)
    resp = client.get(f"/jobs/{job.name}/metrics/", HTTP_ACCEPT_LANGUAGE="en")
    page = resp.content.decode()
    assert 'id="metrics-charts"' in page and "/static/vendor/echarts.min.js" in page  # drawn by static/js/metrics.js
    groups = resp.context["chart_data"]["scalars"]  # grouped as TensorBoard groups tags
    assert [g["name"] for g in groups] == ["env", "train"]
    success = groups[0]["charts"][0]
    assert success["tag"] == "env/success_once" and success["series"][0]["run"] == "2026-01-01-run"
    assert success["series"][0]["points"][-1][:2] == [30, 1.0]  # [step, value, wall ms]
    api = client.get(f"/api/v1/jobs/{job.name}/metrics/").json()
    assert api["tensorboard"]["dir"] == "/data/tb" and api["tensorboard"]["readable"]
    assert api["tensorboard"]["scalars"]["env/success_once"][-1] == [30, 1.0]


def test_tensorboard_dir_missing_or_unreadable(job, monkeypatch):
    job, _ = job
    use_runtime(monkeypatch, ReportingRuntime(None))
    assert metrics_service.tensorboard_source(job).reason == "missing"
    job.tasks.update(cluster=Cluster.objects.create(name="k8s", runtime="kubernetes"))
    assert metrics_service.tensorboard_source(job).reason == "not_local"


def test_sparkline_is_numbers_only():
    svg = metrics_service.sparkline_svg([1, 2, 3], label="<script>x</script>")
    assert "<script>" not in svg and "&lt;script&gt;" in svg
    assert metrics_service.sparkline_svg([]) == ""


def test_diagnosis_and_runcheck_pages(job, monkeypatch, client, admin_user, bob):
    job, _ = job
    use_runtime(monkeypatch, ReportingRuntime(None))
    client.force_login(admin_user)
    page = client.get(f"/jobs/{job.name}/diagnosis/", HTTP_ACCEPT_LANGUAGE="en").content.decode()
    assert 'data-testid="worker-timeline" data-pod="job-header-0"' in page
    assert "Head run script" in page and 'data-testid="no-findings"' in page
    page = client.get(f"/jobs/{job.name}/diagnosis/").content.decode()  # zh-hans default
    assert "诊断" in page and "Head 运行脚本" in page
    api = client.get(f"/api/v1/jobs/{job.name}/diagnosis/").json()
    assert [w["lastStage"] for w in api["workers"]] == ["run_script", "head_reachable"]
    page = client.get(f"/jobs/{job.name}/run-check/", HTTP_ACCEPT_LANGUAGE="en").content.decode()
    assert page.count('data-testid="check"') == 5
    zh = client.get(f"/jobs/{job.name}/run-check/", HTTP_ACCEPT_LANGUAGE="zh-hans").content.decode()
    # seed 02: "请以上面五项结果为准" follows the five checks, so it stands below them (fresh-clone trial)
    assert zh.rindex('data-testid="check"') < zh.index("请以上面五项结果为准")
    resp = client.post(
        f"/jobs/{job.name}/run-check/",
        {"progress_pattern": "(", "app_patterns": "", "output_path": "", "max_wait_minutes": "10"},
    )
    assert resp.status_code == 400
    resp = client.post(
        f"/jobs/{job.name}/run-check/",
        {
            "progress_pattern": "Global Step",
            "app_patterns": "RLinf is running",
            "output_path": "/data/tb",
            "max_wait_minutes": "10",
        },
    )
    assert resp.status_code == 302
    job.refresh_from_db()
    assert job.run_check["max_wait_minutes"] == 10 and job.run_check["app_patterns"] == ["RLinf is running"]
    record = client.get(f"/jobs/{job.name}/run-check/record.md")
    assert record["Content-Type"].startswith("text/markdown")
    assert record.content.decode().startswith("# 任务运行检查记录\n")
    assert (
        client.put(
            f"/api/v1/jobs/{job.name}/run-check/", {"max_wait_minutes": 0}, content_type="application/json"
        ).json()["field"]
        == "max_wait_minutes"
    )
    # Another user's job is not found.
    client.force_login(bob)
    assert client.get(f"/jobs/{job.name}/diagnosis/").status_code == 404
    assert client.get(f"/api/v1/jobs/{job.name}/run-check/").status_code == 404


def test_sync_hook_samples_running_jobs_at_most_every_interval(job, monkeypatch):
    job, _ = job
    runtime = ReportingRuntime({"job-header-0": {"cpu": 2.0, "memory": 2**30}})
    use_runtime(monkeypatch, runtime)
    metrics_service._last_sync_sample.pop(job.pk, None)
    metrics_service.sample_during_sync(job)
    metrics_service.sample_during_sync(job)  # within the interval: no second call
    assert runtime.calls == 1
    assert MetricSample.objects.filter(job=job).count() == 1
    job.phase = "Succeeded"
    metrics_service._last_sync_sample.pop(job.pk, None)
    metrics_service.sample_during_sync(job)  # finished jobs are not sampled
    assert runtime.calls == 1
