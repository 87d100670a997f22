"""``KubernetesRuntime``: the runtime interface over the official ``kubernetes`` client.

One object per cluster, over one :class:`~clusters.runtime.kubernetes.api.KubeApi` (every call with a timeout,
every failure a ``RuntimeFailure``). The work is done by one module per concern:

- :mod:`.access`: the RBAC check of ``ping``; :mod:`.nodes`: Nodes, namespaces, StorageClasses;
- :mod:`.workloads`: a Task's objects (server-side apply, scale, restart, delete);
- :mod:`.pods`: Pods with their Events, watches, metrics; :mod:`.parse`: raw JSON to the runtime's dataclasses;
- :mod:`.logs` and :mod:`.log_cursor`: container logs; :mod:`.exec_stream`: interactive exec.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from clusters.runtime.base import (
    LogChunk,
    NodeInfo,
    PodEvent,
    PodInfo,
    Runtime,
    StorageClassInfo,
    TaskManifest,
    WatchEvent,
)
from clusters.runtime.kubernetes import access, exec_stream, logs, nodes, pods, workloads
from clusters.runtime.kubernetes.api import KubeApi
from clusters.runtime.kubernetes.exec_stream import KubeExecStream
from clusters.runtime.kubernetes.parse import JOB_LABEL, MAIN


class KubernetesRuntime(Runtime):
    """Data-plane operations on one real Kubernetes cluster (``Cluster.runtime == "kubernetes"``)."""

    def __init__(self, cluster: Any) -> None:
        self.cluster = cluster
        self.namespace = cluster.namespace
        self.kube = KubeApi(cluster)

    def ping(self) -> None:
        """Reachable, credentials accepted, namespace present, every RBAC verb granted (:func:`access.ping`)."""
        access.ping(self.kube)

    # ------------------------------------------------------------------ nodes and what the cluster has
    def list_nodes_raw(self) -> tuple[list[dict], list[dict]]:
        """Raw JSON of ``GET nodes`` and of the non-terminal pods of all namespaces (two list calls)."""
        return nodes.list_nodes_raw(self.kube)

    def list_nodes(self) -> list[NodeInfo]:
        return nodes.list_nodes(self.kube)

    def node_warning_events(self) -> list[dict]:
        """Warning events about Nodes in every namespace; [] where RBAC (or the server) does not allow it."""
        return nodes.node_warning_events(self.kube)

    def list_namespaces(self) -> list[str]:
        return nodes.list_namespaces(self.kube)

    def list_storage_classes(self) -> list[StorageClassInfo]:
        return nodes.list_storage_classes(self.kube)

    def cordon(self, node: str, unschedulable: bool = True) -> None:
        nodes.cordon(self.kube, node, unschedulable)

    def patch_node_labels(self, node: str, labels: dict[str, str | None]) -> None:
        nodes.patch_node_labels(self.kube, node, labels)

    # ------------------------------------------------------------------ tasks
    def apply_secret_data(self, namespace: str, name: str, data: dict[str, str], field_manager: str) -> None:
        workloads.apply_secret_data(self.kube, namespace, name, data, field_manager)

    def apply_task(self, manifest: TaskManifest) -> None:
        workloads.apply_task(self.kube, manifest)

    def scale_task(self, namespace: str, task: str, replicas: int) -> None:
        workloads.scale_task(self.kube, namespace, task, replicas)

    def delete_task(self, namespace: str, task: str, delete_storage: bool = False) -> None:
        workloads.delete_task(self.kube, namespace, task, delete_storage)

    def restart_pods(self, namespace: str, task: str) -> None:
        workloads.restart_pods(self.kube, namespace, task)

    # ------------------------------------------------------------------ pods
    def list_pods(self, namespace: str, job: str) -> list[PodInfo]:
        return pods.list_pods(self.kube, namespace, f"rlinf.io/job={job}")

    def list_pods_all(self, namespace: str) -> list[PodInfo]:
        """Every console Pod of the namespace (label ``rlinf.io/job`` present): one pods list, plus one events
        list when some Pod is not settled."""
        return pods.list_pods(self.kube, namespace, JOB_LABEL)

    def warning_events(self, namespace: str, kind: str, names: list[str]) -> dict[str, list[PodEvent]]:
        return pods.warning_events(self.kube, namespace, kind, names)

    def watch_pods(
        self, namespace: str, job: str, resource_version: str = "", timeout_seconds: int = 30
    ) -> Iterator[tuple[str, Any, str]]:
        return pods.watch_pods(self.kube, namespace, job, resource_version, timeout_seconds)

    def watch(
        self, namespace: str, kind: str, resource_version: str = "", timeout_seconds: int = 300
    ) -> Iterator[WatchEvent]:
        """Watch ``pods`` or ``statefulsets`` of every job in ``namespace`` (label ``rlinf.io/job``)."""
        return pods.watch(self.kube, namespace, kind, JOB_LABEL, resource_version, timeout_seconds)

    def pod_metrics(self, namespace: str, job: str) -> dict[str, dict[str, float]] | None:
        return pods.metrics(self.kube, namespace, f"rlinf.io/job={job}")

    def pod_metrics_all(self, namespace: str, jobs: list[str]) -> dict[str, dict[str, float]] | None:
        """One ``metrics.k8s.io`` list for every console Pod of the namespace."""
        return pods.metrics(self.kube, namespace, JOB_LABEL)

    # ------------------------------------------------------------------ logs and exec
    def read_log(self, namespace: str, pod: str, tail_lines: int | None = 1000, previous: bool = False) -> str:
        return logs.read_log(self.kube, namespace, pod, tail_lines, previous)

    def read_log_from(self, namespace: str, pod: str, cursor: str = "", limit_bytes: int = 4 << 20) -> LogChunk:
        return logs.read_log_from(self.kube, namespace, pod, cursor, limit_bytes)

    def stream_log(
        self, namespace: str, pod: str, previous: bool = False, container: str = MAIN, timestamps: bool = False
    ) -> Iterator[bytes]:
        return logs.stream_log(self.kube, namespace, pod, previous, container, timestamps)

    def exec(self, namespace: str, pod: str, command: list[str] | None = None, container: str = MAIN) -> KubeExecStream:
        return exec_stream.exec_in(self.kube, namespace, pod, command, container)
