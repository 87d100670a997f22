"""Watch latency on the REAL control plane: how soon status follows a change. Not a test.

Starts one control plane of ``tools/k8s`` (etcd, kube-apiserver, controller-manager, scheduler, kwok on
127.0.0.1) with two kwok nodes, registers it as a console cluster through ``POST /api/v1/clusters/`` with the
``rlark-console`` ServiceAccount of ``deploy/rbac.yaml``, submits a one-Worker job and runs the console's watcher
(``jobs.observe.watcher.Watcher``, no periodic sync). Then, ``--rounds`` times, deletes the Header Pod (its
StatefulSet controller re-creates it with a new UID) and measures, from the delete call:

- **console**: until the job's stored status (the rows ``GET /api/v1/jobs/<name>/`` serves) holds the new UID;
- **raw watch**: until a plain ``kubernetes.watch`` stream of the namespace's Pods, opened by this script with the
  admin credentials, delivers the new Pod (what any watch-based client could know at best: the time the real
  controllers take to delete and re-create the Pod is in both).

Prints p50 and p95 of both, of their difference (the new Pod is in the API server -> the console's status holds
it: the console's own latency, goal p95 <= 2 s), the console / raw-watch ratio of the p95s, and the console's
latency against upstream RLark's 10 s status poll.

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/bench_watch .venv/bin/python bench/watch_latency.py [--rounds 20]

PostgreSQL (``DATABASE_URL``; a throwaway ``test_`` database is created and dropped) is needed: the watcher's
threads write while this script reads, which SQLite's in-memory test database refuses.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "rlark_console.settings")
os.environ["RLARK_VAR_DIR"] = tempfile.mkdtemp(prefix="rlark-bench-watch-")
os.environ["CELERY_TASK_ALWAYS_EAGER"] = "1"
os.environ.pop("REDIS_URL", None)  # in-process: the POST reconciles at once (no Celery worker runs here)
os.environ.setdefault("LOG_LEVEL", "ERROR")

import django  # noqa: E402

django.setup()

import logging  # noqa: E402

import kubernetes  # noqa: E402
import yaml  # noqa: E402
from django.db import connection  # noqa: E402
from django.test.utils import setup_test_environment  # noqa: E402

from bench.quick import quick_defaults, wait_for  # noqa: E402
from tools.k8s.controlplane import ControlPlane, missing_binaries  # noqa: E402
from tools.k8s.fleet import add_nodes, console_kubeconfig, gpu_fleet  # noqa: E402

NAMESPACE = "rlark-watch"
JOB = "watch-a"
POD = f"{JOB}-header-0"
UPSTREAM_POLL_S = 10.0  # upstream RLark's status poll (../shared/reference/upstream-rlark.md)


def pct(values: list[float], q: int) -> float:
    """The ``q``-th percentile (nearest rank) of ``values``."""
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q / 100 * len(ordered)) - 1))]


class RawWatch(threading.Thread):
    """A plain watch of the namespace's Pods: records when each Pod UID is first seen (``time.monotonic``)."""

    def __init__(self, api: kubernetes.client.ApiClient) -> None:
        super().__init__(daemon=True)
        self.core = kubernetes.client.CoreV1Api(api)
        self.seen: dict[str, float] = {}
        self.stop = threading.Event()

    def run(self) -> None:
        while not self.stop.is_set():
            stream = kubernetes.watch.Watch()
            try:
                for event in stream.stream(self.core.list_namespaced_pod, NAMESPACE, timeout_seconds=5):
                    self.seen.setdefault(event["object"].metadata.uid, time.monotonic())
                    if self.stop.is_set():
                        break
            except Exception:  # noqa: BLE001 - a closed stream: open a new one
                time.sleep(0.1)
            finally:
                stream.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=20)
    quick_defaults(parser, rounds=3)
    args = parser.parse_args()
    rounds = max(1, min(args.rounds, 200))
    if connection.vendor != "postgresql":
        sys.exit("bench/watch_latency.py needs a PostgreSQL DATABASE_URL (the watcher writes from its own threads)")
    logging.disable(logging.WARNING)
    if missing := missing_binaries():
        sys.exit(f"control plane binaries missing: {', '.join(missing)} (run `make k8s-build`)")

    from django.contrib.auth import get_user_model
    from rest_framework.test import APIClient

    from jobs.models import Pod
    from jobs.observe.watcher import Dispatcher, Watcher
    from tests.k8s_real.jobs import document, task

    setup_test_environment()
    old_name = connection.creation.create_test_db(verbosity=0, keepdb=False)
    cp = ControlPlane.start()
    stop = threading.Event()
    raw: RawWatch | None = None
    watcher = None
    try:
        add_nodes(cp, gpu_fleet("gpu", 2, gpus=8))
        cp.kubectl("create", "namespace", NAMESPACE)
        kubeconfig = console_kubeconfig(cp, NAMESPACE)
        admin = get_user_model().objects.create_superuser("bench-admin", "a@example.com", "x")
        api = APIClient()
        api.force_authenticate(admin)
        resp = api.post(
            "/api/v1/clusters/",
            {
                "name": "kwok-a",
                "runtime": "kubernetes",
                "namespace": NAMESPACE,
                "kubeconfig": yaml.safe_dump(kubeconfig),
            },
            format="json",
        )
        assert resp.status_code == 201, resp.content
        doc = document(JOB, task("header", head=True, replicas=1, selector={"kubernetes.io/hostname": "gpu-0"}))
        resp = api.post("/api/v1/jobs/", doc, format="json")
        assert resp.status_code == 201, resp.content

        loader = kubernetes.config.kube_config.KubeConfigLoader(json.loads(cp.admin_kubeconfig.read_text()))
        conf = kubernetes.client.Configuration()
        loader.load_and_set(conf)
        raw = RawWatch(kubernetes.client.ApiClient(conf))
        raw.start()
        watcher = Watcher(Dispatcher())
        runner = threading.Thread(target=watcher.run, args=(stop,), daemon=True)
        runner.start()

        def stored_uid() -> str:
            row = Pod.objects.filter(name=POD, phase="Running").first()
            return row.uid if row else ""

        wait_for(stored_uid, 90, "the Header Pod Running in the console", 0.2)
        console, plain = [], []
        for _ in range(rounds):
            old = stored_uid()
            t0 = time.monotonic()
            cp.kubectl("-n", NAMESPACE, "delete", "pod", POD, "--wait=false")
            new = wait_for(lambda old=old: (u := stored_uid()) and u != old and u, 30, "the new UID stored", 0.02)
            console.append(time.monotonic() - t0)
            plain.append(wait_for(lambda new=new: raw.seen.get(new), 10, "the raw watch event", 0.02) - t0)
        lag = [c - r for c, r in zip(console, plain, strict=True)]
        c95, r95, l95 = pct(console, 95), pct(plain, 95), pct(lag, 95)
        print(f"watch latency over {rounds} Pod re-creations")
        print(f"  delete -> console status  p50 {statistics.median(console):6.3f} s   p95 {c95:6.3f} s")
        print(f"  delete -> raw Pod watch   p50 {statistics.median(plain):6.3f} s   p95 {r95:6.3f} s")
        print(
            f"  new Pod in the API server -> console status (the console's own latency)"
            f"  p50 {statistics.median(lag):6.3f} s   p95 {l95:6.3f} s   (goal p95 <= 2 s)"
        )
        print(f"  ratio console / raw watch (p95, from the delete): {c95 / max(r95, 1e-6):.2f}")
        print(f"  ratio console latency p95 / upstream's 10 s poll: {l95 / UPSTREAM_POLL_S:.3f}")
    finally:
        stop.set()
        for watch in list(getattr(watcher, "watches", {}).values()):
            watch.stop()
        if raw is not None:
            raw.stop.set()
        logging.disable(logging.CRITICAL)  # the watches' streams end with the control plane
        cp.stop()
        connection.creation.destroy_test_db(old_name, verbosity=0)


if __name__ == "__main__":
    main()
