"""REST API of jobs: create (JSON and YAML), validate, detail, list filters, 409, 404 for others' jobs, edit,
PATCH stop, clone, delete, RLinf plan, localized messages."""

from __future__ import annotations

import pytest
import yaml
from rest_framework.test import APIClient

from accounts.models import AuditEvent
from jobs.jobspec.document import render_yaml
from jobs.models import Job
from tests.shared_spec import RLINF_CONFIGS
from tests.spec_fixtures import INVALID_CODES, SSH_KEY, base_doc, invalid_doc

pytestmark = pytest.mark.django_db


@pytest.fixture
def bob_api(bob):
    client = APIClient()
    client.force_authenticate(bob)
    return client


def codes(body, key="errors"):
    return {e["code"] for e in body[key]}


def test_create_json_then_detail_yaml_matches_validate_preview(api, alice):
    doc = base_doc()
    doc["spec"]["sshPublicKeys"] = [SSH_KEY]
    preview = api.post("/api/v1/jobs/validate/", doc, format="json")
    assert preview.status_code == 200, preview.json()
    assert preview.json()["valid"] is True and preview.json()["workers"] == 3
    created = api.post("/api/v1/jobs/", doc, format="json")
    assert created.status_code == 201, created.json()
    body = created.json()
    assert body["name"] == "ppo-job" and body["display_name"] == "PPO 训练" and body["owner"] == "alice"
    assert body["yaml"] == preview.json()["yaml"]
    job = Job.objects.get(name="ppo-job")
    assert job.owner == alice and render_yaml(job.spec) == preview.json()["yaml"]
    assert AuditEvent.objects.filter(action="job.create", object_id="ppo-job").exists()
    detail = api.get("/api/v1/jobs/ppo-job/").json()
    assert detail["yaml"] == preview.json()["yaml"]
    assert detail["spec"]["metadata"]["name"] == "ppo-job"
    assert "phase" in detail["status"]


def test_create_yaml_body_and_409(api):
    text = yaml.safe_dump(base_doc(), allow_unicode=True)
    first = api.post("/api/v1/jobs/", text, content_type="application/yaml")
    assert first.status_code == 201, first.json()
    second = api.post("/api/v1/jobs/", text, content_type="application/yaml")
    assert second.status_code == 409
    assert second.json()["errors"][0]["code"] == "job_exists"


def test_a_name_taken_by_another_users_job_does_not_say_a_job_exists(api, bob_api, bob, admin_user, client):
    """Job names are global (seed 05), so bob cannot take alice's name, but the 409 must not tell him that alice has
    a job of that name: "not available", as for a name he may not use; alice herself (and staff) hear "exists"."""
    assert api.post("/api/v1/jobs/", base_doc(), format="json").status_code == 201
    other = bob_api.post("/api/v1/jobs/", base_doc(), format="json", HTTP_ACCEPT_LANGUAGE="en")
    assert other.status_code == 409 and other.json()["code"] == "job_name_unavailable"
    assert other.json()["errors"][0]["message"] == "The name ppo-job is not available; choose another name."
    assert "exist" not in other.content.decode() and "alice" not in other.content.decode()
    assert bob_api.post("/api/v1/jobs/", base_doc(), format="json").json()["errors"][0]["message"] == (
        "名称 ppo-job 不可用，请换一个名称。"
    )
    own = api.post("/api/v1/jobs/", base_doc(), format="json", HTTP_ACCEPT_LANGUAGE="en")
    assert own.status_code == 409 and own.json()["code"] == "job_exists"
    staff = APIClient()
    staff.force_authenticate(admin_user)
    assert staff.post("/api/v1/jobs/", base_doc(), format="json").json()["code"] == "job_exists"
    # the YAML page says the same
    client.force_login(bob)
    page = client.post("/jobs/new/yaml/", {"text": yaml.safe_dump(base_doc()), "action": "submit"})
    assert page.status_code == 409 and "名称 ppo-job 不可用" in page.content.decode()
    assert "已存在" not in page.content.decode()


def test_same_codes_validate_create_json_create_yaml_upload(api):
    doc = invalid_doc()
    v = api.post("/api/v1/jobs/validate/", doc, format="json")
    assert v.status_code == 400
    c_json = api.post("/api/v1/jobs/", doc, format="json")
    assert c_json.status_code == 400
    c_yaml = api.post("/api/v1/jobs/", yaml.safe_dump(doc, allow_unicode=True), content_type="application/yaml")
    assert c_yaml.status_code == 400
    from django.core.files.uploadedfile import SimpleUploadedFile

    upload = SimpleUploadedFile("job.yaml", yaml.safe_dump(doc, allow_unicode=True).encode(), "application/yaml")
    c_file = api.post("/api/v1/jobs/", {"file": upload}, format="multipart")
    assert c_file.status_code == 400
    all_codes = [codes(r.json()) for r in (v, c_json, c_yaml, c_file)]
    assert all_codes[0] == INVALID_CODES
    assert all(c == all_codes[0] for c in all_codes)
    assert codes(v.json(), "warnings") == {"image_mutable_tag"}
    assert v.json()["yaml"].startswith("apiVersion: rlinf.io/v1alpha1")
    assert not Job.objects.exists()


def test_messages_follow_accept_language(api):
    doc = base_doc()
    doc["spec"]["tasks"][0]["kubernetes"]["workload"]["replicas"] = 2
    zh = api.post("/api/v1/jobs/validate/", doc, format="json").json()
    en = api.post("/api/v1/jobs/validate/", doc, format="json", HTTP_ACCEPT_LANGUAGE="en").json()
    zh_msg = next(e["message"] for e in zh["errors"] if e["code"] == "header_replicas_not_one")
    en_msg = next(e["message"] for e in en["errors"] if e["code"] == "header_replicas_not_one")
    assert zh_msg == "Header 角色只能有 1 个 Worker。"
    assert en_msg == "The header role must have exactly 1 worker."


def test_malformed_bodies(api):
    r = api.post("/api/v1/jobs/", "a: [", content_type="application/yaml")
    assert r.status_code == 400 and codes(r.json()) == {"yaml_invalid"}
    r = api.post("/api/v1/jobs/validate/", "{nope", content_type="application/json")
    assert r.status_code == 400 and codes(r.json()) == {"document_invalid"}


def test_rlinf_config_attached_checks_num_nodes(api):
    charger = (RLINF_CONFIGS / "emb_realworld_charger_sac_cnn_async.yaml").read_text()
    r = api.post("/api/v1/jobs/validate/", {"document": base_doc(), "rlinf_config": charger}, format="json")
    assert r.status_code == 400 and "num_nodes_mismatch" in codes(r.json())


def test_others_jobs_are_404_and_list_is_filtered(api, bob_api, admin_user):
    assert api.post("/api/v1/jobs/", base_doc(), format="json").status_code == 201
    assert bob_api.get("/api/v1/jobs/ppo-job/").status_code == 404
    assert bob_api.post("/api/v1/jobs/ppo-job/stop/").status_code == 404
    assert bob_api.delete("/api/v1/jobs/ppo-job/").status_code == 404
    assert bob_api.get("/api/v1/jobs/").json()["count"] == 0
    admin = APIClient()
    admin.force_authenticate(admin_user)
    assert admin.get("/api/v1/jobs/").json()["count"] == 1
    listing = api.get("/api/v1/jobs/?search=PPO").json()
    assert [j["name"] for j in listing["results"]] == ["ppo-job"]
    assert listing["results"][0]["workers"] == 3 and listing["results"][0]["roles"] == 2
    assert api.get("/api/v1/jobs/?search=zzz").json()["count"] == 0
    assert api.get("/api/v1/jobs/?owner=bob").json()["count"] == 0
    assert api.get("/api/v1/jobs/?phase=Pending,Running").json()["count"] == 1
    assert api.get("/api/v1/jobs/?phase=Failed").json()["count"] == 0


def test_anonymous_is_rejected():
    assert APIClient().get("/api/v1/jobs/").status_code in (401, 403)


def test_put_patch_stop_start_and_restart(api):
    assert api.post("/api/v1/jobs/", base_doc(), format="json").status_code == 201
    doc = base_doc()
    doc["spec"]["tasks"][1]["prepareScript"] = "echo changed"
    del doc["metadata"]["annotations"]
    r = api.put("/api/v1/jobs/ppo-job/", doc, format="json")
    assert r.status_code == 200, r.json()
    assert r.json()["spec"]["spec"]["tasks"][1]["prepareScript"] == "echo changed"
    assert r.json()["display_name"] == "PPO 训练"  # PUT keeps annotations
    text = yaml.safe_dump({k: v for k, v in doc.items() if k != "metadata"}, allow_unicode=True)
    r = api.put("/api/v1/jobs/ppo-job/", text, content_type="application/yaml")
    assert r.status_code == 200, r.json()  # the name comes from the URL
    doc["metadata"]["name"] = "other-name"
    r = api.put("/api/v1/jobs/ppo-job/", doc, format="json")
    assert r.status_code == 400 and "job_name_mismatch" in codes(r.json())
    r = api.patch("/api/v1/jobs/ppo-job/", {"spec": {"stopped": True}}, format="json")
    assert r.status_code == 200, r.json()
    assert r.json()["stopped"] is True and r.json()["spec"]["spec"]["stopped"] is True
    r = api.post("/api/v1/jobs/ppo-job/start/")
    assert r.status_code == 200 and r.json()["stopped"] is False
    r = api.post("/api/v1/jobs/ppo-job/stop/")
    assert r.status_code == 200 and r.json()["stopped"] is True
    attempt = r.json()["attempt"]
    r = api.post("/api/v1/jobs/ppo-job/restart/")
    assert r.status_code == 200 and r.json()["attempt"] == attempt + 1
    r = api.patch("/api/v1/jobs/ppo-job/", {"spec": {"tasks": []}}, format="json")
    assert r.status_code == 400 and "roles_empty" in codes(r.json())


def test_clone_and_delete(api):
    assert api.post("/api/v1/jobs/", base_doc(), format="json").status_code == 201
    r = api.post("/api/v1/jobs/ppo-job/clone/")
    assert r.status_code == 200
    assert r.json()["document"]["metadata"]["name"] == "ppo-job-copy"
    assert not Job.objects.filter(name="ppo-job-copy").exists()
    r = api.post("/api/v1/jobs/ppo-job/clone/?create=1")
    assert r.status_code == 201 and r.json()["name"] == "ppo-job-copy"
    assert api.post("/api/v1/jobs/ppo-job/clone/").json()["document"]["metadata"]["name"] == "ppo-job-copy-2"
    r = api.delete("/api/v1/jobs/ppo-job-copy/")
    assert r.status_code == 200 and r.json() == {"message": "deleted"}
    assert not Job.objects.filter(name="ppo-job-copy").exists()
    assert api.get("/api/v1/jobs/ppo-job-copy/").status_code == 404


def test_ssh_keys_must_be_own(api, bob):
    from sshkeys.models import SSHPublicKey

    SSHPublicKey.objects.create(owner=bob, name="b", key="ssh-ed25519 AAAAbobkey", fingerprint="fpb")
    doc = base_doc()
    doc["spec"]["sshPublicKeys"] = ["ssh-ed25519 AAAAbobkey"]
    r = api.post("/api/v1/jobs/", doc, format="json")
    assert r.status_code == 400 and codes(r.json()) == {"ssh_key_unknown"}


def test_rlinf_plan_endpoint(api):
    text = (RLINF_CONFIGS / "emb_realworld_charger_sac_cnn_async.yaml").read_text()
    r = api.post("/api/v1/rlinf/plan/", text, content_type="application/yaml")
    assert r.status_code == 200
    body = r.json()
    assert body["num_nodes"] == 2
    assert [(x["name"], x["replicas"], x["node_ranks"], x["head"]) for x in body["roles"]] == [
        ("4090", 1, "0", True),
        ("franka", 1, "1", False),
    ]
    dual = (RLINF_CONFIGS / "emb_realworld_dual_franka_dagger_openpi.yaml").read_text()
    body = api.post("/api/v1/rlinf/plan/", dual, content_type="application/yaml").json()
    assert body["valid"] is False and [p["code"] for p in body["problems"]] == ["node_ranks_mismatch"]
    assert api.post("/api/v1/rlinf/plan/", "a: [", content_type="application/yaml").status_code == 400


def test_openapi_schema_documents_job_endpoints(api):
    r = api.get("/api/schema/?format=json")
    assert r.status_code == 200
    paths = r.json()["paths"]
    for p in ("/api/v1/jobs/", "/api/v1/jobs/validate/", "/api/v1/jobs/{name}/", "/api/v1/rlinf/plan/"):
        assert p in paths


def test_yaml_page_gives_the_api_codes(api, client, alice):
    client.force_login(alice)
    text = yaml.safe_dump(invalid_doc(), allow_unicode=True)
    page = client.post("/jobs/new/yaml/", {"text": text, "action": "validate"})
    api_codes = codes(api.post("/api/v1/jobs/validate/", text, content_type="application/yaml").json())
    assert {e["code"] for e in page.context["errors"]} == api_codes == INVALID_CODES


def test_delete_failure_is_reported_and_job_kept(api, monkeypatch):
    from clusters.runtime.base import RuntimeFailure
    from jobs.control import controller

    assert api.post("/api/v1/jobs/", base_doc(), format="json").status_code == 201

    def fail(job, actor=None, request=None):
        raise RuntimeFailure("cannot reach the Kubernetes API server at https://k8s:6443: timed out", "unreachable")

    monkeypatch.setattr(controller, "delete", fail)
    r = api.delete("/api/v1/jobs/ppo-job/")
    # the detail is one language; the runtime's own words stay apart as the cause
    assert r.status_code == 503 and r.json()["detail"] == "删除失败：无法连接集群。"
    assert r.json()["code"] == "unreachable" and r.json()["cause"].startswith("cannot reach the Kubernetes API")
    en = api.delete("/api/v1/jobs/ppo-job/", HTTP_ACCEPT_LANGUAGE="en").json()
    assert en["detail"] == "Delete failed: the cluster cannot be reached."
    assert Job.objects.filter(name="ppo-job").exists()
