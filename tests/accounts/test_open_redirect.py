"""``next`` is followed only to this console (url_has_allowed_host_and_scheme everywhere)."""

from __future__ import annotations

import pytest

from clusters.models import Cluster, Node
from tests.jobs.test_job_pages import fake, running, submit  # noqa: F401 (fixture)

pytestmark = pytest.mark.django_db

EVIL = ["//evil.example/x", "https://evil.example/", "/\\evil.example", "\\\\evil.example", "javascript:alert(1)"]


@pytest.mark.parametrize("target", EVIL)
def test_job_action_next_stays_on_the_console(client, fake, alice, target):  # noqa: F811
    job = running(fake, submit(alice))
    client.force_login(alice)
    r = client.post(f"/jobs/{job.name}/stop/", {"next": target})
    assert r.status_code == 302 and r["Location"] == f"/jobs/{job.name}/"
    assert client.post(f"/jobs/{job.name}/start/", {"next": "/jobs/?phase=Running"})["Location"] == (
        "/jobs/?phase=Running"
    )


@pytest.mark.parametrize("target", EVIL)
def test_cordon_and_admin_login_next(client, admin_user, target):
    cluster = Cluster.objects.create(name="c1", runtime="local", namespace="ns", status="online")
    Node.objects.create(cluster=cluster, name="n1")
    client.force_login(admin_user)
    r = client.post("/clusters/nodes/c1/n1/cordon/", {"next": target})
    assert r.status_code == 302 and "evil" not in r["Location"] and not r["Location"].startswith("javascript")
    r = client.get("/admin/login/", {"next": target})
    assert r.status_code == 302 and "evil" not in r["Location"]
