"""A run script with characters outside the BMP (an emoji, as RLinf's and W&B's own log lines use) and Chinese text
reaches the REAL API server's server-side apply whole: the StatefulSet is created, its Pod runs, and the script in
its env is the one the user wrote, byte for byte."""

from __future__ import annotations

import pytest
from rest_framework.test import APIClient

from tests.k8s_real.conftest import wait_for
from tests.k8s_real.jobs import document, running, task

pytestmark = [pytest.mark.k8s_real, pytest.mark.django_db(transaction=True), pytest.mark.timeout(180)]
JOB = "emoji-r"
RUN = 'echo "🚀 开始训练 · step 1 ✅ 𝔼[r]"\nexec sleep infinity'


def test_a_run_script_with_an_emoji_is_applied_and_kept_byte_for_byte(k8s_cluster, k8s_namespace, alice):
    header = task("header", head=True, replicas=1, selector={"kubernetes.io/hostname": "cpu-0"}, role="Actor")
    header["runScript"] = RUN
    api = APIClient()
    api.force_authenticate(alice)
    resp = api.post("/api/v1/jobs/", document(JOB, header), format="json")
    assert resp.status_code == 201, resp.content
    pods = wait_for(lambda: running(k8s_namespace, 1), 60, "the Header Running")
    main = next(c for c in pods[f"{JOB}-header-0"]["spec"]["containers"] if c["name"] == "main")
    env = {e["name"]: e.get("value") for e in main.get("env") or []}
    assert env["RLARK_RUN_SCRIPT"] == RUN
