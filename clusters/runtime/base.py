"""The data-plane runtime interface shared by every cluster kind.

One implementation per ``Cluster.runtime`` value (``local`` and ``kubernetes``).
Everything crossing this boundary is plain data (dataclasses, dicts, strings), so
the control plane (``jobs.control``) never imports a runtime's internals.

Data flow: Job spec -> ``jobs.jobspec.manifests`` builds one :class:`TaskManifest`
per Task -> ``Runtime.apply_task`` -> ``Runtime.list_pods`` -> status sync.

Units: GPU/device counts are integers, CPU in cores (float), memory in bytes,
times are timezone-aware UTC ``datetime`` objects.
"""

from __future__ import annotations

import abc
import dataclasses
from collections.abc import Iterator
from datetime import datetime
from typing import Any, Protocol

from clusters.runtime.containers import MAIN_ONLY, ContainerInfo


class RuntimeFailure(Exception):
    """A runtime call failed (cluster unreachable, API error, bad manifest).

    ``reason`` is a short machine code (``unreachable``, ``unauthorized``,
    ``not_found``, ``conflict``, ``invalid``, ``internal``); ``str(exc)`` is a
    human message safe to show to users (it never contains credentials).
    """

    def __init__(self, message: str, reason: str = "internal") -> None:
        super().__init__(message)
        self.reason = reason


class PodNotFound(RuntimeFailure):
    """The named Pod does not exist (any more)."""

    def __init__(self, message: str) -> None:
        super().__init__(message, reason="not_found")


@dataclasses.dataclass(frozen=True)
class NodeInfo:
    """A node as the runtime reports it.

    ``capacity``/``allocatable``/``used`` map resource names (``cpu`` in cores,
    ``memory`` in bytes, ``nvidia.com/gpu``, ``rlinf.io/device-*`` as counts) to
    numbers. ``used`` is the sum of requests of non-terminal pods on the node.
    """

    name: str
    labels: dict[str, str]
    annotations: dict[str, str] = dataclasses.field(default_factory=dict)
    capacity: dict[str, float] = dataclasses.field(default_factory=dict)
    allocatable: dict[str, float] = dataclasses.field(default_factory=dict)
    used: dict[str, float] = dataclasses.field(default_factory=dict)
    ready: bool = True
    unschedulable: bool = False
    # ({"type", "status", "reason", "message", "last_transition"}, ...) as the node reports them
    conditions: tuple[dict[str, Any], ...] = ()
    # Warning events about this node ({"reason", "message", "count", "last_time"}, ...), when the runtime has them
    events: tuple[dict[str, Any], ...] = ()
    # image names the node has pulled (Kubernetes ``status.images``; first name of each, at most 100)
    images: tuple[str, ...] = ()


@dataclasses.dataclass(frozen=True)
class StorageClassInfo:
    """A StorageClass as the cluster itself reports it.

    Kubernetes: ``storage.k8s.io/v1`` StorageClass (``provisioner``; ``default`` from the annotation
    ``storageclass.kubernetes.io/is-default-class``). Local runtime: a directory ``storage/<cluster>/<class>/``
    of its state root, ``claims`` = the claim directories in it (``None`` where the runtime does not count them).
    """

    name: str
    provisioner: str = ""
    default: bool = False
    claims: int | None = None


@dataclasses.dataclass(frozen=True)
class ContainerState:
    """State of the ``main`` container of a Pod.

    ``state`` is ``waiting`` | ``running`` | ``terminated`` | ``unknown``;
    ``reason`` e.g. ``ImagePullBackOff``, ``CrashLoopBackOff``, ``OOMKilled``,
    ``Completed``, ``Error``; ``exit_code`` only for terminated (current or last).
    ``last_exit_code``/``last_reason`` describe the previous instance, if any.
    """

    name: str = "main"
    state: str = "unknown"
    reason: str = ""
    message: str = ""
    exit_code: int | None = None
    last_exit_code: int | None = None
    last_reason: str = ""
    restart_count: int = 0
    ready: bool = False
    started_at: datetime | None = None
    finished_at: datetime | None = None


# The reasons a container waits, or a Pod event names, when its image cannot be pulled: the sync's ImagePull
# condition, the pending reasons and the diagnosis all read this one set.
IMAGE_PULL_REASONS = frozenset(
    {"ErrImagePull", "ImagePullBackOff", "InvalidImageName", "ErrImageNeverPull", "RegistryUnavailable"}
)


@dataclasses.dataclass(frozen=True)
class PodEvent:
    """A Kubernetes-style event about a Pod (scheduling, pulling, ...)."""

    type: str  # Normal | Warning
    reason: str
    message: str
    last_time: datetime | None = None
    count: int = 1


@dataclasses.dataclass(frozen=True)
class PodInfo:
    """One Worker Pod as the runtime reports it.

    ``phase`` is Kubernetes' pod phase: ``Pending`` | ``Running`` | ``Succeeded``
    | ``Failed`` | ``Unknown``. ``task`` is the Task (StatefulSet) name and
    ``ordinal`` the StatefulSet ordinal (the number after the last ``-``).
    ``uid`` changes whenever the Pod is re-created; ``revision`` is the workload revision it was made from
    (Kubernetes: the ``controller-revision-hash`` label), so a Pod re-created by a template update (an edit) is
    told apart from one that failed, was deleted or evicted.
    """

    name: str
    task: str
    ordinal: int
    uid: str = ""
    phase: str = "Pending"
    node: str = ""
    ip: str = ""
    container: ContainerState = dataclasses.field(default_factory=ContainerState)
    created_at: datetime | None = None
    started_at: datetime | None = None
    finished_at: datetime | None = None
    conditions: tuple[dict[str, Any], ...] = ()
    events: tuple[PodEvent, ...] = ()
    message: str = ""
    reason: str = ""
    revision: str = ""
    job: str = ""  # label ``rlinf.io/job`` when the runtime reports it
    # every container of the Pod, ``main`` first (clusters.runtime.containers; the local runtime: ``main`` only)
    containers: tuple[ContainerInfo, ...] = MAIN_ONLY


@dataclasses.dataclass(frozen=True)
class LogChunk:
    """What :meth:`Runtime.read_log_from` read: the complete lines after ``cursor``.

    ``text`` holds whole lines only (a line still being written stays for the next read);
    ``cursor`` is opaque (a byte offset, a line count or a timestamp position) and is passed back
    unchanged next time; ``reset`` is True when the log is shorter than the cursor said (a new
    container instance or a rotated file): ``text`` then starts at the log's beginning.
    """

    text: str
    cursor: str
    reset: bool = False


@dataclasses.dataclass(frozen=True)
class WatchEvent:
    """One event of :meth:`Runtime.watch`.

    ``type`` is ``ADDED`` | ``MODIFIED`` | ``DELETED`` | ``BOOKMARK`` | ``RELIST`` (a fresh list after
    a start or ``410 Gone``: ``objects`` then holds every object and ``job`` is empty).
    ``kind`` is ``pods`` or ``statefulsets``; ``job`` the object's ``rlinf.io/job`` label;
    ``resource_version`` is where a resumed watch starts.
    """

    type: str
    kind: str
    job: str = ""
    name: str = ""
    resource_version: str = ""
    objects: tuple[tuple[str, str], ...] = ()  # RELIST: (job, name) of every object


@dataclasses.dataclass(frozen=True)
class TaskManifest:
    """Everything a runtime needs to run one Task (one StatefulSet).

    ``workload`` is the StatefulSet-shaped dict (``apiVersion: apps/v1``,
    ``kind: StatefulSet``, metadata, spec.replicas, spec.template) produced by
    ``jobs.jobspec.manifests``; the ``main`` container already carries the wrapper
    command and the injected env (``RLARK_*``, ``POD_NAME`` via downward API on
    Kubernetes, ``RLARK_TASK_ROLE``). ``extra_objects`` are the other objects of
    the Task (head Service, ConfigMap, PVCs, registry Secrets) as dicts.
    """

    job: str
    task: str
    namespace: str
    ray_role: str  # head | worker
    replicas: int
    rank_start: int
    total_nodes: int
    head_task: str
    workload: dict[str, Any]
    extra_objects: tuple[dict[str, Any], ...] = ()


class ExecStream(Protocol):
    """An interactive exec session in a Pod's ``main`` container.

    Bytes in/out are raw terminal bytes. ``read`` returns ``b""`` at EOF.
    ``exit_code`` is set once the process has exited.
    """

    exit_code: int | None

    def write(self, data: bytes) -> None: ...

    def read(self, timeout: float = 0.1) -> bytes | None: ...

    def resize(self, rows: int, cols: int) -> None: ...

    def close(self) -> None: ...


class Runtime(abc.ABC):
    """Data-plane operations for one cluster. Implementations must be idempotent:
    applying the same manifest twice, scaling to the current size or deleting
    something already gone are no-ops, never errors.

    Every method may raise :class:`RuntimeFailure` (with ``reason``); the sync
    loop turns ``unreachable``/``unauthorized`` into cluster status ``offline``.
    """

    @abc.abstractmethod
    def ping(self) -> None:
        """Check connectivity and permissions; raise RuntimeFailure with a clear reason."""

    @abc.abstractmethod
    def list_nodes(self) -> list[NodeInfo]:
        """All nodes of the cluster with capacity, allocatable and used resources."""

    @abc.abstractmethod
    def apply_task(self, manifest: TaskManifest) -> None:
        """Create or update the Task's workload and extra objects (server-side apply semantics)."""

    @abc.abstractmethod
    def scale_task(self, namespace: str, task: str, replicas: int) -> None:
        """Set the Task's replica count; 0 stops every Worker (processes are killed)."""

    @abc.abstractmethod
    def delete_task(self, namespace: str, task: str, delete_storage: bool = False) -> None:
        """Delete the workload, its Pods and the head Service; PVCs only if ``delete_storage``."""

    @abc.abstractmethod
    def restart_pods(self, namespace: str, task: str) -> None:
        """Delete the Task's current Pods so they are re-created (used by Restart)."""

    @abc.abstractmethod
    def list_pods(self, namespace: str, job: str) -> list[PodInfo]:
        """All Pods of a Job (label ``rlinf.io/job=<job>``) across its Tasks."""

    @abc.abstractmethod
    def read_log(
        self,
        namespace: str,
        pod: str,
        tail_lines: int | None = 1000,
        previous: bool = False,
    ) -> str:
        """The ``main`` container's log text (last ``tail_lines`` lines; all if None).

        Raises PodNotFound if the Pod is gone, RuntimeFailure(reason="not_found")
        if ``previous`` is asked for but there is no previous instance.
        """

    @abc.abstractmethod
    def stream_log(self, namespace: str, pod: str, previous: bool = False) -> Iterator[bytes]:
        """The whole ``main`` container log as byte chunks (constant memory), for downloads.

        A runtime whose Pods have more containers (``PodInfo.containers``) also accepts ``container=<name>``."""

    @abc.abstractmethod
    def exec(self, namespace: str, pod: str, command: list[str] | None = None) -> ExecStream:
        """Open an interactive shell (bash, else sh) in the Pod's ``main`` container (or ``container=<name>`` where
        the runtime accepts it, as for :meth:`stream_log`)."""

    def kept_ray_logs_bytes(self, namespace: str, job: str, pod: str) -> int:
        """Bytes of Ray's own log files (raylet, GCS, ...) the runtime kept of ``pod``'s failed runs, 0 when it
        keeps none. Only the local runtime keeps them (on Kubernetes they live and go with the container)."""
        return 0

    def stream_ray_logs(self, namespace: str, job: str, pod: str, max_bytes: int) -> Iterator[bytes]:
        """Those kept Ray logs as a tar.gz stream, files past ``max_bytes`` (raw) left out and listed. Raises
        RuntimeFailure(reason="not_found") when none are kept."""
        raise RuntimeFailure(f"no Ray logs are kept for pod {pod}", "not_found")

    def warning_events(self, namespace: str, kind: str, names: list[str]) -> dict[str, list[PodEvent]]:
        """Warning events about the ``kind`` objects (``StatefulSet``, ``PersistentVolumeClaim``) named ``names``:
        ``{name: [PodEvent, ...]}`` newest first, at most 10 each. They explain what has no Pod to show it: a
        StatefulSet whose Pods the cluster refuses to create (ResourceQuota), a claim that cannot be provisioned.
        Runtimes without such objects return ``{}``. Raises RuntimeFailure when the cluster cannot be read."""
        return {}

    def list_namespaces(self) -> list[str]:
        """Names of the namespaces the cluster has (sorted), as the cluster reports them, not the console's records.
        Raises RuntimeFailure (``unreachable``, ``forbidden`` where RBAC does not grant ``list namespaces``);
        NotImplementedError where the runtime has no such notion."""
        raise NotImplementedError

    def list_storage_classes(self) -> list[StorageClassInfo]:
        """The cluster's StorageClasses (sorted by name), as the cluster reports them. Raises RuntimeFailure as
        :meth:`list_namespaces`; NotImplementedError where the runtime has no such notion."""
        raise NotImplementedError

    def pod_metrics(self, namespace: str, job: str) -> dict[str, dict[str, float]] | None:
        """Current CPU (cores) and memory (bytes) per Pod name, or None if not available."""
        return None

    # --- per-cluster calls of the status sync (their cost must not grow with the jobs) ------------------

    def prepare_for_thread(self) -> None:
        """Load now whatever the runtime would read from the database, so that its calls can then run in a
        worker thread of the sync (which must not touch the database). Default: nothing to load."""
        return None

    def list_pods_all(self, namespace: str) -> list[PodInfo]:
        """Every console Pod in ``namespace`` (label ``rlinf.io/job`` present), all jobs, in one call.

        ``PodInfo.job`` is set. Raises NotImplementedError when the runtime cannot (the sync then
        falls back to :meth:`list_pods` per job)."""
        raise NotImplementedError

    def pod_metrics_all(self, namespace: str, jobs: list[str]) -> dict[str, dict[str, float]] | None:
        """CPU/memory per Pod name of all ``jobs`` in ``namespace`` (one call where the runtime can;
        this default asks :meth:`pod_metrics` per job). None when no metrics are available."""
        out: dict[str, dict[str, float]] = {}
        available = False
        for job in jobs:
            metrics = self.pod_metrics(namespace, job)
            if metrics is not None:
                available = True
                out.update(metrics)
        return out if available else None

    def log_sizes(self, namespace: str, pods: list[str]) -> dict[str, int] | None:
        """Current size in bytes of each named Pod's ``main`` log, without reading it, or None when the
        runtime cannot tell cheaply (Kubernetes). Pods it does not know are left out."""
        return None

    def read_log_from(self, namespace: str, pod: str, cursor: str = "", limit_bytes: int = 4 << 20) -> LogChunk:
        """The complete lines of the current ``main`` log after ``cursor`` ("" = from the start), at most
        about ``limit_bytes`` (the rest comes with the next read). This default reads the whole log and
        counts lines (cursor ``L<n>``); runtimes override it with a cheaper form.

        Raises PodNotFound if the Pod is gone."""
        text = self.read_log(namespace, pod, tail_lines=None)
        lines = text.splitlines(keepends=True)
        if lines and not lines[-1].endswith("\n"):
            lines.pop()  # still being written
        done = int(cursor[1:]) if cursor.startswith("L") and cursor[1:].isdigit() else 0
        reset = done > len(lines)
        if reset:
            done = 0
        new, size, end = [], 0, done
        for line in lines[done:]:
            if size and size + len(line) > limit_bytes:
                break
            new.append(line)
            size += len(line)
            end += 1
        return LogChunk("".join(new), f"L{end}", reset)

    def watch(self, namespace: str, kind: str, resource_version: str = "", timeout_seconds: int = 300):
        """Iterator of :class:`WatchEvent` for ``kind`` (``pods`` | ``statefulsets``) of every job in
        ``namespace``: a ``RELIST`` first (and after ``410 Gone``), then changes, resuming from
        ``resource_version``; ends after ``timeout_seconds``. NotImplementedError where the runtime has
        no watch (the 10 s periodic sync still covers it)."""
        raise NotImplementedError
