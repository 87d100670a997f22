"""``GET /api/v1/jobs/{name}/logs/?pod=``: a Pending Worker answers 409 with the Logs tab's sentence (en, zh) and
``X-Log-State: pending``; a started Worker that wrote nothing answers 200 with no text, so a client tells them
apart (the real control plane's Pending Pod: ``tests/k8s_real/test_refused_pods_real.py``)."""

from __future__ import annotations

import pytest
from rest_framework.test import APIClient

from jobs.control import controller
from jobs.models import Job
from jobs.observe.sync import sync_job
from tests.fake_runtime import fake_clusters, job_document

pytestmark = pytest.mark.django_db


@pytest.fixture
def fake(monkeypatch, settings, tmp_path):
    return fake_clusters(monkeypatch, settings, tmp_path, {"alpha": "ns-alpha"})["alpha"]


def test_pending_worker_log_is_409_and_a_started_empty_one_is_200(fake, alice, bob):
    job = Job.objects.create(name="demo", owner=alice, spec=job_document("demo"))
    controller.request_reconcile(job)
    fake.set_running("demo-header-0")  # the rollouts stay Pending
    sync_job(Job.objects.get(pk=job.pk))
    api = APIClient()
    api.force_authenticate(alice)

    resp = api.get("/api/v1/jobs/demo/logs/?pod=demo-rollout-0", HTTP_ACCEPT_LANGUAGE="en")
    assert resp.status_code == 409 and resp["X-Log-State"] == "pending"
    assert resp["Content-Type"].startswith("text/plain")
    assert resp.content.decode() == "Pod demo-rollout-0 is Pending; no logs yet.\n"
    resp = api.get("/api/v1/jobs/demo/logs/?pod=demo-rollout-0", HTTP_ACCEPT_LANGUAGE="zh-hans")
    assert resp.status_code == 409 and resp.content.decode() == "Pod demo-rollout-0 处于 Pending 状态，暂无日志。\n"

    resp = api.get("/api/v1/jobs/demo/logs/?pod=demo-header-0")  # Running, nothing written yet
    assert resp.status_code == 200 and resp.content == b"" and "X-Log-State" not in resp

    fake.log("demo-rollout-1", "prepare: downloading")  # a Pending Pod that wrote lines shows them
    assert api.get("/api/v1/jobs/demo/logs/?pod=demo-rollout-1").content == b"prepare: downloading\n"

    other = APIClient()
    other.force_authenticate(bob)  # another user's job: 404, not its state
    assert other.get("/api/v1/jobs/demo/logs/?pod=demo-rollout-0").status_code == 404
