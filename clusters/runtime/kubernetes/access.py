"""What the console needs to be allowed in a cluster, and the check of it (``ping``).

The verbs are those of ``deploy/rbac.yaml``: the namespaced ones in the cluster's namespace, the cluster-wide ones
for Nodes and the Pods of every namespace (node capacity).
"""

from __future__ import annotations

from kubernetes import client as k8s

from clusters.runtime.base import RuntimeFailure
from clusters.runtime.kubernetes.api import KubeApi

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


def ping(kube: KubeApi) -> None:
    """Reachable, credentials accepted, namespace present, every RBAC verb granted; else RuntimeFailure with
    reason ``unreachable`` / ``unauthorized`` / ``namespace_missing`` / ``forbidden`` (missing verbs listed)."""
    ns = kube.namespace
    try:
        kube.call(kube.core.read_namespace, ns, what=f"namespace {ns}")
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
        result = kube.call(
            k8s.AuthorizationV1Api(kube.api).create_self_subject_access_review, review, what="access review"
        )
        if not (result.status and result.status.allowed):
            full = f"{resource}/{sub}" if sub else resource
            missing.append(f"{verb} {full}" + ("" if namespaced else " (cluster-wide)"))
    if missing:
        raise RuntimeFailure(
            f'missing RBAC permissions in namespace "{ns}": ' + ", ".join(missing) + " (see deploy/rbac.yaml)",
            reason="forbidden",
        )
