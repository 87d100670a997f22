"""Experiment-tracking keys on the REAL control plane (kube-apiserver + kwok): a job that picks a W&B and a
self-hosted SwanLab credential gets a ``<task>-tracking`` Secret holding the keys, and its StatefulSet's Pod
reads them through ``secretKeyRef`` (the Pod, the StatefulSet and the job's YAML hold no key); an edit that
drops the credentials deletes the Secret and takes the references off the StatefulSet."""

from __future__ import annotations

import base64

import pytest
from rest_framework.test import APIClient

from accounts.models import TrackingCredential
from tests.k8s_real.conftest import wait_for
from tests.k8s_real.jobs import document, running, task

pytestmark = [pytest.mark.k8s_real, pytest.mark.django_db(transaction=True), pytest.mark.timeout(240)]
JOB = "track-r"
WANDB_KEY = "real-wandb-key-0123456789abcdef0123456789abcdef"
SWAN_KEY = "real-swan-key-fedcba9876543210"
SWAN_HOST = "https://swan.lab.test"
SECRET = f"{JOB}-header-tracking"


def _document(credentials: list[str]) -> dict:
    header = task("header", head=True, replicas=1, selector={"kubernetes.io/hostname": "cpu-0"}, role="Actor")
    header["tensorBoardDir"] = "/tmp/tb"
    doc = document(JOB, header)
    if credentials:
        doc["spec"]["trackingCredentials"] = credentials
    return doc


def _env_refs(obj: dict) -> dict[str, str]:
    """``{env name: secret name}`` of the main container's ``secretKeyRef`` variables in a Pod template or Pod."""
    spec = obj["spec"].get("template", {}).get("spec") or obj["spec"]
    main = next(c for c in spec["containers"] if c["name"] == "main")
    return {
        e["name"]: e["valueFrom"]["secretKeyRef"]["name"]
        for e in main.get("env") or []
        if (e.get("valueFrom") or {}).get("secretKeyRef")
    }


def test_tracking_keys_reach_the_pod_through_a_secret_and_an_edit_takes_them_away(k8s_cluster, k8s_namespace, alice):
    TrackingCredential.objects.create(user=alice, name="team", kind="wandb", api_key=WANDB_KEY)
    TrackingCredential.objects.create(user=alice, name="lab", kind="swanlab", api_key=SWAN_KEY, host=SWAN_HOST)
    api = APIClient()
    api.force_authenticate(alice)
    resp = api.post("/api/v1/jobs/", _document(["team", "lab"]), format="json")
    assert resp.status_code == 201, resp.content
    pods = wait_for(lambda: running(k8s_namespace, 1), 60, "the Header Running")

    secret = k8s_namespace.get("secret", SECRET)
    values = {k: base64.b64decode(v).decode() for k, v in secret["data"].items()}
    assert WANDB_KEY in values.values() and SWAN_KEY in values.values()
    refs = _env_refs(pods[f"{JOB}-header-0"])
    assert refs.get("WANDB_API_KEY") == SECRET and refs.get("SWANLAB_API_KEY") == SECRET, refs
    shown = k8s_namespace.kubectl("get", "pod,statefulset", "-o", "yaml")
    assert WANDB_KEY not in shown and SWAN_KEY not in shown
    yaml_text = api.get(f"/api/v1/jobs/{JOB}/").content.decode()
    assert WANDB_KEY not in yaml_text and SWAN_KEY not in yaml_text

    resp = api.put(f"/api/v1/jobs/{JOB}/", _document([]), format="json")
    assert resp.status_code == 200, resp.content
    wait_for(lambda: SECRET not in k8s_namespace.names("secrets"), 30, "the tracking Secret gone")
    sts = k8s_namespace.get("statefulset", f"{JOB}-header")
    assert not {"WANDB_API_KEY", "SWANLAB_API_KEY"} & set(_env_refs(sts)), _env_refs(sts)
