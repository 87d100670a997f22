"""Job documents and polling helpers shared by the real-control-plane tests."""

from __future__ import annotations

import asyncio
import time
from typing import Any

from jobs.models import Job
from jobs.observe.sync import sync_all_clusters
from tests.k8s_real.conftest import wait_for

IMAGE = "registry.example.com/rlinf/rlinf:0.2.1"


def task(
    name: str,
    *,
    head: bool,
    replicas: int,
    selector: dict[str, str],
    gpus: int = 0,
    cluster: str = "kwok-a",
    role: str | None = None,
    volumes: list[tuple[str, str]] = (),
    image: str = IMAGE,
) -> dict[str, Any]:
    """One ``spec.tasks[]`` entry (a role) running a StatefulSet of ``replicas`` Workers.

    ``volumes``: ``[(mountPath, claimName)]`` of existing PVCs."""
    container: dict[str, Any] = {"name": "main", "image": image}
    if gpus:
        container["resources"] = {
            "requests": {"nvidia.com/gpu": str(gpus)},
            "limits": {"nvidia.com/gpu": str(gpus)},
        }
    spec: dict[str, Any] = {"containers": [container]}
    for path, claim in volumes:
        vol = path.strip("/").replace("/", "-")
        container.setdefault("volumeMounts", []).append({"name": vol, "mountPath": path})
        spec.setdefault("volumes", []).append({"name": vol, "persistentVolumeClaim": {"claimName": claim}})
    out: dict[str, Any] = {
        "name": name,
        "head": head,
        "agentType": "Kubernetes",
        "role": role or ("Actor" if head else name.title()),
        "cluster": cluster,
        "nodeSelector": dict(selector),
        "kubernetes": {"workload": {"kind": "StatefulSet", "replicas": replicas, "template": {"spec": spec}}},
    }
    if head:
        out["runScript"] = "python train.py"
    return out


def document(name: str, *tasks: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": "rlinf.io/v1alpha1",
        "kind": "Job",
        "metadata": {"name": name},
        "spec": {"tasks": list(tasks)},
    }


def header_and_rollout(name: str, rollout_replicas: int = 3, gpus: int = 4) -> dict[str, Any]:
    """Header x1 on gpu-0 plus ``rollout`` x N on the ``pool=gpu`` nodes, ``gpus`` GPUs per Worker."""
    return document(
        name,
        task("header", head=True, replicas=1, selector={"kubernetes.io/hostname": "gpu-0"}, gpus=gpus, role="Actor"),
        task("rollout", head=False, replicas=rollout_replicas, selector={"pool": "gpu"}, gpus=gpus, role="Rollout"),
    )


def synced(job_name: str, check, timeout: float, what: str) -> Job:
    """Sync every cluster and re-read the job until ``check(job)`` is truthy; returns the job."""

    def once():
        sync_all_clusters(force=True)
        job = Job.objects.get(name=job_name)
        return job if check(job) else None

    return wait_for(once, timeout, what, interval=0.5)


def running(ns, count: int) -> dict[str, dict] | None:
    """The namespace's Pods when exactly ``count`` exist and all are Running, else None."""
    pods = ns.pods()
    if len(pods) == count and all(p["status"].get("phase") == "Running" for p in pods.values()):
        return pods
    return None


class TerminalOutput:
    """The bytes a WebTerminal communicator has sent so far; :meth:`until` waits for ``needle`` in them and fails
    (with the output's tail) on a timeout or an early close."""

    def __init__(self, comm) -> None:
        self.comm = comm
        self.out = b""

    async def until(self, needle: bytes, timeout: float = 40) -> None:
        deadline = time.monotonic() + timeout
        while needle not in self.out:
            assert time.monotonic() < deadline, self.out[-500:]
            msg = await asyncio.wait_for(self.comm.output_queue.get(), timeout)
            assert msg["type"] != "websocket.close", (msg, self.out[-500:])
            if msg.get("bytes"):
                self.out += msg["bytes"]
