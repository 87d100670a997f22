"""Ray token authentication on a real API server: each Task's Secret ``<task>-ray-auth`` holds the job's token, every
Worker Pod reads ``RAY_AUTH_TOKEN`` from it with ``RAY_AUTH_MODE=token``, two jobs get different tokens, and the
Secrets go with the job."""

from __future__ import annotations

import base64

import pytest
from rest_framework.test import APIClient

from clusters.ray_auth import job_token
from jobs.models import Job
from tests.k8s_real.conftest import wait_for
from tests.k8s_real.jobs import document, running, task

pytestmark = [pytest.mark.k8s_real, pytest.mark.django_db(transaction=True)]


def test_each_job_has_its_secret_and_every_pod_reads_it(k8s_cluster, k8s_namespace, alice):
    api = APIClient()
    api.force_authenticate(alice)
    for name in ("auth-a", "auth-b"):
        doc = document(
            name,
            task("header", head=True, replicas=1, selector={"kubernetes.io/hostname": "cpu-0"}),
            task("rollout", head=False, replicas=3, selector={"pool": "gpu"}, gpus=1),
        )
        resp = api.post("/api/v1/jobs/", doc, format="json")
        assert resp.status_code == 201, resp.content
    pods = wait_for(lambda: running(k8s_namespace, 8), 90, "8 Running Pods")

    tokens = {}
    for name in ("auth-a", "auth-b"):
        job = Job.objects.get(name=name)
        tokens[name] = job_token(job.pk, job.created_at.isoformat())
        for template in ("header", "rollout"):
            secret = k8s_namespace.get("secret", f"{name}-{template}-ray-auth")
            assert base64.b64decode(secret["data"]["token"]).decode() == tokens[name]
            assert secret["metadata"]["labels"]["rlinf.io/job"] == name
            main = next(c for c in pods[f"{name}-{template}-0"]["spec"]["containers"] if c["name"] == "main")
            env = {e["name"]: e for e in main["env"]}
            assert env["RAY_AUTH_MODE"]["value"] == "token"
            assert env["RAY_AUTH_TOKEN"]["valueFrom"]["secretKeyRef"] == {
                "name": f"{name}-{template}-ray-auth",
                "key": "token",
            }
    assert tokens["auth-a"] != tokens["auth-b"]

    assert api.delete("/api/v1/jobs/auth-a/").status_code in (200, 204)
    wait_for(
        lambda: not any(n.startswith("auth-a-") for n in k8s_namespace.names("secret")), 30, "auth-a's Secrets gone"
    )
    assert {n for n in k8s_namespace.names("secret") if n.endswith("-ray-auth")} == {
        "auth-b-header-ray-auth",
        "auth-b-rollout-ray-auth",
    }
