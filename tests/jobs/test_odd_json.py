"""Odd JSON bodies are 400s with a localized message, never 500s (one parser and one field
flattener for every admin endpoint, a depth-bounded JSON reader for jobs)."""

from __future__ import annotations

import json

import pytest
from rest_framework.test import APIClient

from clusters.models import Cluster, ImageRegistry
from storage.models import StorageClass
from tests.spec_fixtures import seed_db

pytestmark = pytest.mark.django_db

ARRAY = "[null,null]"


@pytest.fixture
def admin_api(admin_user):
    cluster = Cluster.objects.create(name="c1", runtime="local", namespace="ns", status="online")
    StorageClass.objects.create(cluster=cluster, name="sc1", provider="kubernetes", parameters={})
    ImageRegistry.objects.create(name="reg1", registry="registry.example.com")
    client = APIClient(raise_request_exception=False)
    client.force_authenticate(admin_user)
    return client


def _sc_pk() -> int:
    return StorageClass.objects.get(name="sc1").pk


@pytest.mark.parametrize(
    ("method", "url"),
    [
        ("post", "/api/v1/clusters/"),
        ("post", "/api/v1/domains/"),
        ("post", "/api/v1/image-registries/"),
        ("put", "/api/v1/image-registries/reg1/"),
        ("patch", "/api/v1/image-registries/reg1/"),
        ("post", "/api/v1/storage-classes/"),
        ("put", "/api/v1/storage-classes/{sc}/"),
        ("patch", "/api/v1/storage-classes/{sc}/"),
    ],
)
@pytest.mark.parametrize("body", [ARRAY, "1", '"x"', "null", "[" * 10_000 + "]" * 10_000])
def test_non_object_json_is_a_400(admin_api, method, url, body):
    r = getattr(admin_api, method)(url.format(sc=_sc_pk()), body, content_type="application/json")
    if r.status_code == 405:
        pytest.skip(f"{method.upper()} {url} is not an endpoint")
    assert r.status_code == 400, r.content[:300]
    en = getattr(admin_api, method)(
        url.format(sc=_sc_pk()), body, content_type="application/json", HTTP_ACCEPT_LANGUAGE="en"
    )
    zh = getattr(admin_api, method)(url.format(sc=_sc_pk()), body, content_type="application/json")
    assert "JSON" in en.json()["detail"] and en.json()["detail"] != zh.json()["detail"]


@pytest.mark.parametrize("endpoint", [123, {"a": 1}, ["x"], True])
def test_non_string_storage_endpoint_is_a_400(admin_api, endpoint):
    body = {"cluster": "c1", "name": "s3a", "provider": "s3", "endpoint": endpoint, "bucket": "b", "secret": "x"}
    r = admin_api.post("/api/v1/storage-classes/", body, format="json")
    assert r.status_code == 400, r.content[:300]
    r = admin_api.patch(f"/api/v1/storage-classes/{_sc_pk()}/", {"endpoint": endpoint}, format="json")
    assert r.status_code == 400, r.content[:300]
    assert not StorageClass.objects.filter(name="s3a").exists()


@pytest.mark.parametrize("value", [{"x": 1}, [1]])
def test_nested_cluster_and_registry_fields_are_400(admin_api, value):
    r = admin_api.post("/api/v1/clusters/", {"name": value, "runtime": "local"}, format="json")
    assert r.status_code == 400
    r = admin_api.post("/api/v1/image-registries/", {"name": "r2", "registry": value}, format="json")
    assert r.status_code == 400


def test_deeply_nested_job_json_is_a_400(alice):
    seed_db(alice)
    api = APIClient(raise_request_exception=False)
    api.force_authenticate(alice)
    deep = "[" * 10_000 + "]" * 10_000
    for body in (deep, json.dumps({"spec": {"tasks": 1}, "x": 1})[:-1] + f', "deep": {deep}}}'):
        for url in ("/api/v1/jobs/", "/api/v1/jobs/validate/"):
            r = api.post(url, body, content_type="application/json", HTTP_ACCEPT_LANGUAGE="en")
            assert r.status_code == 400, (url, r.content[:300])
            assert r.json()["errors"][0]["code"] == "document_invalid"
    yaml_deep = "spec:\n  x: " + "[" * 500 + "]" * 500 + "\n"
    r = api.post("/api/v1/jobs/", yaml_deep, content_type="application/yaml")
    assert r.status_code == 400 and r.json()["errors"][0]["code"] == "document_invalid"
    r = api.post("/api/v1/rlinf/plan/", deep, content_type="application/json")
    assert r.status_code == 400


@pytest.mark.parametrize(
    ("url", "body", "content_type"),
    [
        ("/api/v1/storage-classes/", "name=a%00b&cluster=c1&provider=kubernetes", "application/x-www-form-urlencoded"),
        ("/api/v1/image-registries/", '{"name": "r\\u0000", "registry": "x.example"}', "application/json"),
        ("/api/v1/domains/?x=%00", '{"name": "d", "cidr": "10.9.0.0/16"}', "application/json"),
        ("/api/v1/tokens/", '{"name": "t\\u0000"}', "application/json"),
        (
            "/api/v1/tokens/",  # found by the schemathesis fuzz run on PostgreSQL
            '--b\r\nContent-Disposition: form-data; name="name"\r\n\r\nt\x00k\r\n--b--\r\n',
            "multipart/form-data; boundary=b",
        ),
    ],
)
def test_nul_characters_are_a_400(admin_api, url, body, content_type):
    """PostgreSQL cannot store U+0000: refused before any query, in English and Chinese."""
    en = admin_api.post(url, body, content_type=content_type, HTTP_ACCEPT_LANGUAGE="en")
    assert en.status_code == 400 and "NUL" in en.json()["detail"], en.content[:300]
    zh = admin_api.post(url, body, content_type=content_type)
    assert zh.status_code == 400 and "不能包含" in zh.json()["detail"]


def test_nul_in_a_job_document_is_a_400(alice):
    seed_db(alice)
    api = APIClient(raise_request_exception=False)
    api.force_authenticate(alice)
    doc = {"apiVersion": "rlinf.io/v1alpha1", "kind": "Job", "metadata": {"name": "x\u0000"}, "spec": {"tasks": []}}
    for url in ("/api/v1/jobs/", "/api/v1/jobs/validate/"):
        r = api.post(url, doc, format="json")
        assert r.status_code == 400 and r.json()["errors"][0]["code"] == "document_invalid", r.content[:300]
