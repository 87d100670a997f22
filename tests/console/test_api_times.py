"""One rule for API times: every datetime the API returns is ISO 8601 in UTC with ``Z`` -- Job,
status, conditions, metrics, SSH keys, clusters -- whatever the server's TIME_ZONE (Asia/Shanghai by default)."""

from __future__ import annotations

import re
import subprocess

import pytest
from django.utils import timezone

from rlark_console.apitime import normalise
from sshkeys import services as ssh_services
from tests.jobs.test_metrics import job  # noqa: F401 - the fixture

pytestmark = pytest.mark.django_db
ISO = re.compile(r'"(\d{4}-\d\d-\d\dT\d\d:\d\d[^"]*)"')


def test_normalise_rewrites_only_exact_datetimes():
    assert normalise({"a": "2026-12-01T22:00:00+08:00"}) == {"a": "2026-12-01T14:00:00Z"}
    assert normalise(["2026-12-01T14:00:00.5+00:00"]) == ["2026-12-01T14:00:00.500000Z"]
    line = "started 2026-12-01T22:00:00+08:00 on node-1"
    assert normalise({"log": line}) == {"log": line}


def test_every_api_datetime_is_utc_z(job, client, admin_user, settings, tmp_path):  # noqa: F811
    settings.TIME_ZONE = "Asia/Shanghai"
    timezone.activate("Asia/Shanghai")
    j, _ = job
    key = tmp_path / "k"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(key)], check=True, timeout=60)
    ssh_services.add_key(admin_user, "laptop", key.with_suffix(".pub").read_text(), None)
    client.force_login(admin_user)
    seen = {}
    for path in [
        f"/api/v1/jobs/{j.name}/",
        "/api/v1/jobs/",
        f"/api/v1/jobs/{j.name}/metrics/",
        "/api/v1/ssh-keys/",
        "/api/v1/clusters/",
    ]:
        response = client.get(path)
        assert response.status_code == 200, path
        seen[path] = ISO.findall(response.content.decode())
    assert all(seen.values()), seen  # every endpoint returned times
    bad = {p: [t for t in times if not t.endswith("Z")] for p, times in seen.items()}
    assert not any(bad.values()), bad
    timezone.deactivate()


def test_a_page_has_one_labelled_time_zone(job, client, admin_user, settings):  # noqa: F811
    """The run check page used to mix UTC ("… UTC") and unlabelled times; now every time is in the page's zone
    with its abbreviation, and the header names the zone."""
    settings.TIME_ZONE = "Asia/Shanghai"
    j, _ = job
    client.force_login(admin_user)
    page = client.get(f"/jobs/{j.name}/run-check/", HTTP_ACCEPT_LANGUAGE="en").content.decode()
    header = re.search(r'data-testid="page-tz"[^>]*>(.*?)</span></span>', page)
    assert header and re.sub(r"<[^>]+>", "", header.group(1)) == "CST (UTC+08:00)"  # the offset hides when narrow
    stamps = re.findall(r"\d{4}-\d\d-\d\d[ T]\d\d:\d\d:\d\d(?:\.\d+)?(?:[+-]\d\d:\d\d|Z)?(?: ([A-Z]{2,5}))?", page)
    assert stamps and all(abbr == "CST" for abbr in stamps), stamps
    local = timezone.localtime(j.created_at, timezone.get_default_timezone())
    assert f"{local:%Y-%m-%d %H:%M:%S} CST" in page
