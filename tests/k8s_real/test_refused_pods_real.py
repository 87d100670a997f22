"""Pods the REAL cluster refuses or holds back, as a researcher sees them (seed 05 "Job 长时间处于 Pending",
"尚未出现 Worker"):

- a ResourceQuota (``pods: 0``) makes the real StatefulSet controller's Pod creation fail (``FailedCreate``, the
  API server's ``exceeded quota`` message): the job gets the ``ReplicaFailure`` condition and the message with the
  cluster's own words, on the API and on the overview in zh and en, until the quota lets the Pod be created;
- a Pod whose claim the real PV controller cannot provision (a StorageClass the cluster lacks): the overview's
  "why pending" line names the claim; once the claim is deleted the real scheduler says ``not found`` and the
  Diagnosis says the claim does not exist, without blaming the old claim's StorageClass;
- the REST API's log of that Pending Worker answers 409 with the Logs tab's sentence, not an empty 200."""

from __future__ import annotations

import re

import pytest
from django.conf import settings as django_settings
from django.urls import reverse
from playwright.sync_api import expect
from rest_framework.test import APIClient

from jobs.jobspec.conditions import get_condition
from jobs.models import Job
from jobs.observe.sync import sync_all_clusters
from storage.models import StorageClass
from tests.conftest import screenshot_dir
from tests.k8s_real.conftest import wait_for
from tests.k8s_real.jobs import document, synced, task

pytestmark = [pytest.mark.k8s_real, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def api(alice):
    client = APIClient()
    client.force_authenticate(alice)
    return client


def submit(api: APIClient, doc: dict) -> None:
    resp = api.post("/api/v1/jobs/", doc, format="json")
    assert resp.status_code == 201, resp.content


def quota(ns, pods: int) -> None:
    ns.apply(
        [
            {
                "apiVersion": "v1",
                "kind": "ResourceQuota",
                "metadata": {"name": "team"},
                "spec": {"hard": {"pods": str(pods)}},
            }
        ]
    )


def refusal(job: Job) -> dict | None:
    return get_condition(job.conditions, "ReplicaFailure")


def pending_section(html: str) -> str:
    """The overview's "why Workers are still pending" card."""
    m = re.search(r'data-testid="pending-reasons".*?</section>', html, re.S)
    return m.group(0) if m else ""


@pytest.mark.browser
@pytest.mark.usefixtures("orm_beside_playwright")
def test_quota_refusal_is_a_condition_and_the_jobs_message_until_the_pod_exists(
    k8s_cluster, k8s_namespace, api, alice, client, page, live_server
):
    quota(k8s_namespace, 0)
    submit(
        api, document("refused", task("header", head=True, replicas=1, selector={"kubernetes.io/hostname": "cpu-0"}))
    )
    job = synced("refused", lambda j: (c := refusal(j)) and c["status"] == "True" and j, 60, "ReplicaFailure True")
    cond = refusal(job)
    assert cond["reason"] == "QuotaExceeded", cond
    assert 'pods "refused-header-0" is forbidden: exceeded quota: team' in cond["message"], cond
    assert cond["message"].startswith("Role header: "), cond
    assert "The cluster refuses to create Pod refused-header-0: " in job.message, job.message
    assert "exceeded quota: team" in job.message, job.message
    status = api.get("/api/v1/jobs/refused/").json()["status"]
    assert status["phase"] == "Pending" and "exceeded quota: team" in status["message"], status
    assert any(c["type"] == "ReplicaFailure" and c["status"] == "True" for c in status["conditions"]), status

    client.force_login(alice)
    page.context.add_cookies(
        [
            {
                "name": django_settings.SESSION_COOKIE_NAME,
                "value": client.cookies[django_settings.SESSION_COOKIE_NAME].value,
                "url": live_server.url,
            }
        ]
    )
    words = {
        "en": (
            "The cluster refuses to create Pod refused-header-0:",
            "Pods refused by the cluster",
            "Role header:",
            "the namespace's ResourceQuota is used up",
        ),
        "zh-hans": (
            "集群拒绝创建 Pod refused-header-0：",
            "集群拒绝创建 Pod",
            "角色 header：",
            "资源配额（ResourceQuota）已用尽",
        ),
    }
    for lang, (message, label, role, why) in words.items():
        page.context.add_cookies(
            [{"name": django_settings.LANGUAGE_COOKIE_NAME, "value": lang, "url": live_server.url}]
        )
        page.goto(live_server.url + reverse("jobs:detail", args=["refused"]))
        expect(page.locator("body")).to_contain_text(message)
        why_pending = page.locator('[data-testid="pending-reasons"]')
        expect(why_pending).to_contain_text(why)  # the overview asks the cluster nothing: the sync's refusal
        expect(why_pending).to_contain_text("exceeded quota: team")
        row = page.locator('[data-testid="conditions"] tr', has=page.locator('[data-type="ReplicaFailure"]'))
        expect(row).to_contain_text(label)
        expect(row).to_contain_text(role)
        expect(row).to_contain_text("exceeded quota: team")
        expect(row.locator('[data-testid="condition-reason"]')).to_have_text("QuotaExceeded")
        page.screenshot(path=str(screenshot_dir() / f"job-overview-quota-refused-{lang[:2]}.png"), full_page=True)

    quota(k8s_namespace, 10)  # the administrator raises the quota: the StatefulSet controller creates the Pod
    job = synced("refused", lambda j: (c := refusal(j)) and c["status"] == "False" and j, 120, "ReplicaFailure cleared")
    assert refusal(job)["reason"] == "PodsCreated"
    assert "refused-header-0" in k8s_namespace.pods()
    assert "refuses" not in job.message, job.message


def test_missing_claim_is_named_and_the_pending_workers_log_says_so(k8s_cluster, k8s_namespace, api, alice, client):
    StorageClass.objects.create(
        cluster=k8s_cluster, name="ckpt", provider="kubernetes", parameters={"storage_class_name": "rclone-nowhere"}
    )
    doc = document(
        "claim",
        task("header", head=True, replicas=1, selector={"kubernetes.io/hostname": "cpu-0"}, volumes=[("/mnt/d", "d")]),
    )
    doc["spec"]["tasks"][0]["kubernetes"]["workload"]["pvcStorageMap"] = {"d": "ckpt"}
    submit(api, doc)
    (claim,) = Job.objects.get(name="claim").spec["spec"]["tasks"][0]["kubernetes"]["workload"]["pvcStorageMap"]
    wait_for(lambda: "claim-header-0" in k8s_namespace.pods(), 60, "Pod created")
    synced("claim", lambda j: "unbound" in j.message and j, 60, "unbound claim in the job's message")

    # the REST API answers what the Logs tab says, in the request's language, distinct from an empty log
    resp = api.get("/api/v1/jobs/claim/logs/?pod=claim-header-0", HTTP_ACCEPT_LANGUAGE="en")
    assert resp.status_code == 409, (resp.status_code, resp.content)
    assert resp["X-Log-State"] == "pending" and resp["Content-Type"].startswith("text/plain")
    assert resp.content.decode() == "Pod claim-header-0 is Pending; no logs yet.\n"
    resp = api.get("/api/v1/jobs/claim/logs/?pod=claim-header-0", HTTP_ACCEPT_LANGUAGE="zh-hans")
    assert resp.status_code == 409 and resp.content.decode() == "Pod claim-header-0 处于 Pending 状态，暂无日志。\n"

    # the scheduler names no claim ("unbound immediate PersistentVolumeClaims"): the overview names the role's
    client.force_login(alice)
    client.cookies["django_language"] = "en"
    detail = reverse("jobs:detail", args=["claim"])
    line = pending_section(client.get(detail).content.decode())
    assert f"the volume claim {claim} of Worker claim-header-0 is not bound" in line, line
    assert " ? " not in line

    k8s_namespace.kubectl("delete", "pvc", claim, "--wait=false")  # someone deletes the claim

    # the Diagnosis: the claim does not exist; the deleted claim's StorageClass event is not blamed
    def missing(lang: str) -> str:
        sync_all_clusters(force=True)
        data = api.get("/api/v1/jobs/claim/diagnosis/", HTTP_ACCEPT_LANGUAGE=lang).json()
        return "\n".join(r["message"] for items in (data.get("pending") or {}).values() for r in items)

    text = wait_for(
        lambda: (t := missing("en")) and "does not exist in the cluster (it was deleted" in t and t, 60, "missing claim"
    )
    assert f"the volume claim {claim} of Worker claim-header-0 does not exist in the cluster" in text, text
    assert "StorageClass" not in text and "rclone-nowhere" not in text, text
    zh = missing("zh-hans")
    assert claim in zh and "不存在" in zh and "rclone-nowhere" not in zh, zh
    line = pending_section(client.get(detail).content.decode())
    assert f"the volume claim {claim} of Worker claim-header-0 does not exist" in line, line
    client.cookies["django_language"] = "zh-hans"
    line = pending_section(client.get(detail).content.decode())
    assert f"Worker claim-header-0 的存储卷 {claim} 在集群中不存在" in line, line
