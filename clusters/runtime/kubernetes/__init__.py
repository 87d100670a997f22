"""The Kubernetes runtime: ``KubernetesRuntime(cluster)`` over the official ``kubernetes`` client."""

from clusters.runtime.kubernetes.exec_stream import NO_SHELL, KubeExecStream
from clusters.runtime.kubernetes.runtime import KubernetesRuntime

__all__ = ["NO_SHELL", "KubeExecStream", "KubernetesRuntime"]
