"""Benchmark of one node-sync cycle: 5 clusters x 200 pods on the fake Kubernetes API server (issue 5, acc. 4).

Prints one sync cycle's time (steady state: nothing changed, and the first cycle that creates the nodes), its
ratio to the raw list calls alone (the same HTTP list requests through the official client, JSON decoded,
without any processing or DB work), and the DB queries per cycle, plus the same with 2x pods to show the
query count does not depend on the pod count. Targets: ratio <= 2, queries independent of pod count.

    .venv/bin/python bench/sync.py [--clusters 5] [--pods 200] [--nodes 20] [--rounds 5]
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

import django  # noqa: E402

django.setup()

import logging  # noqa: E402

import yaml  # noqa: E402
from django.db import connection  # noqa: E402
from django.test.utils import CaptureQueriesContext, setup_test_environment  # noqa: E402

from tests.fake_k8s import FakeKubernetes  # noqa: E402


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
    parser.add_argument("--clusters", type=int, default=5)
    parser.add_argument("--pods", type=int, default=200)
    parser.add_argument("--nodes", type=int, default=20)
    parser.add_argument("--rounds", type=int, default=7)
    args = parser.parse_args()
    logging.disable(logging.WARNING)

    setup_test_environment()
    old_name = connection.creation.create_test_db(verbosity=0, keepdb=False)
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
        connection.creation.destroy_test_db(old_name, verbosity=0)


def _timed(fn) -> float:
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


if __name__ == "__main__":
    main()
