"""Diagnosis and Run check in a constant number of queries whatever the Worker count.

Reading Worker by Worker cost 209 queries for the Diagnosis tab and 206 for the Run check of a 20-role /
200-Worker job: one Task query (and a new runtime client) per Worker log. The job's Tasks and Pods are loaded once per
request, and the pages read each Worker's stored log scan (``jobs.models.PodLogScan``), not its log. Pinned here
at 3 and at 200 Workers, cold (no stored scan: every log read once, through one runtime per cluster) and warm
(fresh scans: no log read at all): the same count at both sizes, at most 15, and the page still shows what the
last Worker's log says (so the counts are not bought by skipping logs). The Workers views (the Workers tab, its
htmx refresh, the job in the API) are pinned the same way: 7 / 5 queries at 3 and at 200 Workers, no log read.
"""

from __future__ import annotations

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from clusters.models import Cluster
from clusters.runtime import registry
from jobs.control import controller
from jobs.models import Job, Pod, PodLogScan
from jobs.observe import metrics
from jobs.observe.sync import sync_job
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
    """(queries, log reads, response) of one GET of ``url``."""
    before = fake.counts.get("read_log", 0)
    with CaptureQueriesContext(connection) as ctx:
        response = client.get(url)
    assert response.status_code == 200, url
    return len(ctx.captured_queries), fake.counts.get("read_log", 0) - before, response


PATHS = ["/api/v1/jobs/{}/diagnosis/", "/api/v1/jobs/{}/run-check/", "/jobs/{}/diagnosis/", "/jobs/{}/run-check/"]


def shows_last_worker(path: str, response, large: list[str]) -> None:
    text = response.content.decode()
    if path == "/api/v1/jobs/{}/diagnosis/":
        body = response.json()
        assert [f["pod"] for f in body["findings"] if f["code"] == "nccl"] == [large[-1]]
        assert len(body["workers"]) == 200 and body["workers"][-1]["rank"] == 199
        assert body["asOf"] and body["refreshing"] is False
    elif "diagnosis" in path:
        assert large[-1] in text and "NCCL error: unhandled" in text
    else:  # check 3 names the last Worker and its rank
        assert large[-1] in text and "RLINF_NODE_RANK: 199" in text


def test_diagnosis_and_run_check_queries_do_not_grow_with_workers(client, fake, alice):
    small = make_job(fake, alice, "small", SMALL)
    large = make_job(fake, alice, "large", LARGE)
    assert len(small) == 3 and len(large) == 200
    client.force_login(alice)
    counts = {}
    for path in PATHS:
        assert client.get(path.format("small")).status_code == 200  # per-process caches
        row = {}
        for name, workers in (("small", 3), ("large", 200)):
            PodLogScan.objects.filter(pod__task__job__name=name).delete()
            cold_q, cold_reads, cold = get(client, fake, path.format(name))
            warm_q, warm_reads, warm = get(client, fake, path.format(name))
            assert (cold_reads, warm_reads) == (workers, 0), path  # every log once, then none: stored scans
            row[name] = (cold_q, warm_q)
        counts[path] = row
        shows_last_worker(path, cold, large)
        shows_last_worker(path, warm, large)
        if path == PATHS[0]:
            assert warm.json() == cold.json()
    # The cold page writes all scans in one statement; SQLite caps a statement at 999 parameters, so Django splits
    # it there (every 142 Pods), PostgreSQL does not.
    fields = [f for f in PodLogScan._meta.concrete_fields if not f.primary_key]
    split = -(-200 // connection.ops.bulk_batch_size(fields, [None] * 200)) - 1
    for r in counts.values():
        assert r["large"] == (r["small"][0] + split, r["small"][1]), counts
        assert max(r["large"]) <= MAX_QUERIES, counts


# The Workers views: the Workers tab (HTML, also its 10 s htmx refresh of the live panel) and the job in the API
# (its Tasks with their Workers). Neither reads a log.
WORKER_PATHS = ["/jobs/{}/?tab=workers", "/api/v1/jobs/{}/"]


def test_workers_views_queries_do_not_grow_with_workers(client, fake, alice):
    small = make_job(fake, alice, "small", SMALL)
    large = make_job(fake, alice, "large", LARGE)
    client.force_login(alice)
    for path in WORKER_PATHS:
        assert client.get(path.format("small")).status_code == 200  # per-process caches
        counts = {}
        for name in ("small", "large"):
            queries, reads, response = get(client, fake, path.format(name))
            assert reads == 0, path
            counts[name] = queries
            text = response.content.decode()
            names = small if name == "small" else large
            assert names[-1] in text and names[0] in text, path  # the first and the last Worker are on the page
        assert counts["small"] == counts["large"] <= MAX_QUERIES, (path, counts)
    htmx = {}
    for name in ("small", "large"):
        with CaptureQueriesContext(connection) as ctx:
            response = client.get(f"/jobs/{name}/?tab=workers", HTTP_HX_REQUEST="true")
        assert response.status_code == 200
        htmx[name] = len(ctx.captured_queries)
    assert htmx["small"] == htmx["large"] <= MAX_QUERIES, htmx
