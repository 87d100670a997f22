"""Experiment-tracking credentials (W&B, SwanLab): kept encrypted under the user's account, picked by a job,
reaching every Task through its own Secret (``secretKeyRef``), and absent from the YAML, the workload, the pages
and the audit log."""

from __future__ import annotations

import base64
import json
from types import SimpleNamespace

import pytest
from django.db import connection

from accounts.models import AuditEvent, TrackingCredential
from clusters import tracking_secret
from jobs.jobspec.manifests import build_task_manifests, redacted
from jobs.models import Job
from tests.jobs.test_manifests import CLUSTERS, JOB, KEYS, REGISTRY
from tests.spec_fixtures import base_doc

WANDB_KEY = "wandb-local-0123456789abcdef0123456789abcdef"
SWAN_KEY = "swanlab-key-ZYXWVUTSRQ9876543210"

pytestmark = pytest.mark.django_db


def _add(client, **fields):
    data = {"name": "team-wandb", "kind": "wandb", "api_key": WANDB_KEY, "host": ""} | fields
    return client.post("/account/tracking/", data)


def test_account_page_stores_the_key_encrypted_and_never_shows_it(client, alice):
    client.force_login(alice)
    response = _add(client, host="https://wandb.example.com/")
    assert response.status_code == 200
    page = response.content.decode()
    assert "team-wandb" in page and "https://wandb.example.com" in page
    assert WANDB_KEY not in page
    cred = TrackingCredential.objects.get(user=alice, name="team-wandb")
    assert cred.api_key == WANDB_KEY and cred.host == "https://wandb.example.com"
    with connection.cursor() as cur:
        cur.execute("SELECT api_key FROM accounts_trackingcredential WHERE id = %s", [cred.pk])
        stored = cur.fetchone()[0]
    assert stored.startswith("fernet:") and WANDB_KEY not in stored
    event = AuditEvent.objects.get(action="tracking.create")
    assert event.detail["name"] == "team-wandb" and WANDB_KEY not in json.dumps(event.detail)
    again = client.get("/account/tracking/").content.decode()
    assert "team-wandb" in again and WANDB_KEY not in again


def test_bad_input_gets_a_clear_error_in_the_users_language(client, alice):
    client.force_login(alice)
    client.cookies["django_language"] = "en"
    bad_host = _add(client, host="ftp://user:pw@example.com")
    assert bad_host.status_code == 400
    assert "https:// URL" in bad_host.content.decode()
    client.cookies["django_language"] = "zh-hans"
    bad_name = client.post("/account/tracking/", {"name": "Bad Name", "kind": "wandb", "api_key": "k"})
    assert bad_name.status_code == 400 and "小写字母" in bad_name.content.decode()
    spaces = _add(client, name="k2", api_key="has a space")
    assert spaces.status_code == 400
    assert not TrackingCredential.objects.exists()


def test_a_user_deletes_only_their_own(client, alice, bob):
    cred = TrackingCredential.objects.create(user=bob, name="bobs", kind="swanlab", api_key=SWAN_KEY)
    client.force_login(alice)
    assert client.post("/account/tracking/", {"delete": cred.pk}).status_code == 404
    assert "bobs" not in client.get("/account/tracking/").content.decode()
    client.force_login(bob)
    assert client.post("/account/tracking/", {"delete": cred.pk}).status_code == 200
    assert not TrackingCredential.objects.exists()


def test_the_page_needs_a_login(client):
    response = client.get("/account/tracking/")
    assert response.status_code == 302 and "/login" in response["Location"]


VALUES = {
    tracking_secret.WANDB_API_KEY: WANDB_KEY,
    tracking_secret.WANDB_BASE_URL: "https://wandb.example.com",
    tracking_secret.SWANLAB_API_KEY: SWAN_KEY,
}


def test_every_task_has_its_secret_and_main_reads_each_variable_through_secretkeyref():
    built = build_task_manifests(
        "robot-policy-training", JOB, clusters=CLUSTERS, registries=[REGISTRY], ssh_keys=KEYS, tracking=VALUES
    )
    assert len(built) == 3
    for m in built:
        secrets = [o for o in m.extra_objects if tracking_secret.values_of(o) is not None]
        assert [s["metadata"]["name"] for s in secrets] == [f"{m.task}-tracking"]
        assert tracking_secret.values_of(secrets[0]) == VALUES
        main = next(c for c in m.workload["spec"]["template"]["spec"]["containers"] if c["name"] == "main")
        env = {e["name"]: e for e in main["env"]}
        for name in VALUES:
            assert env[name] == {
                "name": name,
                "valueFrom": {"secretKeyRef": {"name": f"{m.task}-tracking", "key": name}},
            }
        assert "SWANLAB_WEB_HOST" not in env  # no self-hosted SwanLab given
        workload = json.dumps(m.workload)
        others = json.dumps([o for o in m.extra_objects if tracking_secret.values_of(o) is None])
        shown = json.dumps([redacted(o) for o in m.extra_objects])
        for secret in (WANDB_KEY, SWAN_KEY):
            encoded = base64.b64encode(secret.encode()).decode()
            for text in (workload, others, shown):
                assert secret not in text and encoded not in text


def test_without_credentials_nothing_is_added():
    for m in build_task_manifests("robot-policy-training", JOB, clusters=CLUSTERS, registries=[REGISTRY]):
        assert not any(o["metadata"]["name"].endswith("-tracking") for o in m.extra_objects)
        assert "WANDB_API_KEY" not in json.dumps(m.workload)


def test_a_submitted_job_names_the_credential_and_its_workers_get_the_key(api, alice):
    from types import SimpleNamespace

    from jobs.control import controller

    TrackingCredential.objects.create(user=alice, name="team-wandb", kind="wandb", api_key=WANDB_KEY)
    TrackingCredential.objects.create(
        user=alice, name="lab", kind="swanlab", api_key=SWAN_KEY, host="https://swan.example.org"
    )
    doc = base_doc()
    doc["spec"]["trackingCredentials"] = ["team-wandb", "lab"]
    created = api.post("/api/v1/jobs/", doc, format="json")
    assert created.status_code == 201, created.json()
    body = json.dumps(created.json())
    assert WANDB_KEY not in body and SWAN_KEY not in body and "team-wandb" in created.json()["yaml"]
    job = Job.objects.get(name=doc["metadata"]["name"])
    clusters = {t["cluster"]: SimpleNamespace(name=t["cluster"], namespace="rlark") for t in doc["spec"]["tasks"]}
    built = controller._manifests(job, clusters)
    for m in built.values():
        secret = next(o for o in m.extra_objects if tracking_secret.values_of(o) is not None)
        assert tracking_secret.values_of(secret) == {
            "WANDB_API_KEY": WANDB_KEY,
            "SWANLAB_API_KEY": SWAN_KEY,
            "SWANLAB_WEB_HOST": "https://swan.example.org",
        }
    detail = json.dumps(api.get(f"/api/v1/jobs/{job.name}/").json())
    assert WANDB_KEY not in detail and SWAN_KEY not in detail
    audit = json.dumps([e.detail for e in AuditEvent.objects.all()])
    assert WANDB_KEY not in audit and SWAN_KEY not in audit


def test_the_validator_refuses_unknown_and_doubled_credentials(api, alice, bob):
    TrackingCredential.objects.create(user=bob, name="bobs", kind="wandb", api_key=WANDB_KEY)
    TrackingCredential.objects.create(user=alice, name="w1", kind="wandb", api_key=WANDB_KEY)
    TrackingCredential.objects.create(user=alice, name="w2", kind="wandb", api_key=WANDB_KEY)
    cases = {("bobs",): "tracking_unknown", ("w1", "w2"): "tracking_same_kind", ("w1", "w1", "w2"): "tracking_invalid"}
    for names, code in cases.items():
        doc = base_doc()
        doc["spec"]["trackingCredentials"] = list(names)
        answer = api.post("/api/v1/jobs/validate/", doc, format="json", HTTP_ACCEPT_LANGUAGE="en").json()
        assert answer["valid"] is False
        assert code in {e["code"] for e in answer["errors"]}, answer["errors"]
    doc = base_doc()
    doc["spec"]["trackingCredentials"] = "w1"
    answer = api.post("/api/v1/jobs/validate/", doc, format="json").json()
    assert "tracking_invalid" in {e["code"] for e in answer["errors"]}


def test_the_wizard_keeps_the_picked_names_and_sends_their_errors_to_step_3():
    from django.http import QueryDict

    from jobs.control import wizard as wz

    state = wz.initial_state(["local"])
    state.tracking = ["team-wandb"]
    doc = wz.to_document(state)
    assert doc["spec"]["trackingCredentials"] == ["team-wandb"]
    assert wz.from_document(doc).tracking == ["team-wandb"]
    posted = QueryDict(mutable=True)
    posted.setlist("tracking", ["team-wandb", "", "lab", "third"])
    assert wz.from_post(posted).tracking == ["team-wandb", "lab"]
    assert "trackingCredentials" not in wz.to_document(wz.initial_state(["local"]))["spec"]
    for code in ("tracking_unknown", "tracking_same_kind", "tracking_invalid"):
        problem = SimpleNamespace(path="spec.trackingCredentials[0]", code=code)
        assert wz.step_of(problem) == 3
