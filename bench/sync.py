"""Benchmarks of the status sync on the fake Kubernetes API server.

``jobs``: 1,000 active jobs / 3,000 Pods (header + 2 rollout Workers each) on one cluster, ideally on
PostgreSQL (``DATABASE_URL``). Prints the first cycle (every Pod row created), a steady cycle with nothing changed
(time, DB queries, runtime calls), a cycle that reads every running header's new log lines (what a targeted or
forced sync does; the periodic sync spreads these reads over ``RLARK_LOG_PROBE_INTERVAL``) and a cycle where every
Pod changed, each as a ratio to the raw list calls of the same objects (nodes, non-terminal pods, the job pods:
the same HTTP lists through the official client, JSON decoded, nothing else), plus the query count at a tenth of
the jobs to show it does not grow with them. Goals: steady <= 1 s and <= 20 queries; everything changed <= 3 s.
The fake API server runs in a process of its own (``tests.fake_k8s.process``), as a real API server does: in a
thread of this process (``--fake thread``) its JSON encoding would share the console's GIL and be timed with it.

``nodes``: one node-sync cycle, 5 clusters x 200 pods: time, ratio to the raw lists, queries with 1x and
2x pods. Target: ratio <= 2, queries independent of the pod count.

``RLARK_BENCH_PROFILE=1`` prints a cProfile (by own time) of one steady cycle to stderr.

    .venv/bin/python bench/sync.py [--what jobs|nodes|all] [--jobs 1000] [--clusters 5] [--pods 200] [--nodes 20]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "rlark_console.settings")
os.environ.setdefault("RLARK_CLUSTER_SYNC_DEADLINE", "60")  # measure slow cycles on a loaded machine, do not cut them

import django  # noqa: E402

django.setup()

import logging  # noqa: E402
from datetime import timedelta  # noqa: E402

import yaml  # noqa: E402
from django.conf import settings  # noqa: E402
from django.db import connection  # noqa: E402
from django.test.utils import CaptureQueriesContext, setup_test_environment  # noqa: E402
from django.utils import timezone  # noqa: E402

from bench.quick import quick_defaults  # noqa: E402
from tests.fake_k8s import FakeKubernetes  # noqa: E402
from tests.fake_k8s.process import add_fake_option, start_fake, where_text  # noqa: E402

PROFILE = os.environ.get("RLARK_BENCH_PROFILE") == "1"  # print a cProfile of one steady cycle to stderr


def populate(fake: FakeKubernetes, nodes: int, pods: int, start: int = 0) -> None:
    if not start:
        for i in range(nodes):
            fake.add_node(
                f"node-{i}",
                {"pool": "rollout" if i else "head", "rlark.io/gpu-model": "A100"},
                {"nvidia.com/gpu": 8, "cpu": 64, "memory": "512Gi", "rlinf.io/device-franka": 1},
            )
    for p in range(start, start + pods):
        fake.put(
            "pods",
            "rlark-system",
            {
                "metadata": {"name": f"job-{p // 50}-rollout-{p % 50}", "labels": {"rlinf.io/job": f"job-{p // 50}"}},
                "spec": {
                    "nodeName": f"node-{p % nodes}",
                    "containers": [
                        {
                            "name": "main",
                            "image": "registry.example.com/rlinf:1",
                            "resources": {"requests": {"cpu": "500m", "memory": "1Gi", "nvidia.com/gpu": "0"}},
                        }
                    ],
                },
                "status": {"phase": "Running", "podIP": f"10.244.{p // 250}.{p % 250}"},
            },
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--what", choices=("jobs", "nodes", "all"), default="all")
    parser.add_argument("--jobs", type=int, default=1000)
    parser.add_argument("--clusters", type=int, default=5)
    parser.add_argument("--pods", type=int, default=200)
    parser.add_argument("--nodes", type=int, default=20)
    parser.add_argument("--rounds", type=int, default=7)
    add_fake_option(parser)
    quick_defaults(parser, jobs=20, clusters=1, pods=20, nodes=4, rounds=2)
    args = parser.parse_args()
    logging.disable(logging.WARNING)

    setup_test_environment()
    old_name = connection.creation.create_test_db(verbosity=0, keepdb=False)
    try:
        if args.what in ("jobs", "all"):
            job_bench(args.jobs, args.rounds, args.fake)
        if args.what in ("nodes", "all"):
            node_bench(args)
    finally:
        connection.creation.destroy_test_db(old_name, verbosity=0)


def node_bench(args) -> None:
    from clusters.models import Cluster
    from clusters.runtime.kubernetes import KubernetesRuntime
    from clusters.services.node_sync import sync_all_clusters

    fakes = [FakeKubernetes(token=f"bench-{i}").start() for i in range(args.clusters)]
    try:
        for i, fake in enumerate(fakes):
            populate(fake, args.nodes, args.pods)
            Cluster.objects.create(
                name=f"bench-{i}", runtime="kubernetes", kubeconfig=yaml.safe_dump(fake.kubeconfig())
            )
        runtimes = [KubernetesRuntime(c) for c in Cluster.objects.order_by("name")]

        def raw_cycle() -> None:
            for rt in runtimes:
                rt.list_nodes_raw()

        def sync_cycle() -> tuple[float, int]:
            with CaptureQueriesContext(connection) as ctx:
                t0 = time.perf_counter()
                results = sync_all_clusters(force=True)
                elapsed = time.perf_counter() - t0
            assert all(r.ok for r in results), [r.error for r in results if not r.ok]
            return elapsed, len(ctx.captured_queries)

        first_time, first_queries = sync_cycle()  # creates every node row
        raw_cycle()  # warm connections
        raws, steady = [], []
        for _ in range(args.rounds):  # interleaved, so load from other processes hits both alike
            raws.append(_timed(raw_cycle))
            steady.append(sync_cycle())
        raw = statistics.median(raws)
        sync_time = statistics.median(t for t, _ in steady)
        queries = steady[-1][1]
        for fake in fakes:
            populate(fake, args.nodes, args.pods, start=args.pods)  # double the pods
        sync_cycle()  # absorbs the change in "used"
        doubled = [sync_cycle() for _ in range(args.rounds)]
        doubled_time = statistics.median(t for t, _ in doubled)
        print(f"clusters={args.clusters} nodes/cluster={args.nodes} pods/cluster={args.pods}")
        print(
            f"first sync cycle (creates {args.clusters * args.nodes} nodes): {first_time * 1000:.1f} ms, "
            f"{first_queries} DB queries"
        )
        print(f"raw list calls alone (nodes + non-terminal pods, all clusters): {raw * 1000:.1f} ms")
        print(f"one sync cycle (nothing changed): {sync_time * 1000:.1f} ms")
        print(f"ratio sync/raw: {sync_time / raw:.2f} (target <= 2)")
        print(
            f"DB queries per cycle: {queries} with {args.pods} pods/cluster, {doubled[-1][1]} with "
            f"{2 * args.pods} pods/cluster (cycle {doubled_time * 1000:.1f} ms)"
        )
    finally:
        for fake in fakes:
            fake.stop()
        Cluster.objects.all().delete()


NS = "rlark-system"
HEAD_LOG = (
    "RLINF_NODE_RANK: 0\nWaiting for 3 nodes to join the Ray cluster...\n"
    "Ray cluster is ready. Printing cluster information:\nExecuting run script...\n"
)


def _job_pods(fake: FakeKubernetes, jobs: int, start: int = 0, ip_base: int = 0) -> None:
    for j in range(start, start + jobs):
        for task, ordinal in (("header", 0), ("rollout", 0), ("rollout", 1)):
            name = f"bj-{j}-{task}-{ordinal}"
            fake.put(
                "pods",
                NS,
                {
                    "metadata": {
                        "name": name,
                        "labels": {"rlinf.io/job": f"bj-{j}", "rlinf.io/task": f"bj-{j}-{task}"},
                    },
                    "spec": {"nodeName": f"node-{j % 50}", "containers": [{"name": "main", "image": "rlinf:1"}]},
                    "status": {
                        "phase": "Running",
                        "podIP": f"10.{ip_base + j // 250}.{j % 250}.{ordinal + (task == 'rollout') * 2}",
                        "containerStatuses": [
                            {"name": "main", "ready": True, "restartCount": 0, "state": {"running": {}}}
                        ],
                    },
                },
            )
            if task == "header":
                fake.set_log(NS, name, HEAD_LOG)


def _job_rows(cluster, owner, jobs: int, start: int = 0) -> None:
    from jobs.models import Job, Task

    rows = [
        Job(
            name=f"bj-{j}",
            owner=owner,
            spec={"metadata": {"name": f"bj-{j}"}, "spec": {"tasks": []}},
            phase="Pending",
            generation=1,
            observed_generation=1,
            started_at=timezone.now() - timedelta(minutes=5),  # before its Pods were created, as in a real start
        )
        for j in range(start, start + jobs)
    ]
    Job.objects.bulk_create(rows)
    by_name = {j.name: j for j in Job.objects.filter(name__in=[r.name for r in rows])}
    tasks = []
    for j in range(start, start + jobs):
        job = by_name[f"bj-{j}"]
        for order, (template, head, replicas) in enumerate((("header", True, 1), ("rollout", False, 2))):
            tasks.append(
                Task(
                    job=job,
                    template_name=template,
                    name=f"bj-{j}-{template}",
                    cluster=cluster,
                    namespace=NS,
                    head=head,
                    order=order,
                    replicas=replicas,
                    rank_start=order,
                    applied_replicas=replicas,
                )
            )
    Task.objects.bulk_create(tasks)


def job_bench(jobs: int, rounds: int, where: str = "process") -> None:
    from django.contrib.auth import get_user_model

    from clusters.models import Cluster
    from clusters.runtime.kubernetes import KubernetesRuntime
    from clusters.runtime.kubernetes.runtime import JOB_LABEL
    from jobs.models import Job
    from jobs.observe import sync

    fake = start_fake(where, token="bench-jobs")
    try:
        for i in range(50):
            fake.add_node(f"node-{i}", {"pool": "gpu"}, {"nvidia.com/gpu": 8, "cpu": 64, "memory": "512Gi"})
        cluster = Cluster.objects.create(
            name="bench-jobs", runtime="kubernetes", kubeconfig=yaml.safe_dump(fake.kubeconfig())
        )
        owner = get_user_model().objects.create_user("bench", password="bench-pass-1")
        runtime = KubernetesRuntime(cluster)

        def raw_cycle() -> None:
            runtime.list_nodes_raw()
            runtime._json(runtime.core.list_namespaced_pod, NS, label_selector=JOB_LABEL, what="pods")

        def cycle(force: bool = False) -> tuple[float, int, dict]:
            with CaptureQueriesContext(connection) as ctx:
                t0 = time.perf_counter()
                result = sync.sync_all_clusters(force=force)
                elapsed = time.perf_counter() - t0
            assert result.get("clusters") == {"bench-jobs": "online"}, result
            return elapsed, len(ctx.captured_queries), result["stats"]

        settings.RLARK_SYNC_INTERVAL = 0  # every call is a cycle
        small = max(1, jobs // 10)
        _job_pods(fake, small)
        _job_rows(cluster, owner, small)
        cycle(force=True)
        cycle()
        small_queries = statistics.median(cycle()[1] for _ in range(3))

        _job_pods(fake, jobs - small, start=small)
        _job_rows(cluster, owner, jobs - small, start=small)
        first = cycle(force=True)  # creates the Pod rows of the new jobs, reads header logs within its budget
        catch_up = [first]
        while Job.objects.filter(phase="Running").count() < jobs:  # the header logs left for later cycles
            catch_up.append(cycle(force=True))
            assert len(catch_up) < 20, Job.objects.exclude(phase="Running").first().message
        raw_cycle()
        raws, steady = [], []
        for _ in range(rounds):
            raws.append(_timed(raw_cycle))
            steady.append(cycle())
        if PROFILE:
            import cProfile
            import pstats

            prof = cProfile.Profile()
            prof.runcall(cycle)
            order = os.environ.get("RLARK_BENCH_PROFILE_SORT", "tottime")  # or cumulative
            pstats.Stats(prof, stream=sys.stderr).sort_stats(order).print_stats(40)
        raw = statistics.median(raws)
        steady_time = statistics.median(t for t, _, _ in steady)
        steady_queries = steady[-1][1]
        probe = cycle(force=True)  # every running header's new log lines (none new): what the probes cost
        for j in range(jobs):  # every Pod changes (a new IP), the same instances (no new log)
            for name in (f"bj-{j}-header-0", f"bj-{j}-rollout-0", f"bj-{j}-rollout-1"):
                fake.set_pod(NS, name, ip=f"10.{100 + j // 250}.{j % 250}.{name[-1]}")
        changed = cycle()
        pods = 3 * jobs
        print(
            f"jobs: {jobs} active jobs, {pods} Pods, 50 nodes, one cluster ({connection.vendor}; the fake API server "
            f"in {where_text(where)})"
        )
        print(f"raw list calls alone (nodes + non-terminal pods + job pods): {raw * 1000:.1f} ms")
        print(
            f"first cycle (creates {pods - 3 * small} Pod rows): {first[0] * 1000:.1f} ms, {first[1]} queries, "
            f"{first[2]['log_reads']} header logs read; all {jobs} jobs Running after {len(catch_up)} cycles "
            f"({sum(c[0] for c in catch_up):.1f} s)"
        )
        print(
            f"steady cycle (nothing changed): {steady_time * 1000:.1f} ms, {steady_queries} DB queries, "
            f"{steady[-1][2]['calls']} runtime calls, {steady[-1][2]['log_reads']} log reads; "
            f"ratio sync/raw: {steady_time / raw:.2f} (goal <= 1 s, <= 20 queries)"
        )
        print(f"DB queries per steady cycle: {small_queries:.0f} at {small} jobs, {steady_queries} at {jobs} jobs")
        print(
            f"cycle reading every header's new log lines: {probe[0] * 1000:.1f} ms, {probe[2]['log_reads']} reads, "
            f"ratio {probe[0] / raw:.2f}"
        )
        print(
            f"cycle where every Pod changed: {changed[0] * 1000:.1f} ms, {changed[1]} queries, "
            f"{changed[2]['changed_jobs']} jobs written; ratio {changed[0] / raw:.2f} (goal <= 3 s)"
        )
    finally:
        fake.stop()
        Job.objects.all().delete()
        Cluster.objects.all().delete()


def _timed(fn) -> float:
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


if __name__ == "__main__":
    main()
