"""A plain-data snapshot of what a Job may refer to, so validation needs no database access.

``Inventory.from_db(user)`` loads it in 6 queries (7 with ``exclude_job``); tests build it directly.
Node resource maps are numbers (cores, bytes, counts) as stored by clusters.models.Node.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from accounts.tracking import kinds_of
from clusters.host_paths import HostPathPolicy, host_path_policy
from clusters.models import Cluster, ImageRegistry, Node
from clusters.quantity import parse_quantity
from domains.models import Domain
from jobs.jobspec.layout import main_container
from jobs.models import Pod
from sshkeys.models import SSHPublicKey
from storage.models import StorageClass


@dataclass(frozen=True)
class ClusterInfo:
    name: str
    runtime: str = "local"
    status: str = "online"
    allow_host_path: bool = False
    # the allowed host-path roots and the console's own files (clusters.host_paths)
    host_paths: HostPathPolicy = HostPathPolicy()


@dataclass
class NodeInfo:
    cluster: str
    name: str
    labels: dict[str, str] = field(default_factory=dict)
    capacity: dict[str, Any] = field(default_factory=dict)
    allocatable: dict[str, Any] = field(default_factory=dict)
    used: dict[str, Any] = field(default_factory=dict)
    online: bool = True
    unschedulable: bool = False
    category: str = ""  # clusters.models.Node.category (``gpu``, ``robot``, ``edge`` ...; jobs.jobspec.robot)

    @property
    def schedulable(self) -> bool:
        return self.online and not self.unschedulable

    def free(self, resource: str) -> float:
        """max(0, allocatable - used) of ``resource`` (allocatable falls back to capacity; unknown -> 0)."""
        alloc = self.allocatable.get(resource, self.capacity.get(resource, 0))
        try:
            total = parse_quantity(alloc)
            used = parse_quantity(self.used.get(resource, 0) or 0)
        except ValueError:
            return 0.0
        return max(0.0, total - used)


@dataclass(frozen=True)
class SSHKeyInfo:
    id: int
    name: str
    key: str
    fingerprint: str = ""


@dataclass(frozen=True)
class RegistryInfo:
    """An image registry record: ``registry`` host/prefix, ``public`` flag, whether credentials are stored."""

    registry: str
    public: bool = False
    has_credentials: bool = False


@dataclass
class Inventory:
    """``storage_classes``: set of (cluster, name). ``domains``: set of names. ``registries``: RegistryInfo records."""

    clusters: dict[str, ClusterInfo] = field(default_factory=dict)
    nodes: list[NodeInfo] = field(default_factory=list)
    storage_classes: set[tuple[str, str]] = field(default_factory=set)
    domains: set[str] = field(default_factory=set)
    ssh_keys: list[SSHKeyInfo] = field(default_factory=list)
    registries: list[RegistryInfo] = field(default_factory=list)
    user: str = ""  # the submitter's user name: a cluster's ``{user}`` host-path root names it
    tracking: dict[str, str] | None = None  # the submitter's tracking credentials (name -> service); see below
    tracking_users: list[Any] = field(default_factory=list)  # whose credentials count (submitter, job owner)

    @classmethod
    def from_db(cls, user=None, *, exclude_job=None, key_owners=None) -> Inventory:
        """Snapshot from the database. ``user``: whose SSH keys count as known (None -> none); ``key_owners``:
        further users whose keys count too (e.g. the owner of a job an admin edits).

        ``exclude_job``: a Job being edited; the resources its current Workers hold are given back to their nodes
        so an unchanged edit does not count against itself.
        """
        clusters = {
            c["name"]: ClusterInfo(
                c["name"], c["runtime"], c["status"], c["allow_host_path"], host_path_policy(c["host_path_roots"])
            )
            for c in Cluster.objects.values("name", "runtime", "status", "allow_host_path", "host_path_roots")
        }
        nodes = [
            NodeInfo(
                cluster=n["cluster__name"],
                name=n["name"],
                labels=n["labels"] or {},
                capacity=n["capacity"] or {},
                allocatable=n["allocatable"] or {},
                used=dict(n["used"] or {}),
                online=n["online"],
                unschedulable=n["unschedulable"],
                category=n["category"] or "",
            )
            for n in Node.objects.values(
                "cluster__name",
                "name",
                "labels",
                "capacity",
                "allocatable",
                "used",
                "online",
                "unschedulable",
                "category",
            )
        ]
        storage = set(StorageClass.objects.values_list("cluster__name", "name"))
        domains = set(Domain.objects.values_list("name", flat=True))
        owners = {u.pk for u in [user, *(key_owners or [])] if u is not None and getattr(u, "pk", None)}
        keys = []
        if owners:
            keys = [
                SSHKeyInfo(k["id"], k["name"], k["key"], k["fingerprint"])
                for k in SSHPublicKey.objects.filter(owner__in=owners).values("id", "name", "key", "fingerprint")
            ]
        registries = [
            RegistryInfo(r["registry"], r["public"], bool(r["username"]))
            for r in ImageRegistry.objects.values("registry", "public", "username")
        ]
        inv = cls(clusters, nodes, storage, domains, keys, registries, user=getattr(user, "username", "") or "")
        inv.tracking_users = [user, *(key_owners or [])]
        if exclude_job is not None:
            inv._give_back(exclude_job)
        return inv

    def tracking_kinds(self) -> dict[str, str]:
        """The tracking credentials that count (name -> ``wandb``/``swanlab``), read from the database the first
        time a document names one (one query; none for the many documents without ``spec.trackingCredentials``)."""
        if self.tracking is None:
            self.tracking = kinds_of(self.tracking_users)
        return self.tracking

    def _give_back(self, job) -> None:
        """Subtract the requests of ``job``'s live Pods from their nodes' ``used`` (one query)."""
        templates = {t.get("name"): t for t in (job.spec or {}).get("spec", {}).get("tasks", []) if isinstance(t, dict)}
        by_node = {(n.cluster, n.name): n for n in self.nodes}
        pods = Pod.objects.filter(task__job=job).exclude(phase__in=["Succeeded", "Failed"]).exclude(node="")
        for template_name, cluster_name, node in pods.values_list("task__template_name", "task__cluster__name", "node"):
            info = by_node.get((cluster_name, node))
            requests = (main_container(templates.get(template_name) or {}).get("resources") or {}).get("requests") or {}
            if info is None:
                continue
            for res, qty in requests.items():
                try:
                    info.used[res] = max(0.0, parse_quantity(info.used.get(res, 0) or 0) - parse_quantity(qty))
                except ValueError:
                    continue
