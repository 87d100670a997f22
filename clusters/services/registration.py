"""Cluster registration and node administration.

``register_cluster(data, actor=None, request=None) -> Cluster`` is shared by ``POST /api/v1/clusters/`` and
the admin back office. Input shape::

    {"name": "gpu-a", "runtime": "kubernetes", "kubeconfig": "<YAML text or mapping>" | "in_cluster": true,
     "namespace": "rlark-system", "pod_cidr": "10.244.0.0/16", "service_cidr": "10.96.0.0/12"}
    {"name": "alpha", "runtime": "local", "nodes": [{"name": "alpha-0", "labels": {...},
     "capacity": {"nvidia.com/gpu": 8, "cpu": 32, "memory": "256Gi"}}]}

A Kubernetes cluster is saved only after a connectivity test (``test_connection``: reachable, credentials,
namespace, RBAC verbs); every failure is a :class:`RegistrationError` with ``field``, ``code`` and a message that
never contains the kubeconfig. The kubeconfig is stored encrypted (``EncryptedTextField``), never returned,
never logged; the audit entry records only the name, runtime and namespace.
"""

from __future__ import annotations

import ipaddress
import json
from typing import Any

import yaml
from django.db import transaction
from django.utils.translation import gettext as _

from accounts.audit import record
from clusters.models import Cluster, Node, dns_label
from clusters.runtime.base import RuntimeFailure
from clusters.runtime.local import netns
from clusters.services import node_sync
from clusters.services.inventory import upsert_local_nodes


class RegistrationError(ValueError):
    """Invalid registration input or a failed connectivity test. ``field``: input key; ``code``: machine code."""

    def __init__(self, message: str, field: str = "non_field_errors", code: str = "invalid") -> None:
        super().__init__(message)
        self.message = message
        self.field = field
        self.code = code


def normalise_kubeconfig(value: Any) -> str:
    """A kubeconfig given as YAML/JSON text or as a mapping -> YAML text; RegistrationError if unusable."""
    if isinstance(value, bytes):
        value = value.decode("utf-8", "replace")
    if isinstance(value, dict):
        data = value
    else:
        try:
            data = yaml.safe_load(str(value or ""))
        except yaml.YAMLError:
            raise RegistrationError("the kubeconfig is not valid YAML", "kubeconfig", "kubeconfig_invalid") from None
    if not isinstance(data, dict) or not data.get("clusters") or not data.get("users"):
        raise RegistrationError(
            "the kubeconfig must be a mapping with clusters, users and contexts", "kubeconfig", "kubeconfig_invalid"
        )
    return yaml.safe_dump(json.loads(json.dumps(data)), sort_keys=False)


def _cidr(value: str, field: str) -> str:
    value = (value or "").strip()
    if not value:
        return ""
    try:
        net = ipaddress.ip_network(value, strict=True)
    except ValueError:
        raise RegistrationError(
            f"{value!r} is not a valid network (e.g. 10.244.0.0/16)", field, "cidr_invalid"
        ) from None
    return str(net)


def test_connection(cluster: Cluster) -> None:
    """Ping the cluster's API (KubernetesRuntime.ping); RegistrationError(code=<reason>) with a clear message."""
    # local import: the Kubernetes client is optional until a Kubernetes cluster is used
    from clusters.runtime.kubernetes import KubernetesRuntime

    try:
        KubernetesRuntime(cluster).ping()
    except RuntimeFailure as exc:
        field = "namespace" if exc.reason == "namespace_missing" else "kubeconfig"
        raise RegistrationError(f"connectivity test failed: {exc}", field, exc.reason) from None


def validate_cluster_fields(data: dict) -> dict:
    """Check and normalise the common fields; returns the cleaned dict (no DB writes)."""
    name = str(data.get("name") or "").strip()
    if not name:
        raise RegistrationError("a cluster name is required", "name", "required")
    try:
        dns_label(name)
    except Exception:
        raise RegistrationError(
            "use lowercase letters, numbers or hyphens (a DNS label, at most 63 characters)", "name", "name_invalid"
        ) from None
    if len(name) > 63:
        raise RegistrationError("at most 63 characters", "name", "name_invalid")
    if Cluster.objects.filter(name=name).exists():
        raise RegistrationError(f"a cluster named {name!r} already exists", "name", "exists")
    runtime = str(data.get("runtime") or "").strip()
    if runtime not in Cluster.Runtime.values:
        raise RegistrationError("runtime must be 'kubernetes' or 'local'", "runtime", "runtime_invalid")
    return {"name": name, "runtime": runtime}


def register_cluster(data: dict, actor=None, request=None, *, test: bool = True) -> Cluster:
    """Create a cluster from ``data`` (shape in the module docstring). Raises RegistrationError.

    The connection test runs before the transaction opens: a hung API server must not hold a database
    transaction (on SQLite, ``BEGIN IMMEDIATE`` is the write lock every other request waits on)."""
    clean = validate_cluster_fields(data)
    if clean["runtime"] == Cluster.Runtime.KUBERNETES:
        if _isolated_value(data.get("isolated_network")):
            raise RegistrationError(
                _("Only a local cluster can have an isolated network."), "isolated_network", "invalid"
            )
        cluster = Cluster(name=clean["name"], runtime=Cluster.Runtime.KUBERNETES)
        cluster.in_cluster = bool(data.get("in_cluster"))
        if cluster.in_cluster and data.get("kubeconfig"):
            raise RegistrationError("give either a kubeconfig or in_cluster, not both", "kubeconfig", "ambiguous")
        if not cluster.in_cluster:
            if not data.get("kubeconfig"):
                raise RegistrationError("a kubeconfig (or in_cluster: true) is required", "kubeconfig", "required")
            cluster.kubeconfig = normalise_kubeconfig(data["kubeconfig"])
        namespace = str(data.get("namespace") or "rlark-system").strip()
        try:
            dns_label(namespace)
        except Exception:
            raise RegistrationError("the namespace must be a DNS label", "namespace", "namespace_invalid") from None
        cluster.namespace = namespace
        cluster.pod_cidr = _cidr(str(data.get("pod_cidr") or ""), "pod_cidr")
        cluster.service_cidr = _cidr(str(data.get("service_cidr") or ""), "service_cidr")
        cluster.allow_host_path = bool(data.get("allow_host_path"))
        if test:
            test_connection(cluster)
        cluster.status = Cluster.Status.ONLINE
        with transaction.atomic():
            cluster.save()
            _record_created(cluster, actor, request)
        return cluster
    isolated = _isolated(data.get("isolated_network"))
    nodes = data.get("nodes") or []
    if not isinstance(nodes, list) or not all(isinstance(n, dict) and n.get("name") for n in nodes):
        raise RegistrationError("nodes must be a list of {name, labels, capacity}", "nodes", "nodes_invalid")
    names = [str(n["name"]) for n in nodes]
    if len(set(names)) != len(names):
        raise RegistrationError("node names must be unique", "nodes", "nodes_invalid")
    with transaction.atomic():
        cluster = Cluster.objects.create(
            name=clean["name"],
            runtime=Cluster.Runtime.LOCAL,
            status=Cluster.Status.ONLINE,
            namespace=str(data.get("namespace") or "rlark-system"),
            allow_host_path=bool(data.get("allow_host_path")),
            isolated_network=isolated,
            pod_cidr="100.64.0.0/10" if isolated else "",
        )
        try:
            upsert_local_nodes(cluster, nodes)
        except (ValueError, TypeError) as exc:
            raise RegistrationError(f"invalid node capacity: {exc}", "nodes", "nodes_invalid") from None
        _record_created(cluster, actor, request)
    return cluster


def _isolated_value(value: Any) -> bool:
    if value in (None, "", False, "false", "False", "0", 0):
        return False
    if value not in (True, "true", "True", "1", 1, "on"):
        raise RegistrationError(_("isolated_network must be true or false."), "isolated_network", "invalid")
    return True


def _isolated(value: Any) -> bool:
    """``isolated_network`` of a local cluster; refused when this machine cannot build one."""
    if not _isolated_value(value):
        return False
    check_isolated_network()
    return True


def check_isolated_network() -> None:
    """RegistrationError (translated) when this machine cannot build isolated networks (not root, no ``ip``)."""
    ok, _why = netns.available()
    if not ok:
        raise RegistrationError(
            _(
                "An isolated network needs the local runtime to run as root (it creates network namespaces); "
                "this console does not run as root."
            ),
            "isolated_network",
            "isolated_network_unavailable",
        )


def _record_created(cluster: Cluster, actor, request) -> None:
    record(
        actor,
        "cluster.create",
        "cluster",
        cluster.name,
        request=request,
        runtime=str(cluster.runtime),
        namespace=cluster.namespace,
    )


def set_cordon(node: Node, unschedulable: bool, actor=None, request=None) -> Node:
    """Cordon/uncordon a node: on Kubernetes ``spec.unschedulable`` is patched first (RuntimeFailure on
    failure); then the row. Running pods are not affected."""
    cluster = node.cluster
    if cluster.runtime == Cluster.Runtime.KUBERNETES:
        runtime = node_sync.get_runtime(cluster)
        runtime.cordon(node.name, unschedulable)
    if node.unschedulable != unschedulable:
        node.unschedulable = unschedulable
        node.save(update_fields=["unschedulable"])
    record(
        actor,
        "node.cordon" if unschedulable else "node.uncordon",
        "node",
        f"{cluster.name}/{node.name}",
        request=request,
    )
    return node
