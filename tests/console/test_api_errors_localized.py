"""API error details are in the request's language, never a Chinese prefix with an English detail:
404s of tokens and SSH keys, a missing token name, a refused run-check edit, a bad request body and a failed
cordon, in zh (the default) and en."""

from __future__ import annotations

import pytest
from rest_framework.test import APIClient

from clusters.models import Cluster, Node
from clusters.runtime import registry
from clusters.runtime.base import RuntimeFailure
from jobs.models import Job

pytestmark = pytest.mark.django_db


@pytest.fixture
def api(alice):
    client = APIClient()
    client.force_authenticate(alice)
    return client


def both(call):
    """``(zh body, en body)`` of the same request."""
    return call().json(), call(HTTP_ACCEPT_LANGUAGE="en").json()


def test_not_found_and_required_are_localized(api):
    zh, en = both(lambda **kw: api.delete("/api/v1/tokens/999/", **kw))
    assert zh == {"code": "not_found", "detail": "未找到。"} and en["detail"] == "Not found."
    zh, en = both(lambda **kw: api.get("/api/v1/ssh-keys/999/", **kw))
    assert zh["detail"] == "未找到。" and en["detail"] == "Not found."
    zh, en = both(lambda **kw: api.post("/api/v1/tokens/", {"name": ""}, format="json", **kw))
    assert zh["detail"]["name"] == ["该字段是必填项。"] and en["detail"]["name"] == ["This field is required."]


def test_bad_job_body_detail_is_one_language(api):
    zh, en = both(lambda **kw: api.post("/api/v1/jobs/", "{not json", content_type="application/json", **kw))
    assert zh["errors"][0]["message"].startswith("Job 文档格式无效：JSON 无效："), zh
    assert en["errors"][0]["message"].startswith("The job document is invalid: invalid JSON:"), en
    zh, en = both(lambda **kw: api.post("/api/v1/jobs/", "", content_type="application/json", **kw))
    assert zh["errors"][0]["message"] == "Job 文档格式无效：请求中没有 Job 文档"
    assert en["errors"][0]["message"] == "The job document is invalid: no job document in the request"


def test_refused_run_check_settings_are_localized(api, bob):
    Job.objects.create(name="bobs", owner=bob, spec={"metadata": {"name": "bobs"}, "spec": {"tasks": []}})
    # alice cannot see bob's job at all: 404 in her language
    zh, en = both(lambda **kw: api.put("/api/v1/jobs/bobs/run-check/", {}, format="json", **kw))
    assert zh["detail"] == "未找到该 Job。" and en["detail"] == "Job not found."


def test_failed_cordon_names_the_reason_in_the_users_language(admin_user, monkeypatch):
    cluster = Cluster.objects.create(name="k", runtime="kubernetes", status="online")
    Node.objects.create(cluster=cluster, name="n0")

    class Down:
        def cordon(self, node, unschedulable=True):
            raise RuntimeFailure(
                "cannot reach the Kubernetes API server at https://k:6443: connection refused", "unreachable"
            )

    monkeypatch.setattr(registry, "runtime_for", lambda c: Down())
    admin = APIClient()
    admin.force_authenticate(admin_user)
    zh, en = both(lambda **kw: admin.post("/api/v1/nodes/k/n0/cordon/", **kw))
    assert zh["detail"] == "封锁失败：无法连接集群。" and zh["code"] == "unreachable"
    assert en["detail"] == "Cordon failed: the cluster cannot be reached."
    assert "connection refused" in en["cause"]
