"""The API honours one pagination parameter set: ``limit`` or its alias ``page_size``, and ``offset``;
bounded, and an invalid value is a 400 with the console's error shape, never silently replaced."""

from __future__ import annotations

import pytest

from jobs.models import Job
from rlark_console.pagination import MAX_LIMIT
from tests.fake_runtime import job_document

pytestmark = pytest.mark.django_db


@pytest.fixture
def jobs(alice):
    for i in range(30):
        Job.objects.create(name=f"job-{i:02d}", owner=alice, spec=job_document(f"job-{i:02d}"))
    return alice


def names(response) -> list[str]:
    assert response.status_code == 200, response.content
    return [j["name"] for j in response.json()["results"]]


def test_limit_and_page_size_mean_the_same(client, jobs):
    client.force_login(jobs)
    by_limit = names(client.get("/api/v1/jobs/?limit=7&offset=7"))
    by_page_size = names(client.get("/api/v1/jobs/?page_size=7&offset=7"))
    assert by_limit == by_page_size and len(by_limit) == 7
    body = client.get("/api/v1/jobs/?page_size=7").json()
    assert body["count"] == 30 and "limit=7" in body["next"] and len(body["results"]) == 7
    assert len(names(client.get("/api/v1/jobs/?limit=5&page_size=5"))) == 5
    assert len(names(client.get("/api/v1/jobs/"))) == 30  # default 50


@pytest.mark.parametrize(
    "query, field",
    [
        ("limit=abc", "limit"),
        ("page_size=0", "page_size"),
        (f"limit={MAX_LIMIT + 1}", "limit"),
        ("offset=-1", "offset"),
        ("limit=5&page_size=6", "page_size"),
    ],
)
def test_invalid_pagination_is_a_400_not_ignored(client, jobs, query, field):
    client.force_login(jobs)
    response = client.get(f"/api/v1/jobs/?{query}")
    assert response.status_code == 400
    body = response.json()
    assert body["code"] == "pagination_invalid" and body["field"] == field and body["detail"]


def test_the_same_rule_on_other_collections(client, admin_user):
    client.force_login(admin_user)
    assert client.get("/api/v1/audit/?page_size=2").json()["results"] is not None
    assert client.get("/api/v1/audit/?page_size=x").status_code == 400


def test_schema_documents_the_parameters(client, alice):
    client.force_login(alice)
    schema = client.get("/api/schema/?format=json").json()
    params = {p["name"] for p in schema["paths"]["/api/v1/jobs/"]["get"]["parameters"]}
    assert {"limit", "page_size", "offset"} <= params


def test_pagination_errors_are_in_the_users_language(client, admin_user):
    """Fresh-clone trial: ``limit=abc`` under a Chinese page answered in English."""
    client.force_login(admin_user)
    zh = client.get("/api/v1/jobs/?limit=abc", HTTP_ACCEPT_LANGUAGE="zh-CN").json()
    en = client.get("/api/v1/jobs/?limit=abc", HTTP_ACCEPT_LANGUAGE="en").json()
    assert zh["detail"] == "limit 必须是整数。" and en["detail"] == "limit must be a whole number."
    zh = client.get("/api/v1/jobs/?offset=-1", HTTP_ACCEPT_LANGUAGE="zh-CN").json()
    assert zh["detail"] == "offset 不能小于 0。"
    en = client.get("/api/v1/jobs/?limit=100000", HTTP_ACCEPT_LANGUAGE="en").json()
    assert en["detail"] == "limit must be between 1 and 500."
