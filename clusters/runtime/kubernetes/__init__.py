"""The Kubernetes runtime: ``KubernetesRuntime(cluster)`` over the official ``kubernetes`` client."""

from clusters.runtime.kubernetes.runtime import NO_SHELL, KubeExecStream, KubernetesRuntime

__all__ = ["NO_SHELL", "KubeExecStream", "KubernetesRuntime"]
