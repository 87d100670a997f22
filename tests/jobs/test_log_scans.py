"""Stored log scans behind the Diagnosis tab and the Run check (``jobs.observe.log_scans``).

A first visit scans every Worker's log (the page is never empty); later visits within ``RLARK_LOG_SCAN_MAX_AGE``
read no log at all and say how old the results are; older scans are refreshed in the background (one task per job
at a time) by reading only what each log appended. A new Pod instance, or Run check patterns the scan did not
follow from the start, scan the log again; an ended Pod's log is read to its end once; a Pod that is gone is
scanned from its archived log.
"""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.core.cache import cache
from django.utils import timezone

from clusters.models import Cluster
from clusters.runtime import registry
from jobs import tasks as job_tasks
from jobs.control import controller, log_archive
from jobs.models import Job, Pod, PodLogScan
from jobs.observe import log_markers as lm
from jobs.observe import log_scans, metrics
from jobs.observe.sync import sync_job
from tests.fake_runtime import FakeRuntime, job_document

pytestmark = pytest.mark.django_db

HEAD = ["RLINF_NODE_RANK: 0", "Ray cluster is ready. Printing cluster information:", "Executing run script..."]
DIAG = "/api/v1/jobs/demo/diagnosis/"


@pytest.fixture
def fake(monkeypatch, settings, tmp_path):
    settings.CELERY_TASK_ALWAYS_EAGER = True
    settings.VAR_DIR = tmp_path
    cache.clear()  # the refresh locks of an earlier test's job
    runtime = FakeRuntime("alpha")
    monkeypatch.setattr(registry, "runtime_for", lambda cluster: runtime)
    monkeypatch.setattr(metrics, "SAMPLE_MIN_INTERVAL", 1e9)
    Cluster.objects.create(name="alpha", runtime="local", namespace="ns", status="online")
    return runtime


@pytest.fixture
def job(fake, alice) -> Job:
    job = Job.objects.create(name="demo", owner=alice, spec=job_document("demo"))
    controller.request_reconcile(job)
    fake.set_running()
    fake.log("demo-header-0", *HEAD)
    fake.log("demo-rollout-0", "RLINF_NODE_RANK: 1", "Head is reachable at 10.0.0.1:6379")
    fake.log("demo-rollout-1", "RLINF_NODE_RANK: 2", "Head is reachable at 10.0.0.1:6379")
    sync_job(job)
    assert Pod.objects.filter(task__job=job).count() == 3
    return job


@pytest.fixture
def fed(monkeypatch) -> list[str]:
    """The texts the scans were fed."""
    seen: list[str] = []
    real = lm.ScanState.feed

    def spy(self, text):
        seen.append(text)
        return real(self, text)

    monkeypatch.setattr(lm.ScanState, "feed", spy)
    return seen


def reads(fake: FakeRuntime) -> int:
    return fake.counts.get("read_log", 0)


def age_scans(seconds: float = 60) -> None:
    PodLogScan.objects.update(updated_at=timezone.now() - timedelta(seconds=seconds))


def nccl(client) -> list[tuple[str, int]]:
    body = client.get(DIAG).json()
    return [(f["pod"], f["lineNo"]) for f in body["findings"] if f["code"] == "nccl"]


def test_pages_read_stored_scans_then_only_what_the_logs_appended(client, fake, job, alice, fed):
    client.force_login(alice)
    before = reads(fake)
    body = client.get(DIAG).json()  # first visit: every log scanned, here and now
    assert reads(fake) - before == 3 and body["asOf"] and body["refreshing"] is False
    assert [w["lastStage"] for w in body["workers"]] == ["run_script", "head_reachable", "head_reachable"]
    assert {r.pod.name: (r.instance, r.lines) for r in PodLogScan.objects.select_related("pod")} == {
        p.name: (f"{p.uid}:0", len(fake.pod(p.name).log)) for p in Pod.objects.all()
    }

    fake.log("demo-rollout-1", "NCCL error: unhandled system error")
    before = reads(fake)
    again = client.get(DIAG).json()  # fresh scans: no log read, the stored results and their time
    assert reads(fake) == before and again == body and nccl(client) == []

    age_scans()  # older than RLARK_LOG_SCAN_MAX_AGE (eager mode: refreshed in this request)
    fed.clear()
    before = reads(fake)
    assert nccl(client) == [("demo-rollout-1", 3)]
    assert reads(fake) - before == 3
    assert [t for t in fed if t] == ["NCCL error: unhandled system error\n"]  # only the new line: the rest is stored
    assert PodLogScan.objects.get(pod__name="demo-rollout-1").lines == 3


def test_stale_scans_are_refreshed_once_in_the_background(
    client, fake, job, alice, settings, monkeypatch, django_capture_on_commit_callbacks
):
    settings.CELERY_TASK_ALWAYS_EAGER = False
    queued: list[int] = []
    monkeypatch.setattr(job_tasks.refresh_log_scans, "delay", queued.append)
    client.force_login(alice)
    assert client.get(DIAG).json()["refreshing"] is False  # no scans yet: scanned synchronously
    fake.log("demo-rollout-0", "NCCL error: timeout")
    age_scans(30)
    before = reads(fake)
    with django_capture_on_commit_callbacks(execute=True):
        page = client.get("/jobs/demo/diagnosis/", HTTP_ACCEPT_LANGUAGE="en").content.decode()
        zh = client.get("/jobs/demo/diagnosis/", HTTP_ACCEPT_LANGUAGE="zh-hans").content.decode()
        body = client.get(DIAG).json()
    assert reads(fake) == before  # the pages read no log
    assert queued == [job.pk]  # one refresh asked for, however many views
    assert "(30s ago)." in page and "Newer log lines are being read in the background" in page
    assert "（30s 前）" in zh and "正在后台读取新的日志行" in zh
    assert body["refreshing"] is True and nccl(client) == []

    job_tasks.refresh_log_scans(job.pk)  # the worker runs the task
    assert reads(fake) - before == 3
    body = client.get(DIAG).json()
    assert body["refreshing"] is False and [f["pod"] for f in body["findings"] if f["code"] == "nccl"] == [
        "demo-rollout-0"
    ]
    page = client.get("/jobs/demo/diagnosis/", HTTP_ACCEPT_LANGUAGE="en").content.decode()
    assert "(0s ago)." in page and "Newer log lines" not in page


def test_a_new_pod_instance_is_scanned_from_its_start(client, fake, job, alice):
    client.force_login(alice)
    client.get(DIAG)
    fake.log("demo-rollout-0", "NCCL error: timeout")
    fake.terminate("demo-rollout-0", 1, restart=True)  # a new container: a new log
    fake.log("demo-rollout-0", "RLINF_NODE_RANK: 1", "Executing prepare script...")
    sync_job(job)
    assert Pod.objects.get(name="demo-rollout-0").restart_count == 1
    body = client.get(DIAG).json()  # the stored scan is of the old instance: scanned again, synchronously
    worker = next(w for w in body["workers"] if w["pod"] == "demo-rollout-0")
    assert worker["lastStage"] == "prepare" and [m["lineNo"] for m in worker["timeline"]] == [1, 2]
    assert nccl(client) == []
    assert PodLogScan.objects.get(pod__name="demo-rollout-0").instance.endswith(":1")


def test_new_run_check_patterns_scan_the_logs_again(client, fake, job, alice):
    client.force_login(alice)
    fake.log("demo-header-0", "[RLinf] config sha 1234abcd", "Global Step: 1/100")
    assert client.get("/api/v1/jobs/demo/run-check/").json()["checks"][4]["status"] != "not_met"
    before = reads(fake)
    client.get("/api/v1/jobs/demo/run-check/")
    assert reads(fake) == before
    job.run_check = {"app_patterns": [r"config sha \w+"]}
    job.save()
    checks = client.get("/api/v1/jobs/demo/run-check/", HTTP_ACCEPT_LANGUAGE="en").json()["checks"]
    assert reads(fake) - before == 3  # a pattern the scans did not follow: every log scanned again
    assert any("line 4: [RLinf] config sha 1234abcd" in e for e in checks[3]["evidence"]), checks[3]


def test_an_ended_pod_is_read_to_its_end_once(client, fake, job, alice, settings):
    settings.RLARK_LOG_SCAN_MAX_AGE = 0
    fake.log("demo-rollout-1", "Ray worker process exited with code 0", "Stopping Ray worker...")
    fake.terminate("demo-rollout-1", 0)
    sync_job(job)
    assert Pod.objects.get(name="demo-rollout-1").phase == "Succeeded" and len(fake.pods) == 3  # none archived
    client.force_login(alice)
    body = client.get(DIAG).json()
    worker = next(w for w in body["workers"] if w["pod"] == "demo-rollout-1")
    assert worker["timeline"][-1]["key"] == "stopping"
    assert [r.pod.name for r in PodLogScan.objects.filter(final=True)] == ["demo-rollout-1"]
    before = reads(fake)
    client.get(DIAG)  # max age 0: the running Pods' logs are read again, the ended one's not
    assert reads(fake) - before == 2


def test_a_pod_that_is_gone_is_scanned_from_its_archive(client, fake, job, alice):
    path = log_archive.path_for("demo", "demo-rollout-0").with_suffix("")  # a plain .log archive
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("RLINF_NODE_RANK: 1\nHead is reachable at 10.0.0.1:6379\nNCCL error: timeout\n")
    del fake.pods[("ns", "demo-rollout-0")]
    client.force_login(alice)
    assert nccl(client) == [("demo-rollout-0", 3)]
    record = PodLogScan.objects.get(pod__name="demo-rollout-0")
    assert record.cursor == log_scans.ARCHIVE and record.final


def test_the_refresh_task_writes_all_records_in_one_statement(fake, job, django_assert_max_num_queries):
    with django_assert_max_num_queries(5):  # the job, Tasks, Pods, scans; one write
        job_tasks.refresh_log_scans(job.pk)
    assert PodLogScan.objects.count() == 3
    with django_assert_max_num_queries(4):  # nothing stale: nothing read, nothing written
        job_tasks.refresh_log_scans(job.pk)
