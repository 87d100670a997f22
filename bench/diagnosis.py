"""Diagnosis and Run check of a large job: a 20-role job at 20 and at 200 Workers on the fake
Kubernetes API server, cold and warm, with query counts, runtime calls and the ratio to the raw reading of the logs.

The job has 20 roles (a Header role of 1 Worker and 19 rollout roles); at the small point every role has 1
Worker (20 Workers), at the large point the 19 rollout roles share 199 Workers (200 Workers). Every Worker has a
wrapper log as the scripts print it (rank, prepare, connect, head reachable, then ``LOG_LINES`` lines of
training output); the Header's log has the ray_check lines, RLinf's cluster line and ``Global Step`` lines. Pod
rows are stored as the status sync leaves them (the fake's Pods, Running and ready).

Times, through Django's test client as a staff user, ``GET /api/v1/jobs/<job>/diagnosis/`` and
``/run-check/`` (p50 of ``--rounds``), and counts the database queries and the calls to the fake API server of
one request:

- cold: no stored log scan (``jobs.models.PodLogScan`` deleted before each GET): every Worker log read and
  scanned in the request, as on a first visit;
- warm: the scans are fresh (younger than ``RLARK_LOG_SCAN_MAX_AGE``): the page reads the stored scans only.

``--real``: the same on the real control plane of ``tools/k8s`` (``make k8s-build``) instead of the fake: 20 kwok
Nodes, the Pods Running on them, and each Worker's log a CRI log file that kwok serves as ``pods/log`` through
the kube-apiserver (so the incremental reads carry timestamps, as on a real cluster). The fake answers a log read
from memory in about 0.5 ms; the real API server proxies it to the node, about 10 ms here. A cold page is mostly
the console's own CPU (the client, the scan, the write) on the fake, and mostly waiting on the real one.

Also the background refresh of the large job's scans when nothing was appended (``log_scans.refresh_stale``).
"Raw reading" is every Worker log the page needs read once through the same runtime (``KubernetesRuntime
.stream_log``, bytes joined, nothing parsed): the floor of a page that reads them all. Goal: <= 150 ms and <= 15
queries at 200 Workers, the same queries at 20 and 200, and a cold page <= 2x the raw read.

    .venv/bin/python bench/diagnosis.py [--workers 200] [--small 20] [--rounds 7] [--lines 400]

The fake API server runs in a process of its own (``--fake thread``: in a thread of this one, sharing its GIL).
A throwaway ``test_`` database is created and dropped (``DATABASE_URL`` for PostgreSQL). ``--quick`` (or
``RLARK_BENCH_QUICK=1``): 20 vs 60 Workers, 2 rounds.
"""

from __future__ import annotations

import argparse
import logging
import os
import shutil
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "rlark_console.settings")

import django  # noqa: E402

django.setup()

import yaml  # noqa: E402
from django.db import connection  # noqa: E402
from django.test import Client  # noqa: E402
from django.test.utils import CaptureQueriesContext, setup_test_environment  # noqa: E402

from bench.quick import quick_defaults  # noqa: E402
from jobs.observe.worker_logs import PARALLEL  # noqa: E402  (the page's reads in flight)
from tests.fake_k8s import FakeKubernetes  # noqa: E402
from tests.fake_k8s.process import add_fake_option, start_fake, where_text  # noqa: E402

NS = "rlark-system"
ROLES = 20


def head_log(workers: int, lines: int) -> str:
    out = [
        "RLINF_NODE_RANK: 0",
        "Executing prepare script...",
        f"Waiting for {workers} nodes to join the Ray cluster...",
        f"Waiting for cluster to have at least {workers} nodes.",
        f"Cluster is ready: {workers} nodes available (required: {workers}).",
        "Ray cluster is ready. Printing cluster information:",
        "Executing run script...",
        f"RLinf is running on a cluster with {workers} nodes",
    ]
    out += [f"Global Step: {i}/100000 reward={i * 0.01:.2f} loss=0.{i % 97:02d} lr=1e-5" for i in range(lines)]
    return "\n".join(out) + "\n"


def worker_log(rank: int, lines: int) -> str:
    out = [
        f"RLINF_NODE_RANK: {rank}",
        "Executing prepare script...",
        "Connecting to Ray head at bd-header-0.bd-header:6379...",
        "HEAD IP: 10.0.0.1",
        "Head is reachable at 10.0.0.1:6379",
    ]
    out += [
        f"(RolloutWorker pid={1000 + rank}) step {i}: generated 512 sequences in 0.{i % 89:02d} s, kv-cache 71%"
        for i in range(lines)
    ]
    return "\n".join(out) + "\n"


def layout(workers: int) -> list[tuple[str, bool, int]]:
    """(template, head, replicas) of the 20 roles: a Header of 1 and 19 rollout roles sharing the rest."""
    rest = workers - 1
    share = [rest // (ROLES - 1) + (1 if i < rest % (ROLES - 1) else 0) for i in range(ROLES - 1)]
    return [("header", True, 1)] + [(f"rollout{i:02d}", False, n) for i, n in enumerate(share)]


def seed(fake: FakeKubernetes, cluster, owner, name: str, workers: int, lines: int):
    """The Job row, its Tasks and Pod rows, and the fake's Pods and logs; returns the Job."""
    from django.utils import timezone

    from jobs.models import Job, Phase, Pod, Task
    from tests.fake_runtime import job_document

    roles = layout(workers)
    job = Job.objects.create(
        name=name,
        owner=owner,
        spec=job_document(name, roles=roles, cluster=cluster.name),
        phase=Phase.RUNNING,
        started_at=timezone.now() - timezone.timedelta(minutes=10),
        run_check={"max_wait_minutes": 60},
    )
    rank = 0
    pods = []
    for order, (template, head, replicas) in enumerate(roles):
        task = Task.objects.create(
            job=job,
            template_name=template,
            name=f"{name}-{template}",
            cluster=cluster,
            namespace=NS,
            head=head,
            order=order,
            replicas=replicas,
            rank_start=rank,
            applied_replicas=replicas,
            ready_replicas=replicas,
            phase=Phase.RUNNING,
        )
        for k in range(replicas):
            pod = f"{task.name}-{k}"
            node = f"{template}-node"
            fake.put(
                "pods",
                NS,
                {
                    "metadata": {"name": pod, "labels": {"rlinf.io/job": name, "rlinf.io/task": task.name}},
                    "spec": {"nodeName": node, "containers": [{"name": "main", "image": "rlinf/rlinf:demo-1"}]},
                    "status": {"phase": "Running", "podIP": f"10.1.{rank // 250}.{rank % 250}"},
                },
            )
            fake.set_log(NS, pod, head_log(workers, lines) if head else worker_log(rank + k, lines))
            pods.append(
                Pod(
                    task=task,
                    name=pod,
                    ordinal=k,
                    uid=f"uid-{pod}",
                    node=node,
                    ip=f"10.1.{rank // 250}.{rank % 250}",
                    phase="Running",
                    container_state={"state": "running", "ready": True, "restart_count": 0},
                    created_at=timezone.now() - timezone.timedelta(minutes=9),
                    started_at=timezone.now() - timezone.timedelta(minutes=9),
                )
            )
        rank += replicas
    Pod.objects.bulk_create(pods)
    return job


class RealBackend:
    """The real control plane of ``tools/k8s`` (etcd, kube-apiserver, controller-manager, scheduler, kwok) in the
    role of the fake: ``put`` collects Pods, ``set_log`` writes each Worker's log as a CRI log file that kwok
    serves as ``pods/log`` (a ``Logs`` object per Pod, through the API server, timestamps included), and
    :meth:`flush` applies them all and waits until every Pod is Running. ``request_count``: HTTP requests the
    console's Kubernetes client made (``kubernetes.client.rest.RESTClientObject.request``, counted here)."""

    def __init__(self, work: Path) -> None:
        import kubernetes.client.rest as rest

        from tools.k8s.controlplane import ControlPlane, missing_binaries

        if missing := missing_binaries():
            sys.exit(f"control plane binaries missing: {', '.join(missing)} (run `make k8s-build`)")
        self.work = work
        self.cp = ControlPlane.start(work=work / "cp")
        self.docs: list[dict] = []
        self.request_count = 0
        self._rest = rest
        self._request = original = rest.RESTClientObject.request

        def counted(client, *args, **kwargs):
            self.request_count += 1
            return original(client, *args, **kwargs)

        rest.RESTClientObject.request = counted

    def kubeconfig(self) -> dict:
        from tools.k8s.fleet import console_kubeconfig

        return console_kubeconfig(self.cp, NS)

    def add_nodes(self, names: list[str]) -> None:
        from tools.k8s.fleet import NodeSpec, add_nodes

        add_nodes(self.cp, [NodeSpec(name=n) for n in names])

    def put(self, kind: str, namespace: str, obj: dict) -> None:
        meta = obj["metadata"]
        self.docs.append(
            {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {"name": meta["name"], "namespace": namespace, "labels": meta["labels"]},
                "spec": obj["spec"],
            }
        )

    def set_log(self, namespace: str, pod: str, text: str) -> None:
        path = self.work / f"{pod}.log"
        start = time.time() - 600
        with path.open("w") as f:
            for i, line in enumerate(text.splitlines()):
                stamp = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(start + i // 1000))
                f.write(f"{stamp}.{(i % 1000) * 1000000:09d}Z stdout F {line}\n")
        self.docs.append(
            {
                "apiVersion": "kwok.x-k8s.io/v1alpha1",
                "kind": "Logs",
                "metadata": {"name": pod, "namespace": namespace},
                "spec": {"logs": [{"containers": ["main"], "logsFile": str(path)}]},
            }
        )

    def flush(self) -> None:
        from bench.quick import wait_for

        for k in range(0, len(self.docs), 100):
            self.cp.kubectl(
                "apply", "--server-side", "-f", "-", input=yaml.safe_dump_all(self.docs[k : k + 100]), timeout=120
            )
        pods = sum(d["kind"] == "Pod" for d in self.docs)
        self.docs = []

        def running() -> bool:
            items = yaml.safe_load(self.cp.kubectl("-n", NS, "get", "pods", "-o", "yaml"))["items"]
            return sum((p.get("status") or {}).get("phase") == "Running" for p in items) >= pods

        wait_for(running, 180, f"{pods} Pods Running", interval=1)

    def stop(self) -> None:
        self._rest.RESTClientObject.request = self._request
        try:
            self.cp.stop()
        finally:
            shutil.rmtree(self.work, ignore_errors=True)


def measure(client: Client, fake: FakeKubernetes, url: str, rounds: int, cold: bool, job) -> tuple[float, int, int]:
    """(p50 ms, queries, runtime calls) of ``rounds`` GETs of ``url``; ``cold``: the job's stored log scans are
    deleted before each GET, else they are left fresh by one GET before."""
    from jobs.models import PodLogScan

    assert client.get(url).status_code == 200, url
    times = []
    for _ in range(rounds):
        if cold:
            PodLogScan.objects.filter(pod__task__job=job).delete()
        calls = fake.request_count
        with CaptureQueriesContext(connection) as ctx:
            t0 = time.perf_counter()
            response = client.get(url)
            times.append((time.perf_counter() - t0) * 1000)
        assert response.status_code == 200, (url, response.status_code)
    return statistics.median(times), len(ctx.captured_queries), fake.request_count - calls


def background_refresh(fake: FakeKubernetes, job, rounds: int) -> tuple[float, int, int]:
    """(p50 ms, queries, runtime calls) of refreshing every stored scan of ``job`` (all older than the max age,
    nothing appended to the logs): the Celery task's work."""
    from datetime import timedelta

    from django.utils import timezone

    from jobs.models import PodLogScan
    from jobs.observe import log_scans

    times = []
    for _ in range(rounds):
        PodLogScan.objects.filter(pod__task__job=job).update(updated_at=timezone.now() - timedelta(hours=2))
        calls = fake.request_count
        with CaptureQueriesContext(connection) as ctx:
            t0 = time.perf_counter()
            log_scans.refresh_stale(job)
            times.append((time.perf_counter() - t0) * 1000)
    return statistics.median(times), len(ctx.captured_queries), fake.request_count - calls


def raw_read(job, rounds: int, parallel: int = 1) -> float:
    """p50 ms of reading every Worker log of ``job`` once through the runtime, bytes joined, nothing parsed;
    ``parallel``: reads in flight (threads), 1 = one after the other."""
    from concurrent.futures import ThreadPoolExecutor

    from clusters.runtime import registry
    from jobs.models import Pod

    pods = list(Pod.objects.filter(task__job=job).select_related("task__cluster"))
    runtime = registry.runtime_for(pods[0].task.cluster)

    def one(p) -> bytes:
        return b"".join(runtime.stream_log(p.task.namespace, p.name))

    def once() -> None:
        if parallel <= 1:
            for p in pods:
                one(p)
        else:
            with ThreadPoolExecutor(parallel) as pool:
                list(pool.map(one, pods))

    once()
    times = []
    for _ in range(rounds):
        t0 = time.perf_counter()
        once()
        times.append((time.perf_counter() - t0) * 1000)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workers", type=int, default=200, help="Workers at the large point")
    parser.add_argument("--small", type=int, default=20, help="Workers at the small point (>= 20: one per role)")
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--lines", type=int, default=400, help="training-output lines per Worker log")
    add_fake_option(parser)
    parser.add_argument(
        "--real",
        action="store_true",
        help="the real control plane of tools/k8s (kube-apiserver, kwok serving the logs) instead of the fake",
    )
    quick_defaults(parser, workers=60, rounds=2, lines=100)
    args = parser.parse_args()
    logging.disable(logging.WARNING)
    setup_test_environment()
    from django.conf import settings

    settings.RLARK_LOG_SCAN_MAX_AGE = 3600  # warm rounds: every stored scan stays fresh
    old_name = connection.creation.create_test_db(verbosity=0, keepdb=False)
    try:
        run(args)
    finally:
        connection.creation.destroy_test_db(old_name, verbosity=0)


def run(args) -> None:
    from django.contrib.auth import get_user_model

    from clusters.models import Cluster, Node

    if args.real:
        import tempfile

        fake = RealBackend(Path(tempfile.mkdtemp(prefix="rlark-bench-diag-")))
    else:
        fake = start_fake(args.fake, token="bench-diagnosis")
    try:
        cluster = Cluster.objects.create(
            name="bench-diag", runtime="kubernetes", namespace=NS, kubeconfig=yaml.safe_dump(fake.kubeconfig())
        )
        if args.real:
            fake.add_nodes([f"{template}-node" for template, _, _ in layout(args.workers)])
        for template, _, _ in layout(args.workers):
            Node.objects.create(
                cluster=cluster, name=f"{template}-node", labels={"kubernetes.io/hostname": f"{template}-node"}
            )
        admin = get_user_model().objects.create(username="bench-admin", password="!", is_staff=True, is_superuser=True)
        client = Client()
        client.force_login(admin)
        results = {}
        jobs = {}
        for workers in (args.small, args.workers):
            job = seed(fake, cluster, admin, f"bd{workers}", workers, args.lines)
            if args.real:
                fake.flush()
            jobs[workers] = job
            row: dict = {"raw": raw_read(job, args.rounds), "raw_parallel": raw_read(job, args.rounds, PARALLEL)}
            for what, path in (("Diagnosis", "diagnosis"), ("Run check", "run-check")):
                url = f"/api/v1/jobs/{job.name}/{path}/"
                row[what, "cold"] = measure(client, fake, url, args.rounds, True, job)
                row[what, "warm"] = measure(client, fake, url, args.rounds, False, job)
            results[workers] = row
        refresh = background_refresh(fake, jobs[args.workers], args.rounds)
    finally:
        fake.stop()

    backend = (
        "the real kube-apiserver, kwok serving the logs (timestamps)"
        if args.real
        else f"the fake API server in {where_text(args.fake)}"
    )
    print(
        f"database: {connection.vendor}; a {ROLES}-role job; {args.lines} output lines per Worker log; "
        f"p50 of {args.rounds} GETs (API) as a staff user; {backend}; "
        f"load average {os.getloadavg()[0]:.2f}"
    )
    for workers, row in results.items():
        print(
            f"raw reading of the {workers} Worker logs (stream_log, nothing parsed): {row['raw']:.1f} ms one after "
            f"the other, {row['raw_parallel']:.1f} ms {PARALLEL} in flight (as the page reads them)"
        )
    small, big = args.small, args.workers
    for what in ("Diagnosis", "Run check"):
        for workers in (small, big):
            raw = results[workers]["raw"]
            for mode in ("cold", "warm"):
                ms, queries, calls = results[workers][what, mode]
                print(
                    f"{what} at {workers} Workers, {mode}: {ms:.1f} ms p50, {queries} queries, {calls} runtime "
                    f"calls, ratio to the raw reading of the logs {ms / raw:.2f} "
                    f"({ms / results[workers]['raw_parallel']:.2f} to {PARALLEL} in flight)"
                )
        cold_ms, warm_ms = results[big][what, "cold"][0], results[big][what, "warm"][0]
        print(
            f"{what} queries: cold {results[small][what, 'cold'][1]} at {small} Workers, "
            f"{results[big][what, 'cold'][1]} at {big}; warm {results[small][what, 'warm'][1]} at {small}, "
            f"{results[big][what, 'warm'][1]} at {big} (goal <= 15, the same at both); at {big} Workers "
            f"{warm_ms:.1f} ms warm (goal <= 150 ms), {cold_ms:.1f} ms cold; ratio cold/warm {cold_ms / warm_ms:.1f}, "
            f"warm {big}/{small} Workers {warm_ms / results[small][what, 'warm'][0]:.2f}"
        )
    ms, queries, calls = refresh
    print(
        f"background refresh of the {big} Workers' scans (nothing appended): {ms:.1f} ms p50, {queries} queries, "
        f"{calls} runtime calls, ratio to the raw reading of the logs {ms / results[big]['raw']:.2f}"
    )


if __name__ == "__main__":
    main()
