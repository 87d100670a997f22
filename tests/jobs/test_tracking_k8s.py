"""Experiment tracking on Kubernetes (the fake API server over HTTP): a job that picks a W&B (with an entity) and a
SwanLab credential gets one ``<task>-tracking`` Secret per Task (the entity as ``WANDB_ENTITY``), each
StatefulSet's ``main`` reads the variables through ``secretKeyRef`` and holds no key, the job's YAML and API
answers hold only the names, and an edit that drops the credentials or Delete removes the Secrets."""

from __future__ import annotations

import base64
import copy
import json

import pytest
from rest_framework.test import APIClient

from accounts.models import TrackingCredential
from tests.fake_k8s.fixtures import fake_k8s  # noqa: F401
from tests.jobs.test_k8s_job_flow import DOCUMENT, NS, names, setup  # noqa: F401

WANDB_KEY = "k8s-wandb-key-00112233445566778899aabbccddeeff"
SWAN_KEY = "k8s-swan-key-ffeeddccbbaa"

pytestmark = pytest.mark.django_db


def test_the_keys_reach_every_task_through_its_secret_and_leave_with_the_job(setup, fake_k8s, alice):  # noqa: F811
    TrackingCredential.objects.create(user=alice, name="team", kind="wandb", api_key=WANDB_KEY, entity="rl-team")
    TrackingCredential.objects.create(
        user=alice, name="lab", kind="swanlab", api_key=SWAN_KEY, host="https://swan.example.org"
    )
    api = APIClient()
    api.force_authenticate(alice)
    doc = copy.deepcopy(DOCUMENT)
    doc["spec"]["trackingCredentials"] = ["team", "lab"]
    resp = api.post("/api/v1/jobs/", doc, format="json")
    assert resp.status_code == 201, resp.content
    tasks = ("flow-actor", "flow-env", "flow-rollout")
    assert {f"{t}-tracking" for t in tasks} <= set(names(fake_k8s, "secrets"))
    for task in tasks:
        data = fake_k8s.get("secrets", NS, f"{task}-tracking")["data"]
        assert {k: base64.b64decode(v).decode() for k, v in data.items()} == {
            "WANDB_API_KEY": WANDB_KEY,
            "WANDB_ENTITY": "rl-team",
            "SWANLAB_API_KEY": SWAN_KEY,
            "SWANLAB_WEB_HOST": "https://swan.example.org",
        }
        sts = fake_k8s.get("statefulsets", NS, task)
        main = next(c for c in sts["spec"]["template"]["spec"]["containers"] if c["name"] == "main")
        refs = {
            e["name"]: e["valueFrom"]["secretKeyRef"]
            for e in main["env"]
            if "valueFrom" in e and "secretKeyRef" in e["valueFrom"]
        }
        assert refs["WANDB_API_KEY"] == {"name": f"{task}-tracking", "key": "WANDB_API_KEY"}
        assert refs["WANDB_ENTITY"] == {"name": f"{task}-tracking", "key": "WANDB_ENTITY"}
        assert refs["SWANLAB_WEB_HOST"] == {"name": f"{task}-tracking", "key": "SWANLAB_WEB_HOST"}
        text = json.dumps(sts)
        assert WANDB_KEY not in text and SWAN_KEY not in text
    shown = json.dumps(api.get("/api/v1/jobs/flow/").json())
    assert "team" in shown and WANDB_KEY not in shown and SWAN_KEY not in shown
    dropped = copy.deepcopy(DOCUMENT)
    assert api.put("/api/v1/jobs/flow/", dropped, format="json").status_code == 200
    assert not [n for n in names(fake_k8s, "secrets") if n.endswith("-tracking")]  # an edit dropped them
    assert api.delete("/api/v1/jobs/flow/").status_code in (200, 204)
    assert names(fake_k8s, "secrets") == []
