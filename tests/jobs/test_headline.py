"""One status headline per state and honest labels once a job has ended: the detail
header, the Workers tab, the jobs list and the Metrics rows read them from ``jobs.observe.headline``."""

from __future__ import annotations

import re
from datetime import timedelta

import pytest
from django.utils import timezone

from jobs.models import Pod
from jobs.observe import metrics as metrics_service
from jobs.observe.headline import RAY_FORMING, job_headline
from tests.jobs.test_metrics import job  # noqa: F401 - the fixture: header + worker, both Pods Running

pytestmark = pytest.mark.django_db


def _ready_pods(job):  # noqa: F811
    Pod.objects.filter(task__job=job).update(phase="Running", container_state={"ready": True, "state": "running"})


def _detail(client, job, lang="en"):  # noqa: F811
    return client.get(f"/jobs/{job.name}/?tab=workers", HTTP_ACCEPT_LANGUAGE=lang).content.decode()


def _text(page, testid):
    m = re.search(rf'data-testid="{testid}"[^>]*>([^<]*)<', page)
    return m.group(1).strip() if m else None


def test_pending_with_all_workers_ready_has_one_headline(job, client, admin_user):  # noqa: F811
    job, _ = job
    _ready_pods(job)
    job.phase, job.message = "Pending", RAY_FORMING
    job.save()
    client.force_login(admin_user)
    page = _detail(client, job)
    assert _text(page, "status-sentence") == "All Workers started; waiting for the Ray cluster to form"
    assert "Workers are waiting to schedule or start" not in page
    assert page.count("waiting for the Ray cluster to form") == 1  # the message is not repeated below it
    assert _text(page, "workers-ready") == "2/2"
    zh = _detail(client, job, "zh-hans")
    assert _text(zh, "status-sentence") == "所有 Worker 已启动，等待 Ray 集群组建"


def test_pending_not_ready_keeps_its_detail_message(job, client, admin_user):  # noqa: F811
    job, _ = job
    job.phase, job.message = "Pending", "Waiting for Workers: 0/2 ready (Unschedulable)"
    job.save()
    Pod.objects.filter(task__job=job).update(phase="Pending")
    client.force_login(admin_user)
    page = _detail(client, job)
    assert _text(page, "status-sentence") == "Workers are waiting to schedule or start"
    assert _text(page, "job-message") == "Waiting for Workers: 0/2 ready (Unschedulable)"


def test_stopped_job_shows_zero_ready_and_ran_for(job, client, admin_user):  # noqa: F811
    job, _ = job
    _ready_pods(job)  # the last sync before the stop still saw them ready
    job.phase, job.stopped, job.message = "Stopped", True, "Job stopped"
    job.finished_at = job.started_at + timedelta(seconds=42)
    job.save()
    client.force_login(admin_user)
    page = _detail(client, job)
    assert _text(page, "workers-ready") == "0/2"
    assert _text(page, "running-for-label") == "Ran for" and _text(page, "running-for") == "42s"
    assert page.count(">Job stopped<") == 1
    listing = client.get("/jobs/", HTTP_ACCEPT_LANGUAGE="en").content.decode()
    assert 'style="width: 0%"' in listing and ">0/2<" in listing


def test_succeeded_job_workers_completed_and_list_bar_matches(job, client, admin_user):  # noqa: F811
    job, _ = job
    job.phase, job.message = "Succeeded", "Run script exited with code 0"
    job.finished_at = job.started_at + timedelta(seconds=90)
    job.save()
    Pod.objects.filter(name="job-header-0").update(phase="Succeeded", container_state={"state": "terminated"})
    Pod.objects.filter(name="job-worker-0").update(phase="Stopped", container_state={})
    job.tasks.update(ready_replicas=0)
    client.force_login(admin_user)
    page = _detail(client, job)
    phases = re.findall(r'data-testid="worker-phase" data-phase="([^"]+)">([^<]+)<', page)
    assert phases == [("Completed", "Completed"), ("Completed", "Completed")]  # one name, however each Pod ended
    assert "Stopped" not in "".join(label for _, label in phases)
    assert _text(page, "workers-ready") == "2/2" and "Worker · completed" in page
    assert _text(page, "running-for-label") == "Ran for" and _text(page, "running-for") == "1m 30s"
    listing = client.get("/jobs/", HTTP_ACCEPT_LANGUAGE="en").content.decode()
    assert 'style="width: 100%"' in listing and ">2/2<" in listing  # the bar and the count agree
    zh = _detail(client, job, "zh-hans")
    assert "已完成" in zh

    # every tab names a finished Worker the same (the fresh-clone trial found four names across tabs)
    for lang, word in [("en", "Completed"), ("zh-hans", "已完成")]:
        metrics = client.get(f"/jobs/{job.name}/metrics/", HTTP_ACCEPT_LANGUAGE=lang).content.decode()
        shown = re.findall(r'data-testid="metrics-worker-phase" data-phase="([^"]+)">([^<]+)<', metrics)
        assert shown == [("Completed", word), ("Completed", word)], shown
        diag = client.get(f"/jobs/{job.name}/diagnosis/", HTTP_ACCEPT_LANGUAGE=lang).content.decode()
        assert re.findall(r'data-testid="diag-worker-phase">([^<]+)<', diag) == [word, word]
        check = client.get(f"/jobs/{job.name}/run-check/", HTTP_ACCEPT_LANGUAGE=lang).content.decode()
        phase_word = "phase" if lang == "en" else "阶段"
        assert re.findall(rf"job-(?:header|worker)-0[:：][^<]*?{phase_word} ([^，,<]+)", check) == [word, word], lang
        workers = _detail(client, job, lang)
        labels = re.findall(r'data-testid="worker-phase" data-phase="[^"]+">([^<]+)<', workers)
        assert labels == [word, word]


def test_pod_age_stops_when_the_job_ends(job):  # noqa: F811
    job, _ = job
    now = timezone.now()
    job.phase, job.finished_at = "Succeeded", now - timedelta(seconds=10)
    job.save()
    rows = {r.pod: r for r in metrics_service.worker_metrics(job, now=now)}
    created = Pod.objects.get(name="job-header-0").created_at
    assert rows["job-header-0"].age_seconds == int((job.finished_at - created).total_seconds()) == 55
    assert rows["job-worker-0"].phase == "Completed"


def test_headline_counts_and_bar_agree_for_every_state(job):  # noqa: F811
    job, _ = job
    for phase, stopped, ready, expected in [
        ("Running", False, 2, ("active", 2, 100)),
        ("Pending", False, 1, ("waiting", 1, 50)),
        ("Pending", False, 2, ("forming", 2, 100)),
        ("Succeeded", False, 0, ("completed", 2, 100)),
        ("Failed", False, 2, ("failed", 0, 0)),
        ("Stopped", True, 2, ("stopped", 0, 0)),
    ]:
        job.phase, job.stopped, job.message = phase, stopped, ""
        h = job_headline(job, ready, 2)
        assert (h.key, h.ready, h.percent) == expected, phase


def test_a_failed_jobs_conditions_read_in_the_pages_language(job, client, admin_user):  # noqa: F811
    """The Conditions table names the type and status in the page's language (it showed "Failed True" on zh
    pages); the reason stays the machine's code, the API keeps the Kubernetes-style values."""
    from jobs.jobspec.conditions import set_condition

    job, _ = job
    job.phase, job.message = "Failed", "Image cannot be pulled: ErrImagePull"
    job.conditions = set_condition(
        set_condition([], "Failed", True, "ImagePull", job.message), "ClusterReachable", False, "Offline", "down"
    )
    job.save()
    client.force_login(admin_user)

    def cells(lang, name):
        page = client.get(f"/jobs/{job.name}/?tab=overview", HTTP_ACCEPT_LANGUAGE=lang).content.decode()
        return re.findall(rf'data-testid="condition-{name}"[^>]*>([^<]*)<', page)

    assert cells("zh-hans", "type") == ["失败", "集群可达"]
    assert cells("zh-hans", "status") == ["是", "否"]
    assert cells("zh-hans", "reason") == ["ImagePull", "Offline"]
    assert cells("en", "type") == ["Failed", "Cluster reachable"]
    assert cells("en", "status") == ["True", "False"]
    api = client.get(f"/api/v1/jobs/{job.name}/", HTTP_ACCEPT_LANGUAGE="zh-hans").json()
    assert [(c["type"], c["status"]) for c in api["status"]["conditions"]] == [
        ("Failed", "True"),
        ("ClusterReachable", "False"),
    ]
