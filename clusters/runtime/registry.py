"""Pick the :class:`~clusters.runtime.base.Runtime` implementation for a cluster.

:func:`runtime_for` is the one way the rest of the console reaches a cluster's runtime; callers use it as
``registry.runtime_for(cluster)`` (module attribute), so tests swap every caller's runtime with one
``monkeypatch.setattr(registry, "runtime_for", ...)``.
"""

from __future__ import annotations

from clusters.models import Cluster
from clusters.runtime.base import Runtime, RuntimeFailure
from clusters.runtime.local import LocalRuntime


def get_runtime(cluster: Cluster) -> Runtime:
    """``local`` -> :class:`clusters.runtime.local.LocalRuntime`; ``kubernetes`` ->
    ``clusters.runtime.kubernetes.KubernetesRuntime`` (imported lazily, so a missing or broken
    Kubernetes client only fails when a Kubernetes cluster is used).

    Raises RuntimeFailure(reason="invalid") for an unknown runtime kind and
    RuntimeFailure(reason="internal") when the Kubernetes runtime cannot be imported."""
    if cluster.runtime == Cluster.Runtime.LOCAL:
        return LocalRuntime(cluster)
    if cluster.runtime == Cluster.Runtime.KUBERNETES:
        try:
            # local import: the Kubernetes client is optional until a Kubernetes cluster is used
            from clusters.runtime.kubernetes import KubernetesRuntime
        except ImportError as exc:
            raise RuntimeFailure(f"the Kubernetes runtime is not available: {exc}", "internal") from exc
        return KubernetesRuntime(cluster)
    raise RuntimeFailure(f"unknown runtime {cluster.runtime!r} for cluster {cluster.name}", "invalid")


def runtime_for(cluster: Cluster) -> Runtime:
    """The runtime driving ``cluster`` (:func:`get_runtime`); the controller, sync, status, log archive,
    diagnosis, pending reasons and metrics all call this one."""
    return get_runtime(cluster)
