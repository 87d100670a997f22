"""Experiment tracking on a real node: a job that picks a W&B and a self-hosted SwanLab credential runs its Header
in a real container, whose processes hold the keys (read from the Task's Secret through ``secretKeyRef`` by the
real kubelet); the Pod, the StatefulSet, the job's YAML, its pages and the container's log hold none of them; the
W&B- and SwanLab-style lines the run script prints become the Metrics tab's run links within a sync, beside the
resolved ``config.yaml`` read inside the Header with its sha256; and an edit
that drops the credentials takes the Secret away and restarts the Worker without them."""

from __future__ import annotations

import hashlib

import pytest
from django.test import Client
from rest_framework.test import APIClient

from accounts.models import TrackingCredential
from tests.k8s_nodes.conftest import CLUSTER
from tests.k8s_nodes.jobs import pod_logs, process_env
from tests.k8s_real.conftest import wait_for
from tests.k8s_real.jobs import document, running, synced, task

pytestmark = [pytest.mark.k8s_nodes, pytest.mark.django_db(transaction=True), pytest.mark.timeout(500)]
JOB = "track-a"
POD = f"{JOB}-header-0"
WANDB_KEY = "nodes-wandb-key-0123456789abcdef0123456789abcdef"
SWAN_KEY = "nodes-swan-key-fedcba9876543210"
SWAN_HOST = "https://swan.lab.test"
WANDB_RUN = "https://wandb.ai/team/rlinf/runs/node1"
SWAN_RUN = f"{SWAN_HOST}/@alice/rlinf/runs/node2"
CONFIG = "runner:\n  logger:\n    logger_backends: [tensorboard, wandb, swanlab]\n    project_name: 真机\n"
# The keys' digests only (never the keys) go to the log; then the two clients' run lines, then the Worker waits.
RUN_SCRIPT = f"""python3 - <<'PY'
import hashlib, os
for name in ("WANDB_API_KEY", "SWANLAB_API_KEY", "SWANLAB_WEB_HOST"):
    value = os.environ.get(name, "")
    print(f"{{name}} sha256={{hashlib.sha256(value.encode()).hexdigest()}}", flush=True)
os.makedirs("/tmp/tb/tensorboard", exist_ok=True)
open("/tmp/tb/tensorboard/events.out.tfevents.1.node", "wb").close()
with open("/tmp/tb/tensorboard/config.yaml", "w", encoding="utf-8") as f:
    f.write({CONFIG!r})
print("wandb: 🚀 View run ppo-node at: {WANDB_RUN}", flush=True)
print("swanlab: 🚀 View run at {SWAN_RUN}", flush=True)
PY
exec sleep infinity"""


def _digest(value: str) -> str:
    return hashlib.sha256(value.encode()).hexdigest()


def _document(image: str, credentials: list[str]) -> dict:
    header = task(
        "header", head=True, replicas=1, selector={"kubernetes.io/hostname": "real-0"}, image=image, cluster=CLUSTER
    )
    header["runScript"] = RUN_SCRIPT
    header["tensorBoardDir"] = "/tmp/tb"  # the resolved config.yaml RLinf writes there is read inside the Header
    doc = document(JOB, header)
    if credentials:
        doc["spec"]["trackingCredentials"] = credentials
    return doc


def test_a_real_worker_gets_the_keys_nothing_shows_them_and_the_links_appear(
    real_nodes, real_cluster, real_namespace, alice
):
    TrackingCredential.objects.create(user=alice, name="team", kind="wandb", api_key=WANDB_KEY)
    TrackingCredential.objects.create(user=alice, name="lab", kind="swanlab", api_key=SWAN_KEY, host=SWAN_HOST)
    api = APIClient()
    api.force_authenticate(alice)
    resp = api.post("/api/v1/jobs/", _document(real_nodes.worker, ["team", "lab"]), format="json")
    assert resp.status_code == 201, resp.content
    wait_for(lambda: running(real_namespace, 1), 120, "the Header Running on a real node")
    try:
        log = wait_for(
            lambda: (t := real_namespace.kubectl("logs", POD, "-c", "main")) and "swanlab: 🚀" in t and t,
            150,
            "the run script's lines",
        )
    except pytest.fail.Exception as exc:
        raise AssertionError(f"{exc}\n{pod_logs(real_namespace)}") from None

    # the real container's processes hold the keys, read from the Secret by the kubelet
    assert f"WANDB_API_KEY sha256={_digest(WANDB_KEY)}" in log
    assert f"SWANLAB_API_KEY sha256={_digest(SWAN_KEY)}" in log
    assert f"SWANLAB_WEB_HOST sha256={_digest(SWAN_HOST)}" in log
    assert process_env(real_namespace, POD, "WANDB_API_KEY") == {WANDB_KEY}

    # ... and nothing a user or another tool reads shows them
    objects = real_namespace.kubectl("get", f"pod/{POD}", f"statefulset/{JOB}-header", "-o", "yaml")
    assert f"name: {JOB}-header-tracking" in objects  # the env's secretKeyRef
    assert WANDB_KEY not in objects and SWAN_KEY not in objects
    assert WANDB_KEY not in log and SWAN_KEY not in log
    client = Client()
    client.force_login(alice)
    synced(JOB, lambda j: j.phase == "Running", 60, "job Running")
    for url in (f"/jobs/{JOB}/", f"/jobs/{JOB}/?tab=yaml", f"/jobs/{JOB}/log/?pod={POD}", f"/api/v1/jobs/{JOB}/"):
        body = client.get(url).content.decode()
        assert WANDB_KEY not in body and SWAN_KEY not in body, url
    assert "trackingCredentials" in client.get(f"/jobs/{JOB}/?tab=yaml").content.decode()

    # the run links from the Header's log, within a sync: W&B's public host and the owner's self-hosted SwanLab
    metrics = wait_for(
        lambda: (t := client.get(f"/jobs/{JOB}/metrics/").content.decode()) and SWAN_RUN in t and t,
        60,
        "the run links on the Metrics tab",
    )
    assert WANDB_RUN in metrics
    # the resolved config the run wrote beside its events, read inside the real Header: byte for byte, checksummed
    assert "/tmp/tb/tensorboard/config.yaml" in metrics and _digest(CONFIG) in metrics
    assert "project_name: 真机" in metrics

    # an edit that drops the credentials: the Secret goes, the restarted Worker has no key
    before = real_namespace.pods()[POD]["metadata"]["uid"]
    resp = api.put(f"/api/v1/jobs/{JOB}/", _document(real_nodes.worker, []), format="json")
    assert resp.status_code == 200, resp.content
    wait_for(lambda: f"{JOB}-header-tracking" not in real_namespace.names("secrets"), 30, "the tracking Secret gone")

    def restarted_without_keys():
        pods = running(real_namespace, 1)
        if pods is None or pods[POD]["metadata"]["uid"] == before:
            return False
        text = real_namespace.kubectl("logs", POD, "-c", "main")
        return "swanlab: 🚀" in text and text

    log = wait_for(restarted_without_keys, 150, "the Worker restarted by the edit")
    assert f"WANDB_API_KEY sha256={_digest('')}" in log, log
    assert f"{JOB}-header-tracking" not in real_namespace.kubectl("get", "statefulset", f"{JOB}-header", "-o", "yaml")
