"""Job list and detail pages, actions and the logs API (Django test client, in-memory runtime)."""

from __future__ import annotations

import pytest
from django.urls import reverse

from jobs.control import controller
from jobs.models import Job, Phase
from jobs.observe.sync import sync_job
from tests.fake_runtime import fake_clusters, job_document

pytestmark = pytest.mark.django_db

HEAD_READY = ["RLINF_NODE_RANK: 0", "Ray cluster is ready. Printing cluster information:", "Executing run script..."]


@pytest.fixture
def fake(monkeypatch, settings, tmp_path):
    return fake_clusters(monkeypatch, settings, tmp_path, {"alpha": "ns"})["alpha"]


def submit(owner, name="demo", display="") -> Job:
    job = Job.objects.create(name=name, owner=owner, display_name=display, spec=job_document(name))
    controller.request_reconcile(job)
    job.refresh_from_db()
    return job


def running(fake, job) -> Job:
    fake.set_running()
    fake.log(f"{job.name}-header-0", *HEAD_READY, "Global Step: 1/10 reward=9.0")
    sync_job(job)
    job.refresh_from_db()
    return job


def test_list_shows_real_columns_and_only_own_jobs(client, fake, alice, bob):
    job = running(fake, submit(alice, display="CartPole demo"))
    submit(bob, name="bobs-job")
    client.force_login(alice)
    html = client.get("/jobs/").content.decode()
    assert "demo" in html and "CartPole demo" in html
    assert "bobs-job" not in html
    assert 'data-testid="job-workers">3/3<' in html
    assert job.phase == Phase.RUNNING
    assert 'hx-trigger="every 10s' in html
    # runtime is a real duration, not a placeholder
    assert 'data-testid="job-runtime">—' not in html


def test_list_filters_search_and_pagination(client, fake, alice):
    for i in range(25):
        Job.objects.create(name=f"job-{i:02d}", owner=alice, spec=job_document(f"job-{i:02d}"))
    Job.objects.filter(name="job-03").update(phase=Phase.FAILED)
    client.force_login(alice)
    page1 = client.get("/jobs/").content.decode()
    assert page1.count('data-testid="job-row-') == 20
    assert 'data-testid="next-page"' in page1
    page2 = client.get("/jobs/?page=2").content.decode()
    assert page2.count('data-testid="job-row-') == 5
    failed = client.get("/jobs/?phase=Failed").content.decode()
    assert failed.count('data-testid="job-row-') == 1 and "job-03" in failed
    found = client.get("/jobs/?q=job-1").content.decode()
    assert found.count('data-testid="job-row-') == 10
    partial = client.get("/jobs/?q=job-1", HTTP_HX_REQUEST="true").content.decode()
    assert partial.lstrip().startswith('<div id="job-table"') and "<html" not in partial


def test_list_empty_state_in_both_languages(client, fake, alice):
    client.force_login(alice)
    assert "还没有任务" in client.get("/jobs/", HTTP_ACCEPT_LANGUAGE="zh-hans").content.decode()
    client.cookies["django_language"] = "en"
    assert "No jobs yet" in client.get("/jobs/").content.decode()


def test_detail_tabs(client, fake, alice):
    job = submit(alice)
    client.force_login(alice)
    url = reverse("jobs:detail", args=[job.name])
    workers = client.get(url + "?tab=workers").content.decode()
    assert 'data-testid="worker-demo-rollout-1"' in workers
    # Pods exist after the immediate sync, but not yet running.
    html = client.get(url + "?tab=overview").content.decode()
    assert "demo-header" in html and "python train.py" in html and "rlinf/rlinf:demo-1" in html
    job = running(fake, job)
    workers = client.get(url + "?tab=workers").content.decode()
    assert workers.count('data-phase="Running"') == 3
    assert "alpha-node-0" in workers and "127.0.0.1" in workers
    yaml_tab = client.get(url + "?tab=yaml").content.decode()
    assert "apiVersion: rlinf.io/v1alpha1" in yaml_tab
    logs_tab = client.get(url + "?tab=logs").content.decode()
    assert 'data-testid="logs-panel"' in logs_tab and "demo-header-0" in logs_tab
    assert "/api/v1/jobs/demo/logs/?pod=demo-header-0&amp;tail=1000" in logs_tab
    fragment = client.get(reverse("jobs:log", args=[job.name]) + "?pod=demo-header-0").content.decode()
    assert "Ray cluster is ready" in fragment and "Global Step: 1/10" in fragment
    live = client.get(url + "?tab=workers", HTTP_HX_REQUEST="true").content.decode()
    assert "<html" not in live and "demo-rollout-0" in live


def test_workers_before_first_sync_say_waiting(client, fake, alice, settings):
    job = Job.objects.create(name="fresh", owner=alice, spec=job_document("fresh"))
    controller.reconcile(job)
    client.force_login(alice)
    html = client.get("/jobs/fresh/?tab=workers", HTTP_ACCEPT_LANGUAGE="zh-hans").content.decode()
    assert "暂无 Pod 详情，等待任务同步" in html
    client.cookies["django_language"] = "en"
    html = client.get("/jobs/fresh/?tab=workers").content.decode()
    assert "No Pod details yet, waiting for sync" in html


def test_log_fragment_escapes_html(client, fake, alice):
    job = running(fake, submit(alice))
    fake.log("demo-header-0", "<script>alert(1)</script>")
    client.force_login(alice)
    html = client.get(reverse("jobs:log", args=[job.name]) + "?pod=demo-header-0").content.decode()
    assert "<script>alert(1)</script>" not in html and "&lt;script&gt;" in html


def test_actions_stop_start_restart_delete(client, fake, alice):
    job = running(fake, submit(alice))
    client.force_login(alice)
    r = client.post(f"/jobs/{job.name}/stop/")
    assert r.status_code == 302
    job.refresh_from_db()
    assert job.phase == Phase.STOPPED and fake.pods == {}
    client.post(f"/jobs/{job.name}/start/")
    job.refresh_from_db()
    assert job.phase == Phase.PENDING and len(fake.pods) == 3 and job.attempt == 2
    client.post(f"/jobs/{job.name}/restart/")
    job.refresh_from_db()
    assert job.attempt == 3
    r = client.post(f"/jobs/{job.name}/delete/")
    assert r.status_code == 302 and r["Location"] == "/jobs/"
    assert not Job.objects.filter(name="demo").exists() and fake.pods == {}


def test_pages_and_actions_are_404_for_other_users(client, fake, alice, bob):
    job = submit(alice)
    client.force_login(bob)
    assert client.get(f"/jobs/{job.name}/").status_code == 404
    assert client.get(reverse("jobs:log", args=[job.name]) + "?pod=demo-header-0").status_code == 404
    assert client.post(f"/jobs/{job.name}/stop/").status_code == 404
    assert client.post(f"/jobs/{job.name}/delete/").status_code == 404
    job.refresh_from_db()
    assert not job.stopped


def test_admin_sees_every_job(client, fake, alice, admin_user):
    submit(alice)
    client.force_login(admin_user)
    assert "demo" in client.get("/jobs/").content.decode()
    assert client.get("/jobs/demo/").status_code == 200


def test_anonymous_is_sent_to_login(client, fake):
    r = client.get("/jobs/")
    assert r.status_code == 302 and "/login/" in r["Location"]


def test_logs_api(client, fake, alice, bob):
    job = running(fake, submit(alice))
    fake.log("demo-rollout-0", *[f"line {i}" for i in range(1500)])
    client.force_login(alice)
    base = f"/api/v1/jobs/{job.name}/logs/"
    r = client.get(base + "?pod=demo-rollout-0")
    assert r.status_code == 200 and r["Content-Type"].startswith("text/plain")
    lines = r.content.decode().splitlines()
    assert len(lines) == 1000 and lines[-1] == "line 1499"
    r = client.get(base + "?pod=demo-rollout-0&tail=5")
    assert r.content.decode().splitlines() == [f"line {i}" for i in range(1495, 1500)]
    r = client.get(base)  # default: the header
    assert "Ray cluster is ready" in r.content.decode()
    assert client.get(base + "?pod=demo-rollout-0&previous=true").status_code == 404
    assert client.get(base + "?pod=other-pod-0").status_code == 404
    assert client.get(base + "?tail=abc").status_code == 400
    client.force_login(bob)
    assert client.get(base + "?pod=demo-rollout-0").status_code == 404


def test_logs_api_serves_archived_log_after_stop(client, fake, alice):
    job = running(fake, submit(alice))
    client.force_login(alice)
    client.post(f"/jobs/{job.name}/stop/")
    assert fake.pods == {}
    r = client.get(f"/api/v1/jobs/{job.name}/logs/?pod=demo-header-0")
    assert r.status_code == 200 and "Global Step: 1/10" in r.content.decode()


def test_confirmation_texts_survive_quotes(client, fake, alice):
    job = running(fake, submit(alice))
    client.force_login(alice)
    client.cookies["django_language"] = "en"
    html = client.get(f"/jobs/{job.name}/").content.decode()
    assert 'data-confirm-title="Stop job &quot;demo&quot;?"' in html
    client.cookies["django_language"] = "zh-hans"
    html = client.get(f"/jobs/{job.name}/").content.decode()
    assert 'data-confirm-title="确定停止任务 &quot;demo&quot; 吗？"' in html
    assert "确认删除任务？" in html and "一键重启" in html and "编辑后重启" in html


def test_standard_messages_are_shown_in_the_users_language(client, fake, alice):
    job = running(fake, submit(alice))
    assert job.message == "All 3 Workers running"  # stored in English (API)
    client.force_login(alice)
    client.cookies["django_language"] = "zh-hans"
    html = client.get(f"/jobs/{job.name}/").content.decode()
    assert "全部 3 个 Worker 运行中" in html and "3/3 个 Worker 已就绪" in html
    client.cookies["django_language"] = "en"
    assert "All 3 Workers running" in client.get(f"/jobs/{job.name}/").content.decode()


def test_overview_names_why_workers_are_pending(client, fake, alice):
    job = submit(alice)
    fake.wait("demo-rollout-0", "ImagePullBackOff", 'Back-off pulling image "rlinf/rlinf:demo-1"')
    sync_job(job)
    client.force_login(alice)
    client.cookies["django_language"] = "en"
    html = client.get(f"/jobs/{job.name}/?tab=overview").content.decode()
    assert 'data-testid="pending-reasons"' in html
    assert "demo-rollout-0" in html and "cannot pull its image" in html


def test_previous_log_of_a_worker_that_never_restarted_says_so_in_the_users_language(client, fake, alice):
    """Fresh-clone trial: "Previous container" showed the runtime's English 'pod … not found' on a zh page."""
    job = running(fake, submit(alice))
    client.force_login(alice)
    url = reverse("jobs:log", args=[job.name]) + "?pod=demo-header-0&previous=1"
    zh = client.get(url, HTTP_ACCEPT_LANGUAGE="zh-hans").content.decode()
    assert "not found" not in zh and "demo-header-0" in zh
    client.cookies["django_language"] = "en"
    assert "demo-header-0 has no previous container instance." in client.get(url).content.decode()
