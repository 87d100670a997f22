"""``spec.startTimeout`` (jobs.jobspec.start_timeout): seconds or digits with s/m/h, from 30 s to a week; anything
else is refused with a localized error and no job is created; a valid one is kept in the stored document."""

from __future__ import annotations

import pytest

from jobs.models import Job
from tests.spec_fixtures import base_doc

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize("value", [10, "abc", "15d", True, -60, 8 * 24 * 3600, "9" * 40])
def test_a_bad_start_timeout_is_refused_in_both_languages(api, value):
    doc = base_doc()
    doc["spec"]["startTimeout"] = value
    en = api.post("/api/v1/jobs/", doc, format="json", HTTP_ACCEPT_LANGUAGE="en")
    assert en.status_code == 400
    (error,) = [e for e in en.json()["errors"] if e["code"] == "start_timeout_invalid"]
    assert error["path"] == "spec.startTimeout" and "30 to 604800" in error["message"]
    zh = api.post("/api/v1/jobs/validate/", doc, format="json").json()
    (error,) = [e for e in zh["errors"] if e["code"] == "start_timeout_invalid"]
    assert "无效" in error["message"] and len(error["message"]) < 200
    assert not Job.objects.exists()


@pytest.mark.parametrize("value,seconds", [(900, 900), ("15m", 900), ("2h", 7200), ("45s", 45)])
def test_a_valid_start_timeout_is_kept(api, value, seconds):
    from jobs.jobspec.start_timeout import start_timeout_of

    doc = base_doc()
    doc["spec"]["startTimeout"] = value
    resp = api.post("/api/v1/jobs/", doc, format="json")
    assert resp.status_code == 201, resp.content
    assert start_timeout_of(Job.objects.get().spec_section) == seconds
