"""Workers of a job with a network domain get virtual IPs during the status sync (seed 04, upstream 12.2):
lowest free first, never .0/.255, the same address across restarts of the same Pod, released when gone."""

from __future__ import annotations

import pytest

from domains.models import Domain, IPAllocation
from jobs.control import controller
from jobs.models import Job, Pod
from jobs.observe.status import job_status
from jobs.observe.sync import sync_all_clusters, sync_job
from tests.fake_runtime import job_document
from tests.jobs.test_sync import runtimes  # noqa: F401 - fixture

pytestmark = pytest.mark.django_db


def _submit(owner, name: str, domain: str | None) -> Job:
    doc = job_document(name)
    if domain:
        doc["spec"]["domain"] = domain
    job = Job.objects.create(name=name, owner=owner, spec=doc)
    controller.request_reconcile(job)
    job.refresh_from_db()
    return job


def _ips(job: Job) -> dict[str, str]:
    return dict(Pod.objects.filter(task__job=job).values_list("name", "domain_ip"))


def test_workers_get_lowest_free_addresses_and_keep_them(runtimes, alice):  # noqa: F811
    Domain.objects.create(name="net", cidr="10.0.0.0/23")
    IPAllocation.objects.bulk_create(
        [IPAllocation(domain=Domain.objects.get(), ip=f"10.0.0.{i}", pod_key=f"x/y/old-{i}") for i in range(1, 254)]
    )
    job = _submit(alice, "demo", "net")
    runtimes["alpha"].set_running()
    sync_job(job)
    ips = _ips(job)
    # 10.0.0.1-253 are taken by the (live, below) fillers; .254 is free, .255 and 10.0.1.0 are reserved
    assert sorted(ips.values()) == ["10.0.0.254", "10.0.1.1", "10.0.1.2"]
    assert job_status(job)["workers"][0]["domainIp"] in ips.values()

    runtimes["alpha"].terminate("demo-rollout-1", exit_code=1, restart=True)
    sync_job(job)
    assert _ips(job) == ips  # same Pod name keeps its address across a restart


def test_full_sync_releases_addresses_of_gone_workers(runtimes, alice):  # noqa: F811
    Domain.objects.create(name="net", cidr="10.1.0.0/24")
    job = _submit(alice, "demo", "net")
    other = _submit(alice, "plain", None)
    runtimes["alpha"].set_running()
    sync_all_clusters(force=True)
    assert sorted(_ips(job).values()) == ["10.1.0.1", "10.1.0.2", "10.1.0.3"]
    assert set(_ips(other).values()) == {""}  # no domain, no address
    controller.stop(job)
    sync_all_clusters(force=True)
    assert IPAllocation.objects.filter(job="demo").count() == 0


def test_delete_releases_addresses(runtimes, alice):  # noqa: F811
    Domain.objects.create(name="net", cidr="10.2.0.0/24")
    job = _submit(alice, "demo", "net")
    runtimes["alpha"].set_running()
    sync_job(job)
    assert IPAllocation.objects.filter(job="demo").count() == 3
    controller.delete(job)
    assert not IPAllocation.objects.exists()


def test_full_sync_keeps_addresses_recorded_for_names_that_are_no_console_job(runtimes, alice):  # noqa: F811
    domain = Domain.objects.create(name="net", cidr="10.3.0.0/24")
    IPAllocation.objects.create(domain=domain, ip="10.3.0.9", pod_key="edge/rlark-system/robot-0", job="robot-cell")
    job = _submit(alice, "demo", "net")
    runtimes["alpha"].set_running()
    sync_all_clusters(force=True)
    assert IPAllocation.objects.filter(pod_key="edge/rlark-system/robot-0", ip="10.3.0.9").exists()
    assert "10.3.0.9" not in _ips(job).values()


def test_worker_table_shows_the_domain_ip(runtimes, alice, client):  # noqa: F811
    Domain.objects.create(name="net", cidr="10.4.0.0/24")
    job = _submit(alice, "demo", "net")
    runtimes["alpha"].set_running()
    sync_job(job)
    client.force_login(alice)
    html = client.get("/jobs/demo/?tab=workers", HTTP_ACCEPT_LANGUAGE="en").content.decode()
    ip = _ips(job)["demo-header-0"]
    assert f"net · {ip}" in html and "Network domain" in html
