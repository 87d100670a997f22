"""Pick the :class:`~clusters.runtime.base.Runtime` implementation for a cluster."""

from __future__ import annotations

from clusters.models import Cluster
from clusters.runtime.base import Runtime, RuntimeFailure


def get_runtime(cluster: Cluster) -> Runtime:
    """``local`` -> :class:`clusters.runtime.local.LocalRuntime`; ``kubernetes`` ->
    ``clusters.runtime.kubernetes.KubernetesRuntime`` (imported lazily, so a missing or broken
    Kubernetes client only fails when a Kubernetes cluster is used).

    Raises RuntimeFailure(reason="invalid") for an unknown runtime kind and
    RuntimeFailure(reason="internal") when the Kubernetes runtime cannot be imported."""
    if cluster.runtime == Cluster.Runtime.LOCAL:
        from clusters.runtime.local import LocalRuntime

        return LocalRuntime(cluster)
    if cluster.runtime == Cluster.Runtime.KUBERNETES:
        try:
            from clusters.runtime.kubernetes import KubernetesRuntime
        except ImportError as exc:
            raise RuntimeFailure(f"the Kubernetes runtime is not available: {exc}", "internal") from exc
        return KubernetesRuntime(cluster)
    raise RuntimeFailure(f"unknown runtime {cluster.runtime!r} for cluster {cluster.name}", "invalid")
