"""Committed query-count baseline of every list and detail API endpoint and page (docs/api-standards.md).

Each URL is fetched twice (the first warms per-process caches) and the second GET's number of SQL queries is
compared with ``tests/console/query_counts.json`` (one section per database vendor: SQLite locally, PostgreSQL in CI).
A count that grows fails the test; one that shrinks is reported, so the baseline can be lowered. Refresh it after
a deliberate change with::

    RLARK_UPDATE_QUERY_BASELINE=1 .venv/bin/pytest tests/console/test_query_baseline.py
    DATABASE_URL=postgres://postgres@127.0.0.1:5432/test RLARK_UPDATE_QUERY_BASELINE=1 \\
        .venv/bin/pytest tests/console/test_query_baseline.py

The world: one user's 3 jobs on a local cluster (one running, 3 Workers, with logs), a storage class, an image
registry, an SSH key, a domain, an API token and audit events; pages as the owner, back office as staff.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from accounts.authentication import issue_token
from clusters.models import Cluster, ImageRegistry
from clusters.runtime import registry
from domains.models import Domain
from jobs.control import controller
from jobs.models import Job
from jobs.observe import metrics
from jobs.observe.sync import sync_job
from sshkeys.models import SSHPublicKey
from storage.models import StorageClass
from tests.fake_runtime import FakeRuntime, job_document

pytestmark = pytest.mark.django_db

BASELINE = Path(__file__).with_name("query_counts.json")
HEAD_READY = ["RLINF_NODE_RANK: 0", "Ray cluster is ready. Printing cluster information:", "Executing run script..."]

OWNER_URLS = [
    # API: collections
    "/api/v1/jobs/",
    "/api/v1/clusters/",
    "/api/v1/nodes/",
    "/api/v1/storage-classes/",
    "/api/v1/ssh-keys/",
    "/api/v1/domains/",
    "/api/v1/tokens/",
    "/api/v1/log-archives/",
    # API: details
    "/api/v1/jobs/demo/",
    "/api/v1/jobs/demo/logs/?pod=demo-header-0&tail=100",
    "/api/v1/jobs/demo/diagnosis/",
    "/api/v1/jobs/demo/run-check/",
    "/api/v1/jobs/demo/metrics/",
    "/api/v1/clusters/alpha/",
    # pages
    "/",
    "/jobs/",
    "/jobs/demo/",
    "/jobs/demo/diagnosis/",
    "/jobs/demo/run-check/",
    "/jobs/demo/metrics/",
    "/clusters/",
    "/storage/",
    "/ssh-keys/",
    "/log-archives/",
    "/account/tokens/",
]
STAFF_URLS = [
    "/domains/",
    "/api/v1/domains/d1/",
    "/domains/d1/",
    "/api/v1/image-registries/",
    "/api/v1/image-registries/corp/",
    "/api/v1/audit/",
    "/admin/jobs/job/",
    "/admin/jobs/job/?p=0&q=demo",
]


@pytest.fixture
def world(monkeypatch, settings, tmp_path, alice, admin_user):
    settings.CELERY_TASK_ALWAYS_EAGER = True
    settings.VAR_DIR = tmp_path
    runtime = FakeRuntime("alpha")
    monkeypatch.setattr(registry, "runtime_for", lambda cluster: runtime)
    monkeypatch.setattr(metrics, "SAMPLE_MIN_INTERVAL", 1e9)  # a page view never samples: counts stay stable
    cluster = Cluster.objects.create(name="alpha", runtime="local", namespace="ns", status="online")
    StorageClass.objects.create(cluster=cluster, name="oss", provider="kubernetes")
    ImageRegistry.objects.create(name="corp", registry="registry.corp.example", username="u", password="p")
    SSHPublicKey.objects.create(
        owner=alice,
        name="laptop",
        key="ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIbaseline",
        key_type="ssh-ed25519",
        fingerprint="fp",
    )
    Domain.objects.create(name="d1", cidr="10.88.0.0/24")
    issue_token(alice, "ci")
    for name in ("demo", "other", "third"):
        job = Job.objects.create(name=name, owner=alice, spec=job_document(name))
        controller.request_reconcile(job)
    runtime.set_running()
    runtime.log("demo-header-0", *HEAD_READY, "Global Step: 1/10 reward=9.0")
    sync_job(Job.objects.get(name="demo"))
    return alice, admin_user


def measure(client, user, urls: list[str]) -> dict[str, int]:
    client.force_login(user)
    counts = {}
    for url in urls:
        client.get(url)  # warm-up
        with CaptureQueriesContext(connection) as ctx:
            response = client.get(url)
        assert response.status_code == 200, (url, response.status_code)
        counts[url] = len(ctx.captured_queries)
    return counts


def test_query_counts_do_not_grow(client, world):
    alice, staff = world
    counts = {**measure(client, alice, OWNER_URLS), **measure(client, staff, STAFF_URLS)}
    vendor = connection.vendor
    stored = json.loads(BASELINE.read_text()) if BASELINE.exists() else {}
    if os.environ.get("RLARK_UPDATE_QUERY_BASELINE") == "1":
        stored[vendor] = counts
        BASELINE.write_text(json.dumps(stored, indent=2, sort_keys=True) + "\n")
        return
    baseline = stored.get(vendor)
    assert baseline, f"no {vendor} section in {BASELINE.name}: refresh it (see this module's docstring)"
    missing = sorted(set(counts) - set(baseline))
    assert not missing, f"URLs without a baseline (refresh it): {missing}"
    grown = {url: (baseline[url], n) for url, n in counts.items() if n > baseline[url]}
    assert not grown, f"query counts grew (baseline, now): {grown}"
    shrunk = {url: (baseline[url], n) for url, n in counts.items() if n < baseline[url]}
    if shrunk:
        print(f"query counts shrank, lower the baseline: {shrunk}")
