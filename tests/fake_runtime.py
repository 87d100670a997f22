"""An in-memory implementation of the runtime interface for controller and sync unit tests.

It behaves like a tiny StatefulSet controller: ``apply_task`` creates Pods ``<task>-<ordinal>``
up to ``replicas`` (phase Pending), ``scale_task`` adds/removes Pods by ordinal, ``restart_pods``
re-creates them with new UIDs, ``delete_task`` removes everything. Tests drive Pod state with
``set_running``, ``terminate``, ``wait`` and ``log`` and can make the whole cluster fail.
"""

from __future__ import annotations

import dataclasses
import itertools
from collections.abc import Iterator
from datetime import UTC, datetime

from clusters.runtime.base import (
    ContainerState,
    NodeInfo,
    PodInfo,
    PodNotFound,
    Runtime,
    RuntimeFailure,
    TaskManifest,
)

_uids = itertools.count(1)


@dataclasses.dataclass
class FakePod:
    name: str
    task: str
    ordinal: int
    uid: str
    node: str = ""
    ip: str = ""
    phase: str = "Pending"
    container: ContainerState = dataclasses.field(default_factory=ContainerState)
    created_at: datetime = dataclasses.field(default_factory=lambda: datetime.now(UTC))
    log: list[str] = dataclasses.field(default_factory=list)
    previous_log: list[str] | None = None
    job: str = ""

    def info(self) -> PodInfo:
        return PodInfo(
            name=self.name,
            task=self.task,
            ordinal=self.ordinal,
            uid=self.uid,
            phase=self.phase,
            node=self.node,
            ip=self.ip,
            container=self.container,
            created_at=self.created_at,
            started_at=self.container.started_at,
            job=self.job,
        )


class FakeRuntime(Runtime):
    """See module docstring. ``calls`` records every mutating call as a tuple."""

    def __init__(self, name: str = "fake") -> None:
        self.name = name
        self.manifests: dict[tuple[str, str], TaskManifest] = {}
        self.replicas: dict[tuple[str, str], int] = {}
        self.pods: dict[tuple[str, str], FakePod] = {}
        self.calls: list[tuple] = []
        self.failure: RuntimeFailure | None = None
        self.report_log_sizes = True  # like the local runtime; False behaves like Kubernetes (no cheap size)
        self.counts: dict[str, int] = {}  # read-only calls by method name (list_pods, read_log, ...)
        self.nodes = [NodeInfo(name=f"{name}-node-0", labels={"kubernetes.io/hostname": f"{name}-node-0"})]

    # --- failure injection
    def _check(self) -> None:
        if self.failure is not None:
            raise self.failure

    # --- interface
    def ping(self) -> None:
        self._check()

    def list_nodes(self) -> list[NodeInfo]:
        self._check()
        return list(self.nodes)

    def apply_task(self, manifest: TaskManifest) -> None:
        self._check()
        key = (manifest.namespace, manifest.task)
        self.calls.append(("apply", manifest.task, manifest.replicas))
        self.manifests[key] = manifest
        self._scale(key, manifest.replicas)

    def scale_task(self, namespace: str, task: str, replicas: int) -> None:
        self._check()
        self.calls.append(("scale", task, replicas))
        if (namespace, task) in self.manifests:
            self._scale((namespace, task), replicas)

    def delete_task(self, namespace: str, task: str, delete_storage: bool = False) -> None:
        self._check()
        self.calls.append(("delete", task))
        self.manifests.pop((namespace, task), None)
        self._scale((namespace, task), 0)
        self.replicas.pop((namespace, task), None)

    def restart_pods(self, namespace: str, task: str) -> None:
        self._check()
        self.calls.append(("restart", task))
        for key, pod in list(self.pods.items()):
            if key[0] == namespace and pod.task == task:
                self.pods[key] = self._new_pod(namespace, task, pod.ordinal)

    def _count(self, what: str) -> None:
        self.counts[what] = self.counts.get(what, 0) + 1

    def list_pods_all(self, namespace: str) -> list[PodInfo]:
        self._check()
        self._count("list_pods_all")
        return [p.info() for (ns, _), p in sorted(self.pods.items()) if ns == namespace]

    def log_sizes(self, namespace: str, pods: list[str]) -> dict[str, int] | None:
        self._check()
        if not self.report_log_sizes:
            return None
        self._count("log_sizes")
        return {
            name: sum(len(line) + 1 for line in self.pods[(namespace, name)].log)
            for name in pods
            if (namespace, name) in self.pods
        }

    def list_pods(self, namespace: str, job: str) -> list[PodInfo]:
        self._check()
        self._count("list_pods")
        return [
            p.info()
            for (ns, _), p in sorted(self.pods.items())
            if ns == namespace and self.manifests.get((ns, p.task)) and self.manifests[(ns, p.task)].job == job
        ]

    def read_log(self, namespace: str, pod: str, tail_lines: int | None = 1000, previous: bool = False) -> str:
        self._check()
        self._count("read_log")
        fake = self.pods.get((namespace, pod))
        if fake is None:
            raise PodNotFound(f"pod {pod} not found")
        lines = fake.previous_log if previous else fake.log
        if lines is None:
            raise RuntimeFailure(f"pod {pod} has no previous instance", reason="not_found")
        lines = lines[-tail_lines:] if tail_lines else lines
        return "".join(line + "\n" for line in lines)

    def stream_log(self, namespace: str, pod: str, previous: bool = False) -> Iterator[bytes]:
        yield self.read_log(namespace, pod, None, previous).encode()

    def exec(self, namespace: str, pod: str, command: list[str] | None = None):
        raise RuntimeFailure("exec is not supported by the fake runtime", reason="invalid")

    # --- helpers
    def _new_pod(self, namespace: str, task: str, ordinal: int) -> FakePod:
        manifest = self.manifests.get((namespace, task))
        return FakePod(
            name=f"{task}-{ordinal}",
            task=task,
            ordinal=ordinal,
            uid=f"uid-{next(_uids)}",
            job=manifest.job if manifest else "",
        )

    def _scale(self, key: tuple[str, str], replicas: int) -> None:
        namespace, task = key
        self.replicas[key] = replicas
        for ordinal in range(replicas):
            name = f"{task}-{ordinal}"
            if (namespace, name) not in self.pods:
                self.pods[(namespace, name)] = self._new_pod(namespace, task, ordinal)
        for pkey, pod in list(self.pods.items()):
            if pkey[0] == namespace and pod.task == task and pod.ordinal >= replicas:
                del self.pods[pkey]

    def pod(self, name: str) -> FakePod:
        return next(p for (_, n), p in self.pods.items() if n == name)

    def set_running(self, *names: str, node: str = "", ip: str = "127.0.0.1") -> None:
        """Mark the named Pods (all when none given) Running and ready."""
        for pod in self.pods.values():
            if names and pod.name not in names:
                continue
            pod.phase = "Running"
            pod.node = node or self.nodes[0].name
            pod.ip = ip
            pod.container = ContainerState(state="running", ready=True, started_at=datetime.now(UTC))

    def terminate(self, name: str, exit_code: int, restart: bool = False) -> None:
        """The ``main`` container exits; with ``restart`` it is started again (restart count + 1)."""
        pod = self.pod(name)
        if restart:
            pod.previous_log, pod.log = pod.log, []
            pod.container = dataclasses.replace(
                pod.container,
                state="running",
                last_exit_code=exit_code,
                last_reason="Error" if exit_code else "Completed",
                restart_count=pod.container.restart_count + 1,
            )
        else:
            pod.phase = "Succeeded" if exit_code == 0 else "Failed"
            pod.container = dataclasses.replace(
                pod.container,
                state="terminated",
                ready=False,
                exit_code=exit_code,
                reason="Completed" if exit_code == 0 else "Error",
                finished_at=datetime.now(UTC),
            )

    def wait(self, name: str, reason: str, message: str = "") -> None:
        pod = self.pod(name)
        pod.container = ContainerState(state="waiting", reason=reason, message=message)

    def log(self, name: str, *lines: str) -> None:
        self.pod(name).log.extend(lines)


def job_document(name: str, roles=None, cluster: str = "alpha") -> dict:
    """A small valid-looking Job document: ``roles`` = [(template, head, replicas, cluster?)]."""
    roles = roles or [("header", True, 1), ("rollout", False, 2)]
    tasks = []
    for role in roles:
        template, head, replicas = role[:3]
        task = {
            "name": template,
            "head": head,
            "agentType": "Kubernetes",
            "role": "Actor" if head else "Rollout",
            "cluster": role[3] if len(role) > 3 else cluster,
            "nodeSelector": {"kubernetes.io/hostname": f"{template}-node"},
            "kubernetes": {
                "workload": {
                    "kind": "StatefulSet",
                    "replicas": replicas,
                    "template": {
                        "spec": {
                            "containers": [
                                {
                                    "name": "main",
                                    "image": "rlinf/rlinf:demo-1",
                                    "env": [{"name": "RLARK_TASK_ROLE", "value": template.title()}],
                                }
                            ]
                        }
                    },
                }
            },
        }
        if head:
            task["runScript"] = "python train.py"
        tasks.append(task)
    return {"apiVersion": "rlinf.io/v1alpha1", "kind": "Job", "metadata": {"name": name}, "spec": {"tasks": tasks}}


def fake_clusters(monkeypatch, settings, tmp_path, namespaces: dict[str, str]) -> dict[str, FakeRuntime]:
    """Clusters named by ``namespaces`` (name -> namespace), each served by its own :class:`FakeRuntime`.

    Stored as online ``local`` clusters; ``clusters.runtime.registry.runtime_for`` answers with their fakes;
    reconciles run synchronously (``CELERY_TASK_ALWAYS_EAGER``); archived logs go under ``tmp_path``.
    Returns ``{name: FakeRuntime}``. The one factory behind the ``runtimes``/``fake`` fixtures of the tests."""
    from clusters.models import Cluster
    from clusters.runtime import registry

    settings.CELERY_TASK_ALWAYS_EAGER = True
    settings.VAR_DIR = tmp_path  # archived logs
    fakes = {name: FakeRuntime(name) for name in namespaces}
    for name, namespace in namespaces.items():
        Cluster.objects.create(name=name, runtime="local", namespace=namespace, status="online")
    monkeypatch.setattr(registry, "runtime_for", lambda cluster: fakes[cluster.name])
    return fakes
