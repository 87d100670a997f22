"""A cluster's namespaces and StorageClasses as the cluster itself reports them, next to the console's own
records, for the cluster's page.

Read through the runtime interface (``Runtime.list_namespaces`` / ``list_storage_classes``: the Kubernetes API,
or the local runtime's supervisor and state directory), then merged with what the console manages:

- namespaces the console manages: the cluster's own ``Cluster.namespace`` and the namespaces of its Tasks;
- StorageClasses the console manages: its ``storage.StorageClass`` records of the cluster, each under the
  cluster-side name it uses (``parameters.storage_class_name`` for an existing Kubernetes StorageClass, else
  the record's name, as ``jobs.control.controller`` passes them to the manifests).

Each row says where it exists: ``managed`` (a console record the cluster also has), ``cluster`` (only in the
cluster), ``missing`` (a console record the cluster does not have), ``object`` (an S3 record on a cluster
without such a class: object storage needs no StorageClass). A cluster that cannot be read gives
``error`` (a localized sentence) and no rows, never the console's records alone dressed up as the cluster's.
"""

from __future__ import annotations

import dataclasses

from django.utils.translation import gettext as _

from clusters.models import Cluster
from clusters.runtime import registry
from clusters.runtime.base import RuntimeFailure
from jobs.models import Task

MAX_ROWS = 500  # bound what a page lists (a cluster may have thousands of namespaces)


@dataclasses.dataclass(frozen=True)
class Row:
    """One namespace or StorageClass. ``where``: ``managed`` | ``cluster`` | ``missing`` | ``object``;
    ``records``: the console's StorageClass records using it; ``provisioner``, ``default`` (the cluster's default
    StorageClass) and ``claims`` (local runtime: claim directories) as the cluster reports them."""

    name: str
    where: str
    records: str = ""
    provisioner: str = ""
    default: bool = False
    claims: int | None = None


@dataclasses.dataclass(frozen=True)
class Listing:
    """Rows (managed first, then by name) or, when the cluster could not be read, ``error`` and no rows.
    ``truncated``: more than :data:`MAX_ROWS` rows existed."""

    rows: tuple[Row, ...] = ()
    error: str = ""
    truncated: bool = False
    unreachable: bool = False


def failure_message(exc: Exception, what: str) -> str:
    """A localized sentence for a failed read of ``what`` (an already translated noun)."""
    reason = getattr(exc, "reason", "")
    if isinstance(exc, NotImplementedError):
        return _("This runtime does not report its %(what)s.") % {"what": what}
    if reason == "unreachable":
        return _("The cluster cannot be reached, so its %(what)s cannot be listed now.") % {"what": what}
    if reason == "unauthorized":
        return _("The cluster rejected the console's credentials, so its %(what)s cannot be listed.") % {"what": what}
    if reason == "forbidden":
        return _("The console's RBAC does not allow listing the cluster's %(what)s (deploy/rbac.yaml grants it).") % {
            "what": what
        }
    return _("The cluster's %(what)s could not be listed: %(error)s") % {"what": what, "error": str(exc)[:300]}


def _failed(exc: Exception, what: str) -> Listing:
    return Listing(error=failure_message(exc, what), unreachable=getattr(exc, "reason", "") == "unreachable")


def _ordered(rows: list[Row]) -> Listing:
    order = {"managed": 0, "missing": 1, "object": 2, "cluster": 3}
    rows.sort(key=lambda r: (order[r.where], r.name))
    return Listing(tuple(rows[:MAX_ROWS]), truncated=len(rows) > MAX_ROWS)


def managed_namespaces(cluster: Cluster) -> set[str]:
    used = Task.objects.filter(cluster=cluster).exclude(namespace="").values_list("namespace", flat=True)
    return {cluster.namespace, *used.distinct()[:MAX_ROWS]}


def contents(cluster: Cluster) -> tuple[Listing, Listing]:
    """``(namespaces, storage_classes)`` with one runtime; an unreachable cluster is asked once, not twice."""
    try:
        runtime = registry.runtime_for(cluster)
    except RuntimeFailure as exc:
        failed = Listing(error=failure_message(exc, _("namespaces and StorageClasses")))
        return failed, failed
    ns = namespaces(cluster, runtime)
    if ns.error and ns.unreachable:
        return ns, _failed(RuntimeFailure("", "unreachable"), _("StorageClasses"))
    return ns, storage_classes(cluster, runtime)


def namespaces(cluster: Cluster, runtime=None) -> Listing:
    """The cluster's namespaces, each marked ``managed`` / ``cluster`` / ``missing``."""
    try:
        found = set((runtime or registry.runtime_for(cluster)).list_namespaces())
    except (RuntimeFailure, NotImplementedError) as exc:
        return _failed(exc, _("namespaces"))
    managed = managed_namespaces(cluster)
    rows = [Row(n, "managed" if n in found else "missing") for n in managed]
    rows += [Row(n, "cluster") for n in found - managed]
    return _ordered(rows)


def _console_classes(cluster: Cluster) -> dict[str, list[tuple[str, str]]]:
    """Cluster-side class name -> [(console record name, provider)]."""
    out: dict[str, list[tuple[str, str]]] = {}
    for name, provider, params in cluster.storage_classes.values_list("name", "provider", "parameters"):
        side = str((params or {}).get("storage_class_name") or name) if provider == "kubernetes" else name
        out.setdefault(side, []).append((name, provider))
    return out


def storage_classes(cluster: Cluster, runtime=None) -> Listing:
    """The cluster's StorageClasses, each marked ``managed`` / ``cluster`` / ``missing`` / ``object``."""
    try:
        found = {c.name: c for c in (runtime or registry.runtime_for(cluster)).list_storage_classes()}
    except (RuntimeFailure, NotImplementedError) as exc:
        return _failed(exc, _("StorageClasses"))
    console = _console_classes(cluster)
    rows = []
    for side, records in console.items():
        names = ", ".join(n for n, _p in records)
        info = found.get(side)
        if info is not None:
            rows.append(Row(side, "managed", names, info.provisioner, info.default, info.claims))
        else:
            kubernetes = any(p == "kubernetes" for _n, p in records)
            rows.append(Row(side, "missing" if kubernetes else "object", names))
    for name, info in found.items():
        if name not in console:
            rows.append(Row(name, "cluster", "", info.provisioner, info.default, info.claims))
    return _ordered(rows)
