"""Diagnosis and Run check in a constant number of queries whatever the Worker count (issue 18).

Issue 18 measured 209 queries for the Diagnosis tab and 206 for the Run check of a 20-role / 200-Worker job:
one Task query (and a new runtime client) per Worker log. The job's Tasks and Pods are now loaded once per
request and every Worker's log read once, through one runtime per cluster. Pinned here at 3 and at 200 Workers:
the same count at both sizes, at most 15, each log read once, and the page still shows what the last Worker's
log says (so the counts are not bought by skipping logs).
"""

from __future__ import annotations

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from clusters.models import Cluster
from clusters.runtime import registry
from jobs.models import Job, Pod
from jobs.services import controller, metrics
from jobs.services.sync import sync_job
from tests.fake_runtime import FakeRuntime, job_document

pytestmark = pytest.mark.django_db

MAX_QUERIES = 15
HEAD = ["RLINF_NODE_RANK: 0", "Ray cluster is ready. Printing cluster information:", "Executing run script..."]
SMALL = [("header", True, 1), ("rollout", False, 2)]  # 3 Workers
LARGE = [("header", True, 1)] + [(f"rollout{i:02d}", False, 11 if i < 9 else 10) for i in range(19)]  # 200


@pytest.fixture
def fake(monkeypatch, settings, tmp_path):
    settings.CELERY_TASK_ALWAYS_EAGER = True
    settings.VAR_DIR = tmp_path
    runtime = FakeRuntime("alpha")
    monkeypatch.setattr(registry, "runtime_for", lambda cluster: runtime)
    monkeypatch.setattr(metrics, "SAMPLE_MIN_INTERVAL", 1e9)
    Cluster.objects.create(name="alpha", runtime="local", namespace="ns", status="online")
    return runtime


def make_job(fake: FakeRuntime, owner, name: str, roles) -> list[str]:
    """A running job of ``roles`` with wrapper logs; the last Worker's log has an NCCL error. Returns its
    Worker Pod names in rank order."""
    job = Job.objects.create(name=name, owner=owner, spec=job_document(name, roles=roles))
    controller.request_reconcile(job)
    fake.set_running()
    pods: list[str] = []
    rank = 0
    for template, head, replicas in roles:
        for k in range(replicas):
            pod = f"{name}-{template}-{k}"
            pods.append(pod)
            if head:
                fake.log(pod, *HEAD)
            else:
                fake.log(pod, f"RLINF_NODE_RANK: {rank}", "Head is reachable at 10.0.0.1:6379")
            rank += 1
    fake.log(pods[-1], "NCCL error: unhandled system error, NCCL version 2.18")
    sync_job(job)
    assert Pod.objects.filter(task__job=job).count() == len(pods)
    return pods


def get(client, fake: FakeRuntime, url: str) -> tuple[int, int, object]:
    """(queries, log reads, response) of the second GET of ``url``."""
    assert client.get(url).status_code == 200, url
    before = fake.counts.get("read_log", 0)
    with CaptureQueriesContext(connection) as ctx:
        response = client.get(url)
    assert response.status_code == 200, url
    return len(ctx.captured_queries), fake.counts.get("read_log", 0) - before, response


PATHS = ["/api/v1/jobs/{}/diagnosis/", "/api/v1/jobs/{}/run-check/", "/jobs/{}/diagnosis/", "/jobs/{}/run-check/"]


def test_diagnosis_and_run_check_queries_do_not_grow_with_workers(client, fake, alice):
    small = make_job(fake, alice, "small", SMALL)
    large = make_job(fake, alice, "large", LARGE)
    assert len(small) == 3 and len(large) == 200
    client.force_login(alice)
    counts = {}
    for path in PATHS:
        small_q, small_reads, _ = get(client, fake, path.format("small"))
        large_q, large_reads, response = get(client, fake, path.format("large"))
        counts[path] = (small_q, large_q)
        assert (small_reads, large_reads) == (3, 200), path  # every Worker's log once, none twice
        text = response.content.decode()
        if path == "/api/v1/jobs/{}/diagnosis/":
            body = response.json()
            assert [f["pod"] for f in body["findings"] if f["code"] == "nccl"] == [large[-1]]
            assert len(body["workers"]) == 200 and body["workers"][-1]["rank"] == 199
        elif "diagnosis" in path:
            assert large[-1] in text and "NCCL error: unhandled" in text
        else:  # check 3 names the last Worker and its rank
            assert large[-1] in text and "RLINF_NODE_RANK: 199" in text
    assert all(small_q == large_q <= MAX_QUERIES for small_q, large_q in counts.values()), counts
