"""Status that follows changes at once, against the REAL control plane (kube-apiserver + kwok):

- log signals are read from a cursor through the real ``pods/log`` (``timestamps=true``, ``sinceTime``): a header
  that prints 5,000 lines right after ``Ray cluster is ready`` before the first sync still leaves Pending, and the
  next read returns only the new lines;
- the per-cluster watch (``jobs.observe.watcher``) brings a Pod change in the API server to the job's stored
  status with no periodic sync running at all (its latency, goal p95 <= 2 s, is measured by
  ``bench/watch_latency.py``, not asserted here).
"""

from __future__ import annotations

import threading

import pytest
from django.db import OperationalError
from rest_framework.test import APIClient

from clusters.runtime.kubernetes import KubernetesRuntime
from jobs.models import Job, Pod
from jobs.observe.watcher import Dispatcher, Watcher
from tests.k8s_real.conftest import wait_for
from tests.k8s_real.jobs import document, running, synced, task

pytestmark = [pytest.mark.k8s_real, pytest.mark.django_db(transaction=True), pytest.mark.timeout(240)]
POD = "cur-header-0"


@pytest.fixture
def header_job(k8s_cluster, k8s_namespace, alice):
    api = APIClient()
    api.force_authenticate(alice)
    doc = document("cur", task("header", head=True, replicas=1, selector={"kubernetes.io/hostname": "cpu-0"}))
    assert api.post("/api/v1/jobs/", doc, format="json").status_code == 201
    wait_for(lambda: running(k8s_namespace, 1), 60, "header Running")
    return k8s_cluster


def test_5000_lines_after_ray_ready_through_real_pods_log(header_job, k8s_namespace):
    lines = ["RLINF_NODE_RANK: 0", "Ray cluster is ready. Printing cluster information:", "Executing run script..."]
    steps = [f"Global Step {i}/5000 loss=0.{i:04d}" for i in range(1, 5001)]
    k8s_namespace.write_log(POD, lines + steps)  # all of it before the console's first look at the log
    synced("cur", lambda j: j.phase == "Running", 30, "job Running despite 5,000 lines after the marker")

    runtime = KubernetesRuntime(header_job)
    first = runtime.read_log_from(k8s_namespace.name, POD, "")
    assert first.text.count("\n") == 5003 and first.cursor.startswith("T"), first.cursor  # kwok sends timestamps
    assert runtime.read_log_from(k8s_namespace.name, POD, first.cursor).text == ""
    k8s_namespace.write_log(POD, ["Global Step 5001/5000", "Run script exited with code 0"], append=True)
    second = runtime.read_log_from(k8s_namespace.name, POD, first.cursor)
    assert second.text == "Global Step 5001/5000\nRun script exited with code 0\n"
    synced("cur", lambda j: j.phase == "Succeeded", 30, "job Succeeded")


def _pod_uid(name: str) -> str | None:
    try:
        return Pod.objects.filter(name=name).values_list("uid", flat=True).first()
    except OperationalError:  # SQLite's shared cache while the watcher's sync writes
        return None


def test_watch_alone_brings_each_pod_change_to_the_job(header_job, k8s_namespace):
    synced("cur", lambda j: Pod.objects.filter(name=POD, phase="Running").exists(), 30, "Pod row Running")
    watcher = Watcher(Dispatcher())
    stop = threading.Event()
    runner = threading.Thread(target=watcher.run, args=(stop,), daemon=True)
    runner.start()
    try:
        wait_for(lambda: len(watcher.watches) == 2 and all(w.resource_version for w in watcher.watches.values()),
                 20, "watches started")  # fmt: skip
        for _ in range(3):
            old = _pod_uid(POD)
            k8s_namespace.kubectl("delete", "pod", POD, "--wait=false")  # the StatefulSet controller re-creates it
            # no sync runs in this test: only the watch can bring the new Pod's uid (the periodic sync is 10 s)
            wait_for(lambda old=old: (_pod_uid(POD) or old) != old, 20, "the new Pod's uid in the database", 0.05)
            wait_for(lambda: running(k8s_namespace, 1), 30, "header Running again")
        assert Job.objects.get(name="cur").phase in ("Pending", "Running")
    finally:
        stop.set()
        runner.join(10)
