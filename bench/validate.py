"""Time to validate + render a 20-role job, and its ratio to a bare ``yaml.safe_dump`` of the same document.

Usage: ``.venv/bin/python bench/validate.py [--roles 20] [--repeat 200]``. Target: <= 20 ms.
Plain data only (no database): the same ``validate`` and ``render_yaml`` the API, wizard and CLI use, against an
inventory of 2 clusters x 40 nodes. Prints the median and p95 of ``normalize + validate + render_yaml``.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "rlark_console.settings")

import django  # noqa: E402

django.setup()  # the validator reads settings (limits, locale) and model choices

import yaml  # noqa: E402

from bench.quick import quick_defaults  # noqa: E402
from jobs.jobspec.document import normalize, render_yaml  # noqa: E402
from jobs.jobspec.inventory import ClusterInfo, Inventory, NodeInfo, SSHKeyInfo  # noqa: E402
from jobs.jobspec.validator import validate  # noqa: E402

GiB = 2**30


def make_inventory(nodes_per_cluster: int = 40) -> Inventory:
    nodes = []
    for cluster in ("alpha", "beta"):
        for i in range(nodes_per_cluster):
            name = f"{cluster}-{i}"
            res = {"nvidia.com/gpu": 8, "cpu": 64, "memory": 512 * GiB}
            nodes.append(
                NodeInfo(
                    cluster=cluster,
                    name=name,
                    labels={"kubernetes.io/hostname": name, "pool": f"{cluster}-pool-{i % 20}", "zone": cluster},
                    capacity=res,
                    allocatable=res,
                    used={},
                )
            )
    return Inventory(
        clusters={c: ClusterInfo(c, "kubernetes", "online", True) for c in ("alpha", "beta")},
        nodes=nodes,
        storage_classes={("alpha", "oss"), ("beta", "oss")},
        domains={"d1"},
        ssh_keys=[SSHKeyInfo(1, "k", "ssh-ed25519 AAAAbench", "fp")],
    )


def make_job(roles: int) -> dict:
    tasks = []
    for i in range(roles):
        head = i == 0
        selector = {"kubernetes.io/hostname": "alpha-0"} if head else {"pool": f"alpha-pool-{i}", "zone": "alpha"}
        replicas = 1 if head else 2
        tasks.append(
            {
                "name": f"role-{i}",
                "head": head,
                "agentType": "Kubernetes",
                "role": ("Actor", "Rollout", "Env")[i % 3],
                "cluster": "alpha",
                "nodeSelector": selector,
                "prepareScript": "source switch_env openvla\nexport OMP_NUM_THREADS=8",
                **(
                    {"runScript": "cd /workspace/RLinf && bash examples/embodiment/run_embodiment.sh x"} if head else {}
                ),
                "kubernetes": {
                    "workload": {
                        "kind": "StatefulSet",
                        "replicas": replicas,
                        "pvcStorageMap": {f"pvc-bench-role-{i}-mnt-data": "oss"},
                        "template": {
                            "spec": {
                                "containers": [
                                    {
                                        "name": "main",
                                        "image": "rlinf/rlinf:agentic-rlinf0.4-maniskill_libero",
                                        "env": [
                                            {"name": "RLINF_LOG_LEVEL", "value": "INFO"},
                                            {"name": "NVIDIA_DRIVER_CAPABILITIES", "value": "all"},
                                            {"name": "RLARK_TASK_ROLE", "value": f"Role {i}"},
                                        ],
                                        "resources": {
                                            "requests": {"nvidia.com/gpu": "2", "cpu": "8", "memory": "64Gi"},
                                            "limits": {"nvidia.com/gpu": "2", "cpu": "8", "memory": "64Gi"},
                                        },
                                        "volumeMounts": [
                                            {"name": "mnt-data", "mountPath": "/mnt/data"},
                                            {"name": "dshm", "mountPath": "/dev/shm"},
                                        ],
                                    }
                                ],
                                "volumes": [
                                    {
                                        "name": "mnt-data",
                                        "persistentVolumeClaim": {"claimName": f"pvc-bench-role-{i}-mnt-data"},
                                    },
                                    {"name": "dshm", "emptyDir": {"medium": "Memory", "sizeLimit": "20Gi"}},
                                ],
                            }
                        },
                    }
                },
            }
        )
    return {
        "apiVersion": "rlinf.io/v1alpha1",
        "kind": "Job",
        "metadata": {"name": "bench", "annotations": {"rlark.io/display-name": "Bench job"}},
        "spec": {"tasks": tasks, "domain": "d1", "stopped": False},
    }


def timed(fn, repeat: int) -> list[float]:
    out = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        out.append((time.perf_counter() - start) * 1000)
    return out


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--roles", type=int, default=20)
    parser.add_argument("--repeat", type=int, default=200)
    quick_defaults(parser, repeat=20)
    args = parser.parse_args()
    inventory = make_inventory()
    job = make_job(args.roles)

    def full():
        doc = normalize(job)
        result = validate(doc, inventory)
        render_yaml(doc)
        return result

    result = full()
    if not result.valid:
        print("bench job is not valid:", result.to_dict("en")["errors"][:3], file=sys.stderr)
        return 1
    for _ in range(10):  # warm up
        full()
        yaml.safe_dump(job)
    ours = timed(full, args.repeat)
    bare = timed(lambda: yaml.safe_dump(job, sort_keys=False, allow_unicode=True), args.repeat)
    med, p95 = statistics.median(ours), sorted(ours)[int(len(ours) * 0.95) - 1]
    bare_med = statistics.median(bare)
    print(f"roles={args.roles} workers={result.workers} nodes={len(inventory.nodes)} repeat={args.repeat}")
    print(f"validate+render: median {med:.2f} ms, p95 {p95:.2f} ms (target <= 20 ms)")
    print(f"bare yaml.safe_dump: median {bare_med:.2f} ms")
    print(f"ratio: {med / bare_med:.2f}x")
    print("OK" if med <= 20 else "SLOW")
    return 0 if med <= 20 or args.quick else 1  # a quick run checks the script works, not the figure


if __name__ == "__main__":
    sys.exit(main())
