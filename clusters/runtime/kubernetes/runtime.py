"""``KubernetesRuntime``: the runtime interface over the official ``kubernetes`` client (issue 5).

Everything goes through one ApiClient per cluster (``client.api_client_for``), every call carries a timeout
and every failure becomes ``RuntimeFailure`` (``client.translate``). Lists are read as raw JSON
(``_preload_content=False``) so a 1000-pod list costs one ``json.loads``, not a model tree per pod.

Objects are written with server-side apply (field manager ``rlark-console``, ``force=True``), so re-applying
an unchanged manifest is a no-op and applying a changed one updates exactly our fields.
"""

from __future__ import annotations

import json
import logging
import re
import time
import urllib.parse
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from typing import Any

from kubernetes import client as k8s
from kubernetes.client.exceptions import ApiException
from kubernetes.stream import stream as k8s_stream

from clusters.host_paths import HostPathRefused, check_cluster_host_paths
from clusters.node_health import conditions_of, recent_warnings
from clusters.quantity import parse_quantity
from clusters.runtime.base import (
    ContainerState,
    LogChunk,
    NodeInfo,
    PodEvent,
    PodInfo,
    PodNotFound,
    Runtime,
    RuntimeFailure,
    StorageClassInfo,
    TaskManifest,
    WatchEvent,
)
from clusters.runtime.containers import from_pod as containers_of
from clusters.runtime.kubernetes.client import api_client_for, server_url, timeouts, translate

logger = logging.getLogger("rlark.k8s")

FIELD_MANAGER = "rlark-console"
APPLY = "application/apply-patch+yaml"
TERMINAL_PHASES = ("Succeeded", "Failed")
MAIN = "main"
SHELLS = ("bash", "sh")
DEFAULT_CLASS = "storageclass.kubernetes.io/is-default-class"
JOB_LABEL = "rlinf.io/job"  # selector "label present": every Pod/StatefulSet the console made for a job
NO_SHELL = "no shell found (tried bash, sh)"
# Exec sessions get a UTF-8 locale when the container sets none, so CJK file names and input work as on the
# local runtime (issue 16). A missing shell still fails as "executable file not found" (the fallback below).
UTF8_LOCALE = 'export LANG="${LANG:-C.UTF-8}" LC_CTYPE="${LC_CTYPE:-C.UTF-8}"; exec '


def shell_argv(shell: str) -> list[str]:
    """``bash`` -> ``["bash", "-c", 'export LANG="${LANG:-C.UTF-8}" ...; exec bash']``."""
    return [shell, "-c", UTF8_LOCALE + shell]


# (verb, group, resource, subresource) the console needs in the cluster's namespace (see deploy/rbac.yaml).
NAMESPACED_VERBS: tuple[tuple[str, str, str, str], ...] = (
    ("patch", "apps", "statefulsets", ""),
    ("delete", "apps", "statefulsets", ""),
    ("patch", "apps", "statefulsets", "scale"),
    ("list", "", "pods", ""),
    ("delete", "", "pods", ""),
    ("get", "", "pods", "log"),
    ("create", "", "pods", "exec"),
    ("get", "", "pods", "exec"),
    ("patch", "", "services", ""),
    ("delete", "", "services", ""),
    ("patch", "", "configmaps", ""),
    ("delete", "", "configmaps", ""),
    ("patch", "", "secrets", ""),
    ("delete", "", "secrets", ""),
    ("patch", "", "persistentvolumeclaims", ""),
    ("delete", "", "persistentvolumeclaims", ""),
    ("list", "", "events", ""),
)
CLUSTER_VERBS: tuple[tuple[str, str, str, str], ...] = (
    ("list", "", "nodes", ""),
    ("patch", "", "nodes", ""),
    ("list", "", "pods", ""),
)


def _ts(value: Any) -> datetime | None:
    if not value:
        return None
    try:
        return datetime.fromisoformat(str(value).replace("Z", "+00:00"))
    except ValueError:
        return None


def _number(value: Any) -> float:
    try:
        return parse_quantity(value)
    except ValueError:
        return 0.0


def _resource_map(raw: dict | None) -> dict[str, float]:
    out = {}
    for k, v in (raw or {}).items():
        n = _number(v)
        out[k] = int(n) if float(n).is_integer() else n
    return out


def pod_requests(pod: dict) -> dict[str, float]:
    """Effective requests of a pod: containers summed, init containers as max, plus overhead (upstream 10.1)."""
    spec = pod.get("spec") or {}
    total: dict[str, float] = {}
    for c in spec.get("containers") or []:
        for k, v in ((c.get("resources") or {}).get("requests") or {}).items():
            total[k] = total.get(k, 0) + _number(v)
    for c in spec.get("initContainers") or []:
        for k, v in ((c.get("resources") or {}).get("requests") or {}).items():
            total[k] = max(total.get(k, 0), _number(v))
    for k, v in (spec.get("overhead") or {}).items():
        total[k] = total.get(k, 0) + _number(v)
    return total


def container_state(pod: dict) -> ContainerState:
    """The ``main`` container's state (else the first container's), with the previous instance's exit."""
    status = pod.get("status") or {}
    statuses = status.get("containerStatuses") or []
    cs = next((c for c in statuses if c.get("name") == MAIN), statuses[0] if statuses else None)
    if cs is None:
        # not created yet: an init container may be the one failing (e.g. image pull)
        inits = status.get("initContainerStatuses") or []
        waiting = next((c for c in inits if (c.get("state") or {}).get("waiting")), None)
        if waiting:
            w = waiting["state"]["waiting"]
            return ContainerState(state="waiting", reason=w.get("reason", ""), message=w.get("message", ""))
        return ContainerState()
    state = cs.get("state") or {}
    last = (cs.get("lastState") or {}).get("terminated") or {}
    common = {
        "name": cs.get("name", MAIN),
        "restart_count": int(cs.get("restartCount") or 0),
        "ready": bool(cs.get("ready")),
        "last_exit_code": last.get("exitCode"),
        "last_reason": last.get("reason", ""),
    }
    if "running" in state:
        return ContainerState(state="running", started_at=_ts(state["running"].get("startedAt")), **common)
    if "terminated" in state:
        t = state["terminated"]
        return ContainerState(
            state="terminated",
            reason=t.get("reason", ""),
            message=t.get("message", ""),
            exit_code=t.get("exitCode"),
            started_at=_ts(t.get("startedAt")),
            finished_at=_ts(t.get("finishedAt")),
            **common,
        )
    if "waiting" in state:
        w = state["waiting"]
        return ContainerState(state="waiting", reason=w.get("reason", ""), message=w.get("message", ""), **common)
    return ContainerState(**common)


def _settled(pod: dict) -> bool:
    """Running with every container ready: nothing for Events to explain."""
    status = pod.get("status") or {}
    statuses = status.get("containerStatuses") or []
    return status.get("phase") == "Running" and bool(statuses) and all(c.get("ready") for c in statuses)


def _finish(resp: Any) -> None:
    """Read the rest of an unparsed (``_preload_content=False``) response, then pool its connection. A body left
    unread would be parsed as the next response's status line on that socket (urllib3 ``BadStatusLine``, seen
    against the real API server as "connection failed" on back-to-back applies)."""
    try:
        resp.drain_conn()
    finally:
        resp.release_conn()


def _abandon(resp: Any) -> None:
    """A stream read partly (log follow, watch): close its connection rather than pool it half-read."""
    try:
        resp.close()
    finally:
        resp.release_conn()


def pod_info(pod: dict, events: tuple[PodEvent, ...] = ()) -> PodInfo:
    meta = pod.get("metadata") or {}
    status = pod.get("status") or {}
    name = meta.get("name", "")
    labels = meta.get("labels") or {}
    tail = name.rsplit("-", 1)[-1]
    cs = container_state(pod)
    conditions = tuple(dict(c) for c in status.get("conditions") or [])
    message = status.get("message", "")
    reason = status.get("reason", "")
    if not message:
        unsched = next((c for c in conditions if c.get("type") == "PodScheduled" and c.get("status") == "False"), None)
        if unsched and unsched.get("message"):
            message, reason = unsched["message"], reason or unsched.get("reason", "")
    return PodInfo(
        name=name,
        task=labels.get("rlinf.io/task", name.rsplit("-", 1)[0]),
        job=labels.get("rlinf.io/job", ""),
        ordinal=int(tail) if tail.isdigit() else 0,
        uid=meta.get("uid", ""),
        phase=status.get("phase") or "Pending",
        node=(pod.get("spec") or {}).get("nodeName", "") or "",
        ip=status.get("podIP", "") or "",
        container=cs,
        created_at=_ts(meta.get("creationTimestamp")),
        started_at=_ts(status.get("startTime")),
        finished_at=cs.finished_at if status.get("phase") in TERMINAL_PHASES else None,
        conditions=conditions,
        events=events,
        message=message,
        reason=reason,
        revision=labels.get("controller-revision-hash", ""),
        containers=containers_of(pod),
    )


class KubeExecStream:
    """ExecStream over ``kubernetes.stream`` (websocket, channel protocol). Bytes in, bytes out."""

    def __init__(self, ws: Any, command: list[str]) -> None:
        self._ws = ws
        self.command = command
        self.exit_code: int | None = None
        self._pending = b""

    def _collect(self) -> bytes:
        out = b""
        for channel in (1, 2):
            data = self._ws.read_channel(channel)
            if data:
                out += data if isinstance(data, bytes) else data.encode()
        return out

    def write(self, data: bytes) -> None:
        if not self._ws.is_open():
            raise RuntimeFailure("the shell has exited", reason="not_found")
        self._ws.write_stdin(data if isinstance(data, bytes) else data.encode())

    def read(self, timeout: float = 0.1) -> bytes | None:
        """Output bytes; ``b""`` at EOF (process exited and everything read); None when nothing arrived yet."""
        if self._pending:
            out, self._pending = self._pending, b""
            return out
        if self._ws.is_open():
            self._ws.update(timeout=timeout)
        out = self._collect()
        if out:
            return out
        if not self._ws.is_open():
            self._set_exit()
            return b""
        return None

    def _set_exit(self) -> None:
        if self.exit_code is None:
            try:
                self.exit_code = self._ws.returncode
            except Exception:
                self.exit_code = -1

    def resize(self, rows: int, cols: int) -> None:
        if self._ws.is_open():
            self._ws.write_channel(4, json.dumps({"Width": int(cols), "Height": int(rows)}))

    def close(self) -> None:
        try:
            if self._ws.is_open():
                self._ws.write_stdin(b"\x04")
        except Exception:
            pass
        self._ws.close()
        self._set_exit()


class KubernetesRuntime(Runtime):
    """Data-plane operations on one real Kubernetes cluster (``Cluster.runtime == "kubernetes"``)."""

    def __init__(self, cluster: Any) -> None:
        self.cluster = cluster
        self.namespace = cluster.namespace
        self.api = api_client_for(cluster)
        self.core = k8s.CoreV1Api(self.api)
        self.apps = k8s.AppsV1Api(self.api)
        self.server = server_url(self.api)

    # ------------------------------------------------------------------ plumbing
    def _call(self, fn: Callable, *args: Any, what: str = "", timeout: Any = None, **kwargs: Any) -> Any:
        kwargs.setdefault("_request_timeout", timeout or timeouts())
        try:
            return fn(*args, **kwargs)
        except Exception as exc:
            raise translate(exc, what, self.server) from None

    def _json(self, fn: Callable, *args: Any, what: str = "", **kwargs: Any) -> dict:
        resp = self._call(fn, *args, what=what, _preload_content=False, **kwargs)
        try:
            return json.loads(resp.data)
        except ValueError:
            raise RuntimeFailure(f"invalid JSON from the Kubernetes API ({what})", reason="internal") from None
        finally:
            resp.release_conn()

    def _ignore_404(self, fn: Callable, *args: Any, what: str = "", **kwargs: Any) -> None:
        """Call ``fn`` for its effect (response not parsed); a 404 is fine (already gone)."""
        try:
            _finish(self._call(fn, *args, what=what, _preload_content=False, **kwargs))
        except RuntimeFailure as exc:
            if exc.reason != "not_found":
                raise

    # ------------------------------------------------------------------ ping
    def ping(self) -> None:
        """Reachable, credentials accepted, namespace present, every RBAC verb granted; else RuntimeFailure with
        reason ``unreachable`` / ``unauthorized`` / ``namespace_missing`` / ``forbidden`` (missing verbs listed)."""
        ns = self.namespace
        try:
            self._call(self.core.read_namespace, ns, what=f"namespace {ns}")
        except RuntimeFailure as exc:
            if exc.reason == "not_found":
                raise RuntimeFailure(f'namespace "{ns}" does not exist in the cluster', reason="namespace_missing")
            if exc.reason != "forbidden":
                raise
            # cannot read namespaces: fall back to a namespaced list, which 404s... never; accept and go on
        missing = []
        for verb, group, resource, sub in NAMESPACED_VERBS + CLUSTER_VERBS:
            namespaced = (verb, group, resource, sub) in NAMESPACED_VERBS
            attrs = k8s.V1ResourceAttributes(
                verb=verb,
                group=group,
                resource=resource,
                subresource=sub or None,
                namespace=ns if namespaced else None,
            )
            review = k8s.V1SelfSubjectAccessReview(spec=k8s.V1SelfSubjectAccessReviewSpec(resource_attributes=attrs))
            result = self._call(
                k8s.AuthorizationV1Api(self.api).create_self_subject_access_review, review, what="access review"
            )
            if not (result.status and result.status.allowed):
                full = f"{resource}/{sub}" if sub else resource
                missing.append(f"{verb} {full}" + ("" if namespaced else " (cluster-wide)"))
        if missing:
            raise RuntimeFailure(
                f'missing RBAC permissions in namespace "{ns}": ' + ", ".join(missing) + " (see deploy/rbac.yaml)",
                reason="forbidden",
            )

    # ------------------------------------------------------------------ nodes
    def list_nodes_raw(self) -> tuple[list[dict], list[dict]]:
        """Raw JSON of ``GET nodes`` and of the non-terminal pods of all namespaces (two list calls)."""
        nodes = self._json(self.core.list_node, what="nodes")["items"]
        pods = self._json(
            self.core.list_pod_for_all_namespaces,
            what="pods",
            field_selector="status.phase!=Succeeded,status.phase!=Failed",
        )["items"]
        return nodes, pods

    def list_nodes(self) -> list[NodeInfo]:
        nodes, pods = self.list_nodes_raw()
        node_events = self.node_warning_events()
        used: dict[str, dict[str, float]] = {}
        for pod in pods:
            node = (pod.get("spec") or {}).get("nodeName")
            if not node or (pod.get("status") or {}).get("phase") in TERMINAL_PHASES:
                continue
            acc = used.setdefault(node, {})
            for k, v in pod_requests(pod).items():
                acc[k] = acc.get(k, 0) + v
        out = []
        for n in nodes:
            meta, status = n.get("metadata") or {}, n.get("status") or {}
            ready = any(c.get("type") == "Ready" and c.get("status") == "True" for c in status.get("conditions") or [])
            out.append(
                NodeInfo(
                    name=meta.get("name", ""),
                    labels=dict(meta.get("labels") or {}),
                    annotations=dict(meta.get("annotations") or {}),
                    capacity=_resource_map(status.get("capacity")),
                    allocatable=_resource_map(status.get("allocatable")),
                    used=_resource_map(used.get(meta.get("name", ""))),
                    ready=ready,
                    unschedulable=bool((n.get("spec") or {}).get("unschedulable")),
                    conditions=tuple(conditions_of(status.get("conditions"))),
                    events=tuple(recent_warnings(node_events, meta.get("name", ""))),
                    images=tuple(
                        sorted({(i.get("names") or [""])[-1] for i in status.get("images") or [] if i.get("names")})
                    )[:100],
                )
            )
        return out

    def node_warning_events(self) -> list[dict]:
        """Warning events about Nodes in every namespace (one list call); [] where RBAC (or the server) does not
        allow it."""
        try:
            raw = self._json(
                self.core.list_event_for_all_namespaces,
                field_selector="involvedObject.kind=Node,type=Warning",
                what="node events",
            )
        except RuntimeFailure as exc:  # optional: never fail the node sync over events
            logger.debug("node events unavailable: %s", exc)
            return []
        return list(raw.get("items") or [])

    # ------------------------------------------------------------------ what the cluster has (issue 15 point 6)
    def list_namespaces(self) -> list[str]:
        """``GET /api/v1/namespaces`` (names only); ``forbidden`` where the ClusterRole lacks ``list namespaces``."""
        raw = self._json(self.core.list_namespace, what="namespaces", limit=1000)
        return sorted((i.get("metadata") or {}).get("name", "") for i in raw.get("items") or [])

    def list_storage_classes(self) -> list[StorageClassInfo]:
        """``GET /apis/storage.k8s.io/v1/storageclasses``; ``forbidden`` where RBAC lacks ``list storageclasses``."""
        raw = self._json(k8s.StorageV1Api(self.api).list_storage_class, what="storageclasses", limit=1000)
        out = []
        for item in raw.get("items") or []:
            meta = item.get("metadata") or {}
            out.append(
                StorageClassInfo(
                    name=meta.get("name", ""),
                    provisioner=str(item.get("provisioner") or ""),
                    default=(meta.get("annotations") or {}).get(DEFAULT_CLASS) == "true",
                )
            )
        return sorted(out, key=lambda c: c.name)

    def cordon(self, node: str, unschedulable: bool = True) -> None:
        """Set ``spec.unschedulable`` of a node (running pods are not touched)."""
        self._call(self.core.patch_node, node, {"spec": {"unschedulable": bool(unschedulable)}}, what=f"node {node}")

    def patch_node_labels(self, node: str, labels: dict[str, str | None]) -> None:
        """Merge-patch ``metadata.labels`` of a node (``None`` removes a label): console-owned labels
        (``clusters.services.node_metadata``) written back so nodeSelectors can use them."""
        self._call(self.core.patch_node, node, {"metadata": {"labels": dict(labels)}}, what=f"node {node}")

    # ------------------------------------------------------------------ tasks
    def _apply(self, obj: dict, field_manager: str = FIELD_MANAGER) -> None:
        kind = obj.get("kind")
        name = obj["metadata"]["name"]
        ns = obj["metadata"].get("namespace") or self.namespace
        fn = {
            "StatefulSet": self.apps.patch_namespaced_stateful_set,
            "Service": self.core.patch_namespaced_service,
            "ConfigMap": self.core.patch_namespaced_config_map,
            "Secret": self.core.patch_namespaced_secret,
            "PersistentVolumeClaim": self.core.patch_namespaced_persistent_volume_claim,
        }.get(kind)
        if fn is None:
            raise RuntimeFailure(f"unsupported object kind {kind!r}", reason="invalid")
        resp = self._call(
            fn,
            name,
            ns,
            obj,
            field_manager=field_manager,
            force=True,
            _content_type=APPLY,
            _preload_content=False,
            what=f"{kind} {name}",
        )
        _finish(resp)

    def apply_secret_data(self, namespace: str, name: str, data: dict[str, str], field_manager: str) -> None:
        """Server-side apply of ``data`` (base64 values) into Secret ``name`` under ``field_manager`` (issue 13: the
        network-domain members; another manager than the Task's, so re-applying the Task keeps these keys)."""
        obj = {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": name, "namespace": namespace}, "data": data}
        self._apply(obj, field_manager)

    def apply_task(self, manifest: TaskManifest) -> None:
        """Raises RuntimeFailure(reason="invalid") for a hostPath the cluster does not allow, before anything is
        written."""
        try:
            check_cluster_host_paths(self.cluster, manifest.workload)
        except HostPathRefused as exc:
            raise RuntimeFailure(f"hostPath refused: {exc}", "invalid") from None
        for obj in manifest.extra_objects:
            self._apply(obj)
        self._apply(manifest.workload)
        logger.info(
            "applied task %s/%s (%d objects)", manifest.namespace, manifest.task, len(manifest.extra_objects) + 1
        )

    def scale_task(self, namespace: str, task: str, replicas: int) -> None:
        try:
            resp = self._call(
                self.apps.patch_namespaced_stateful_set_scale,
                task,
                namespace,
                {"spec": {"replicas": int(replicas)}},
                what=f"StatefulSet {task}",
                _preload_content=False,
            )
            _finish(resp)
        except RuntimeFailure as exc:
            if exc.reason == "not_found" and int(replicas) == 0:
                return
            raise

    def delete_task(self, namespace: str, task: str, delete_storage: bool = False) -> None:
        """StatefulSet (cascading to its Pods), head Service, scripts ConfigMap, Ray token Secret, PVCs whose policy
        annotation is ``Delete`` (all of them with ``delete_storage``), and registry Secrets no remaining workload
        uses."""
        body = k8s.V1DeleteOptions(propagation_policy="Background")
        self._ignore_404(self.apps.delete_namespaced_stateful_set, task, namespace, body=body, what=f"sts {task}")
        self._ignore_404(self.core.delete_namespaced_service, f"{task}-ray-head", namespace, what="service")
        self._ignore_404(self.core.delete_namespaced_config_map, f"{task}-rlark-scripts", namespace, what="configmap")
        self._ignore_404(self.core.delete_namespaced_secret, f"{task}-ray-auth", namespace, what="secret")
        selector = f"rlinf.io/task={task}"
        pvcs = self._json(self.core.list_namespaced_persistent_volume_claim, namespace, label_selector=selector)
        for pvc in pvcs.get("items") or []:
            policy = ((pvc["metadata"].get("annotations") or {}).get("rlark.io/pvc-reclaim")) or "Retain"
            if delete_storage or policy == "Delete":
                self._ignore_404(
                    self.core.delete_namespaced_persistent_volume_claim, pvc["metadata"]["name"], namespace, what="pvc"
                )
        self._ignore_404(self.core.delete_collection_namespaced_pod, namespace, label_selector=selector, what="pods")
        self._gc_registry_secrets(namespace)

    def _gc_registry_secrets(self, namespace: str) -> None:
        sets = self._json(
            self.apps.list_namespaced_stateful_set,
            namespace,
            label_selector="app.kubernetes.io/managed-by=rlark-console",
            what="statefulsets",
        )
        used = {
            s.get("name")
            for sts in sets.get("items") or []
            for s in ((sts.get("spec") or {}).get("template") or {}).get("spec", {}).get("imagePullSecrets") or []
        }
        secrets = self._json(
            self.core.list_namespaced_secret,
            namespace,
            label_selector="rlark.io/image-registry=true,app.kubernetes.io/managed-by=rlark-console",
            what="secrets",
        )
        for secret in secrets.get("items") or []:
            name = secret["metadata"]["name"]
            if name not in used:
                self._ignore_404(self.core.delete_namespaced_secret, name, namespace, what="secret")

    def restart_pods(self, namespace: str, task: str) -> None:
        resp = self._call(
            self.core.delete_collection_namespaced_pod,
            namespace,
            label_selector=f"rlinf.io/task={task}",
            what=f"pods of {task}",
            _preload_content=False,
        )
        _finish(resp)

    # ------------------------------------------------------------------ pods
    def list_pods(self, namespace: str, job: str) -> list[PodInfo]:
        return self._pods(namespace, f"rlinf.io/job={job}")

    def list_pods_all(self, namespace: str) -> list[PodInfo]:
        """Every console Pod of the namespace (label ``rlinf.io/job`` present): one pods list, plus one events
        list when some Pod is not settled."""
        return self._pods(namespace, JOB_LABEL)

    def _pods(self, namespace: str, selector: str) -> list[PodInfo]:
        pods = self._json(self.core.list_namespaced_pod, namespace, label_selector=selector, what="pods")
        items = pods.get("items") or []
        events: dict[str, list[PodEvent]] = {}
        if any(not _settled(p) for p in items):  # events explain Pending/waiting pods; skip the call otherwise
            names = {p["metadata"]["name"] for p in items if not _settled(p)}
            raw = self._json(
                self.core.list_namespaced_event, namespace, field_selector="involvedObject.kind=Pod", what="events"
            )
            for ev in raw.get("items") or []:
                target = (ev.get("involvedObject") or {}).get("name")
                if target in names:
                    events.setdefault(target, []).append(
                        PodEvent(
                            type=ev.get("type", "Normal"),
                            reason=ev.get("reason", ""),
                            message=ev.get("message", ""),
                            last_time=_ts(ev.get("lastTimestamp") or ev.get("eventTime") or ev.get("firstTimestamp")),
                            count=int(ev.get("count") or 1),
                        )
                    )
        out = []
        for p in items:
            evs = sorted(events.get(p["metadata"]["name"], []), key=lambda e: e.last_time or datetime.min, reverse=True)
            out.append(pod_info(p, tuple(evs[:20])))
        out.sort(key=lambda p: (p.task, p.ordinal))
        return out

    def warning_events(self, namespace: str, kind: str, names: list[str]) -> dict[str, list[PodEvent]]:
        wanted = set(names)
        if not wanted:
            return {}
        raw = self._json(
            self.core.list_namespaced_event,
            namespace,
            field_selector=f"involvedObject.kind={kind},type=Warning",
            what="events",
        )
        out: dict[str, list[PodEvent]] = {}
        for ev in raw.get("items") or []:
            target = (ev.get("involvedObject") or {}).get("name")
            if target in wanted:
                out.setdefault(target, []).append(
                    PodEvent(
                        type="Warning",
                        reason=ev.get("reason", ""),
                        message=ev.get("message", ""),
                        last_time=_ts(ev.get("lastTimestamp") or ev.get("eventTime") or ev.get("firstTimestamp")),
                        count=int(ev.get("count") or 1),
                    )
                )
        for target, evs in out.items():
            evs.sort(key=lambda e: e.last_time.timestamp() if e.last_time else 0.0, reverse=True)
            out[target] = evs[:10]
        return out

    def watch_pods(
        self, namespace: str, job: str, resource_version: str = "", timeout_seconds: int = 30
    ) -> Iterator[tuple[str, Any, str]]:
        """Yield ``("RELIST", [PodInfo...], rv)`` first (and again after ``410 Gone``), then
        ``(ADDED|MODIFIED|DELETED, PodInfo, rv)`` until ``timeout_seconds`` pass (one job's Pods)."""
        for kind, payload, rv in self._watch_raw(
            self.core.list_namespaced_pod, namespace, f"rlinf.io/job={job}", resource_version, timeout_seconds
        ):
            if kind == "RELIST":
                yield kind, [pod_info(p) for p in payload], rv
            elif kind != "BOOKMARK":
                yield kind, pod_info(payload), rv

    def watch(
        self, namespace: str, kind: str, resource_version: str = "", timeout_seconds: int = 300
    ) -> Iterator[WatchEvent]:
        """Watch ``pods`` or ``statefulsets`` of every job in ``namespace`` (label ``rlinf.io/job``), with
        bookmarks (``allowWatchBookmarks``); resumes from ``resource_version`` and relists on ``410 Gone``."""
        fn = {"pods": self.core.list_namespaced_pod, "statefulsets": self.apps.list_namespaced_stateful_set}[kind]
        for etype, payload, rv in self._watch_raw(fn, namespace, JOB_LABEL, resource_version, timeout_seconds):
            if etype == "RELIST":
                objects = tuple(
                    (((o.get("metadata") or {}).get("labels") or {}).get("rlinf.io/job", ""), o["metadata"]["name"])
                    for o in payload
                )
                yield WatchEvent("RELIST", kind, resource_version=rv, objects=objects)
            elif etype == "BOOKMARK":
                yield WatchEvent("BOOKMARK", kind, resource_version=rv)
            else:
                meta = payload.get("metadata") or {}
                yield WatchEvent(
                    etype, kind, (meta.get("labels") or {}).get("rlinf.io/job", ""), meta.get("name", ""), rv
                )

    def _watch_raw(
        self, fn: Callable, namespace: str, selector: str, resource_version: str, timeout_seconds: int
    ) -> Iterator[tuple[str, Any, str]]:
        """``("RELIST", [raw objects], rv)`` when there is no resourceVersion (start, ``410 Gone``), then
        ``(type, raw object, rv)`` per event, ``BOOKMARK`` included, until ``timeout_seconds`` pass."""
        deadline = time.monotonic() + timeout_seconds
        rv = resource_version
        while time.monotonic() < deadline:
            if not rv:
                listing = self._json(fn, namespace, label_selector=selector, what="watch list")
                rv = (listing.get("metadata") or {}).get("resourceVersion", "")
                yield "RELIST", listing.get("items") or [], rv
            remaining = max(1, int(deadline - time.monotonic()))
            resp = self._call(
                fn,
                namespace,
                label_selector=selector,
                watch=True,
                allow_watch_bookmarks=True,
                resource_version=rv,
                timeout_seconds=remaining,
                _preload_content=False,
                timeout=(timeouts()[0], remaining + 5),
                what="watch",
            )
            gone = False
            try:
                buf = b""
                for chunk in resp.stream(65536):
                    buf += chunk
                    while b"\n" in buf:
                        line, buf = buf.split(b"\n", 1)
                        if not line.strip():
                            continue
                        event = json.loads(line)
                        obj = event.get("object") or {}
                        if event.get("type") == "ERROR":
                            if obj.get("code") == 410:
                                gone = True
                                break
                            raise RuntimeFailure(f"watch failed: {obj.get('message')}", "internal")
                        rv = (obj.get("metadata") or {}).get("resourceVersion", rv)
                        yield event.get("type", ""), obj, rv
                    if gone:
                        break
            finally:
                _abandon(resp)
            if gone:
                rv = ""  # 410 Gone: relist
            elif time.monotonic() >= deadline:
                return

    # ------------------------------------------------------------------ logs
    def read_log(self, namespace: str, pod: str, tail_lines: int | None = 1000, previous: bool = False) -> str:
        kwargs: dict[str, Any] = {"container": MAIN}
        if tail_lines is not None:
            kwargs["tail_lines"] = int(tail_lines)
        if previous:
            kwargs["previous"] = True
        try:
            resp = self._call(
                self.core.read_namespaced_pod_log, pod, namespace, what=f"pod {pod}", _preload_content=False, **kwargs
            )
        except RuntimeFailure as exc:
            if previous and exc.reason == "invalid" and "previous" in str(exc):
                raise RuntimeFailure(
                    f"pod {pod} has no previous instance of its main container (it has not restarted)",
                    reason="not_found",
                ) from None
            raise
        try:
            return resp.data.decode("utf-8", "replace")
        finally:
            resp.release_conn()

    def read_log_from(self, namespace: str, pod: str, cursor: str = "", limit_bytes: int = 4 << 20) -> LogChunk:
        """Incremental read through ``pods/log`` with ``timestamps=true``: the cursor ``T<RFC3339Nano>|<n>`` is the
        last line's timestamp and how many lines carried it; the next read asks ``sinceTime`` (whole seconds, as
        the API passes it on) and drops what was seen. A server that sends no timestamps gets a line-count
        cursor ``L<n>`` instead. ``limitBytes`` bounds every read; a cut last line waits for the next one."""
        since_ts, seen_at = "", 0
        if cursor.startswith("T") and "|" in cursor:
            since_ts, _, count = cursor[1:].rpartition("|")
            seen_at = int(count) if count.isdigit() else 0
        kwargs: dict[str, Any] = {"container": MAIN, "timestamps": True, "limit_bytes": int(limit_bytes)}
        if cursor.startswith("L"):
            kwargs.pop("limit_bytes")  # line mode: the whole log, then skip what was seen
        if since_ts:
            resp = self._call(self._log_since, pod, namespace, since_ts, kwargs, what=f"pod {pod}")
        else:
            resp = self._call(
                self.core.read_namespaced_pod_log, pod, namespace, what=f"pod {pod}", _preload_content=False, **kwargs
            )
        try:
            data = resp.data.decode("utf-8", "replace")
        finally:
            resp.release_conn()
        if data and _LOG_TS.match(data) is None:  # no timestamps from this server: count lines
            return _by_line_count(data, cursor, limit_bytes)
        return _after_timestamp(data, since_ts, seen_at, limit_bytes, cursor)

    def _log_since(self, pod: str, namespace: str, since_ts: str, kwargs: dict[str, Any], _request_timeout=None):
        """``GET pods/<pod>/log?sinceTime=<whole seconds>``: the generated client has no ``since_time`` argument,
        so the serialized request gets the query parameter added (else ``sinceSeconds`` with a margin)."""
        since = _utc_seconds(since_ts)
        try:
            method, url, *rest = self.core._read_namespaced_pod_log_serialize(
                name=pod,
                namespace=namespace,
                follow=None,
                insecure_skip_tls_verify_backend=None,
                pretty=None,
                previous=None,
                since_seconds=None,
                stream=None,
                tail_lines=None,
                _request_auth=None,
                _content_type=None,
                _headers=None,
                _host_index=0,
                **kwargs,
            )
        except (AttributeError, TypeError):  # another client generation: a relative start, deduplicated anyway
            start = _ts(since_ts)
            age = (datetime.now(start.tzinfo) - start).total_seconds() if start else 0
            return self.core.read_namespaced_pod_log(
                pod,
                namespace,
                since_seconds=max(1, int(age) + 60),
                _preload_content=False,
                _request_timeout=_request_timeout,
                **kwargs,
            )
        url += ("&" if "?" in url else "?") + urllib.parse.urlencode({"sinceTime": since})
        return self.api._call_with_legacy_options(
            (method, url, *rest), {"200": "str"}, False, False, _request_timeout, True
        )

    def stream_log(
        self, namespace: str, pod: str, previous: bool = False, container: str = MAIN, timestamps: bool = False
    ) -> Iterator[bytes]:
        """The container's log through ``pods/log``; ``timestamps``: every line prefixed with the kubelet's RFC 3339
        time of it (the Logs tab's timestamps; ``terminal.services.logs`` splits the prefix off)."""
        kwargs: dict[str, Any] = {"container": container or MAIN}
        if previous:
            kwargs["previous"] = True
        if timestamps:
            kwargs["timestamps"] = True
        resp = self._call(
            self.core.read_namespaced_pod_log,
            pod,
            namespace,
            what=f"pod {pod}",
            _preload_content=False,
            timeout=(timeouts()[0], 300),
            **kwargs,
        )
        try:
            yield from resp.stream(65536, decode_content=True)
        finally:
            _abandon(resp)

    # ------------------------------------------------------------------ exec
    def _open(self, namespace: str, pod: str, command: list[str], tty: bool = True, container: str = MAIN) -> Any:
        try:
            return k8s_stream(
                self.core.connect_get_namespaced_pod_exec,
                pod,
                namespace,
                container=container or MAIN,
                command=command,
                stdin=True,
                stdout=True,
                stderr=not tty,
                tty=tty,
                binary=True,
                _preload_content=False,
                _request_timeout=timeouts(),
            )
        except ApiException as exc:
            text = str(exc.reason or "")
            if exc.status == 0 and "Handshake status 404" in text:
                raise PodNotFound(f"pod {pod} not found") from None
            if exc.status == 0 and "Handshake status 400" in text:
                raise RuntimeFailure(
                    f"pod {pod} is not running (its main container has not started)", "invalid"
                ) from None
            if exc.status == 0 and "Handshake status 403" in text:
                raise RuntimeFailure(f"forbidden: exec into pod {pod} (create/get pods/exec)", "forbidden") from None
            raise translate(exc, f"pod {pod}", self.server) from None

    def exec(self, namespace: str, pod: str, command: list[str] | None = None, container: str = MAIN) -> KubeExecStream:
        """Interactive TTY in ``main``: ``command`` if given, else bash, then sh; RuntimeFailure(NO_SHELL) when
        neither exists. Raises PodNotFound when the pod is gone."""
        # Preflight with the usual timeouts (the websocket handshake itself has none): a gone Pod, a Pod that is
        # not running or an unreachable API server fail fast and clearly here.
        obj = self._json(self.core.read_namespaced_pod, pod, namespace, what=f"pod {pod}")
        if (obj.get("status") or {}).get("phase") != "Running":
            raise RuntimeFailure(f"pod {pod} is not running (phase {obj.get('status', {}).get('phase')})", "invalid")
        if command:
            return KubeExecStream(self._open(namespace, pod, list(command), container=container), list(command))
        for shell in SHELLS:
            ws = self._open(namespace, pod, shell_argv(shell), container=container)
            deadline = time.monotonic() + 1.5
            failed = False
            while time.monotonic() < deadline:
                ws.update(timeout=0.1)
                if ws.peek_channel(3):
                    err = ws.read_channel(3)
                    text = err.decode(errors="replace") if isinstance(err, bytes) else str(err)
                    if '"Success"' not in text:
                        failed = True
                        if "not found" not in text and "no such file" not in text.lower():
                            ws.close()
                            raise RuntimeFailure(f"exec failed: {_status_message(text)}", reason="internal")
                    break
                if ws.peek_channel(1) or ws.peek_channel(2) or not ws.is_open():
                    break
            if failed:
                ws.close()
                continue
            return KubeExecStream(ws, [shell])
        raise RuntimeFailure(NO_SHELL, reason="not_found")

    # ------------------------------------------------------------------ metrics
    def pod_metrics(self, namespace: str, job: str) -> dict[str, dict[str, float]] | None:
        return self._metrics(namespace, f"rlinf.io/job={job}")

    def pod_metrics_all(self, namespace: str, jobs: list[str]) -> dict[str, dict[str, float]] | None:
        """One ``metrics.k8s.io`` list for every console Pod of the namespace."""
        return self._metrics(namespace, JOB_LABEL)

    def _metrics(self, namespace: str, selector: str) -> dict[str, dict[str, float]] | None:
        try:
            data = self._json(
                k8s.CustomObjectsApi(self.api).list_namespaced_custom_object,
                "metrics.k8s.io",
                "v1beta1",
                namespace,
                "pods",
                label_selector=selector,
                what="pod metrics",
            )
        except RuntimeFailure as exc:
            if exc.reason in ("not_found", "forbidden"):
                return None
            raise
        out: dict[str, dict[str, float]] = {}
        for item in data.get("items") or []:
            cpu = mem = 0.0
            for c in item.get("containers") or []:
                cpu += _number((c.get("usage") or {}).get("cpu", 0))
                mem += _number((c.get("usage") or {}).get("memory", 0))
            out[item["metadata"]["name"]] = {"cpu": cpu, "memory": mem}
        return out


_TIMESTAMP = r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?(?:Z|[+-]\d\d:\d\d)"  # RFC3339(Nano), as the kubelet writes it
_LOG_TS = re.compile(rf"^({_TIMESTAMP}) ")
_ALL_STAMPED = re.compile(rf"(?:{_TIMESTAMP} [^\n]*\n)*")


def _by_line_count(data: str, cursor: str, limit_bytes: int) -> LogChunk:
    """:meth:`KubernetesRuntime.read_log_from` of a server that sends no timestamps: the cursor ``L<n>`` counts
    the complete lines seen; the whole log is read and the first ``n`` lines are skipped."""
    lines = data.splitlines(keepends=True)
    if len(lines) > 1 and not lines[-1].endswith("\n"):
        lines.pop()  # still being written
    if not lines or (len(lines) == 1 and not lines[0].endswith("\n") and len(data) < limit_bytes):
        return LogChunk("", cursor)
    done = int(cursor[1:]) if cursor.startswith("L") and cursor[1:].isdigit() else 0
    reset = done > len(lines)
    done = 0 if reset else done
    return LogChunk("".join(lines[done:]), f"L{len(lines)}", reset)


def _after_timestamp(data: str, since_ts: str, seen_at: int, limit_bytes: int, cursor: str) -> LogChunk:
    """The lines of ``data`` (``pods/log?timestamps=true``: every line, ``\\n``-ended, starts with
    ``<RFC3339Nano> ``, as the kubelet writes them) after the ``seen_at``-th line stamped ``since_ts`` (all of
    them when ``since_ts`` is ""), timestamps removed, and the cursor ``T<last timestamp>|<lines with it>``.

    A cut last line (``limitBytes``, or still being written) waits for the next read, unless it is the only one
    and the read was full (one over-long line, taken as it is). The lines are cut and stripped with ``str``
    methods (about ten times faster than a regex per line, issue 18's cold Diagnosis); a response in which some
    line does not start with a timestamp takes the per-line path."""
    parts = data.split("\n")
    rest = parts.pop()  # "" when the data ends with a line break
    if not parts:
        if not rest or len(data) < limit_bytes:
            return LogChunk("", cursor)
        parts, ended, complete = [rest], "", rest + "\n"
    else:
        ended, complete = "\n", data[: len(data) - len(rest)]
    if _ALL_STAMPED.fullmatch(complete) is None:
        return _after_timestamp_per_line(parts, since_ts, seen_at, ended)
    heads = [p.partition(" ")[0] for p in parts]
    start, skip = 0, seen_at
    if since_ts:
        key = _ts_key(since_ts)
        while start < len(heads) and (_ts_key(heads[start]) < key or (heads[start] == since_ts and skip > 0)):
            skip -= heads[start] == since_ts
            start += 1
    if start == len(heads):
        return LogChunk("", f"T{since_ts}|{seen_at}")
    last = heads[-1]
    count = 0
    for head in reversed(heads[start:]):
        if head != last:
            break
        count += 1
    else:
        count += seen_at if last == since_ts else 0
    text = "\n".join([p.partition(" ")[2] for p in parts[start:]]) + ended
    return LogChunk(text, f"T{last}|{count}")


def _after_timestamp_per_line(parts: list[str], since_ts: str, seen_at: int, ended: str) -> LogChunk:
    """:func:`_after_timestamp` line by line, for a response where some line carries no timestamp (it keeps the
    timestamp of the line before)."""
    out: list[str] = []
    last_ts, last_count = since_ts, seen_at
    skip_at = seen_at
    for line in parts:
        m = _LOG_TS.match(line)
        ts = m.group(1) if m else last_ts
        body = line[m.end() :] if m else line
        if since_ts and _ts_key(ts) < _ts_key(since_ts):
            continue
        if since_ts and ts == since_ts and skip_at > 0:
            skip_at -= 1
            continue
        out.append(body)
        if ts == last_ts:
            last_count += 1
        else:
            last_ts, last_count = ts, 1
    return LogChunk("\n".join(out) + ended if out else "", f"T{last_ts}|{last_count}")


def _ts_key(ts: str) -> tuple[str, str]:
    """Sortable key of an RFC3339(Nano) timestamp as the kubelet writes them: (UTC seconds, fraction). The
    kubelet stamps lines in its process's time zone (``2026-12-03T21:30:20.5+08:00`` where TZ is not UTC), so an
    offset is folded into the seconds."""
    body, offset = ts, ""
    if not ts.endswith("Z") and len(ts) > 6 and ts[-6] in "+-" and ts[-3] == ":":
        body, offset = ts[:-6], ts[-6:]
    main, _, frac = body.rstrip("Z").partition(".")
    if offset and offset != "+00:00":
        main = _utc_seconds(f"{main}{offset}").rstrip("Z")
    return main, frac.ljust(9, "0")


def _utc_seconds(ts: str) -> str:
    """``ts`` (RFC3339(Nano), ``Z`` or an offset) as whole UTC seconds ``YYYY-MM-DDTHH:MM:SSZ``: what
    ``sinceTime`` takes. The fraction is dropped (the API passes whole seconds on anyway)."""
    main = ts.split(".")[0]
    offset = ""
    if not ts.endswith("Z") and len(ts) > 6 and ts[-6] in "+-" and ts[-3] == ":":
        offset = ts[-6:]
    main = main.rstrip("Z")[:19]
    if not offset or offset == "+00:00":
        return main + "Z"
    moment = datetime.fromisoformat(main + offset).astimezone(UTC)
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


def _status_message(text: str) -> str:
    try:
        return str(json.loads(text).get("message", text))[:300]
    except ValueError:
        return text[:300]
