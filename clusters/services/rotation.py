"""Rotate a cluster's kubeconfig or token without downtime.

``rotate_credentials(cluster, kubeconfig=..., token=..., actor=...)``:

1. the new credential is built: a whole kubeconfig (YAML text or mapping), or a bearer ``token`` that replaces
   the credential of the stored kubeconfig's current-context user (client certificates of that user dropped);
2. it is tested on a probe copy of the cluster with exactly the registration check
   (``clusters.services.registration.test_connection``: reachable, accepted, namespace present, every RBAC verb
   granted by SelfSubjectAccessReview);
3. only if the test passes is it stored (encrypted) in place of the old one, in one UPDATE; until then, and for
   ever if the test fails, the console keeps using the old credential: no sync or job action sees a gap.

Failures raise :class:`~clusters.services.registration.RegistrationError` (``field`` ``kubeconfig``/``token``);
audited as ``cluster.credentials_rotated`` (never the credential).
"""

from __future__ import annotations

import copy

import yaml

from accounts.audit import record
from clusters.models import Cluster
from clusters.services.registration import RegistrationError, normalise_kubeconfig, test_connection

MAX_TOKEN = 16 * 1024


def _with_token(kubeconfig: str, token: str) -> str:
    data = yaml.safe_load(kubeconfig or "") or {}
    if not isinstance(data, dict) or not data.get("users"):
        raise RegistrationError("the cluster has no stored kubeconfig to put a token in", "token", "no_kubeconfig")
    data = copy.deepcopy(data)
    current = data.get("current-context")
    ctx = next((c for c in data.get("contexts") or [] if c.get("name") == current), None)
    user_name = ((ctx or {}).get("context") or {}).get("user") or data["users"][0].get("name")
    for user in data["users"]:
        if user.get("name") == user_name:
            user["user"] = {"token": token}
            break
    return normalise_kubeconfig(data)


def rotate_credentials(
    cluster: Cluster, *, kubeconfig=None, token: str | None = None, actor=None, request=None
) -> Cluster:
    """Replace the cluster's credential after the new one passed the registration check (module docstring)."""
    if cluster.runtime != Cluster.Runtime.KUBERNETES or cluster.in_cluster:
        raise RegistrationError("only a Kubernetes cluster with a kubeconfig has credentials to rotate", "kubeconfig")
    if bool(kubeconfig) == bool(token):
        raise RegistrationError("give either a new kubeconfig or a new token", "kubeconfig", "required")
    if token is not None:
        token = str(token).strip()
        if not token or len(token) > MAX_TOKEN or any(ch.isspace() for ch in token):
            raise RegistrationError("the token must be one line of at most 16 KiB", "token", "token_invalid")
        new = _with_token(cluster.kubeconfig, token)
    else:
        new = normalise_kubeconfig(kubeconfig)
    probe = Cluster(name=cluster.name, runtime=cluster.runtime, namespace=cluster.namespace, kubeconfig=new)
    test_connection(probe)  # the same SelfSubjectAccessReview check as registration; raises, old one untouched
    cluster.kubeconfig = new
    cluster.save(update_fields=["kubeconfig"])
    record(
        actor,
        "cluster.credentials_rotated",
        "cluster",
        cluster.name,
        request=request,
        kind="token" if token else "kubeconfig",
    )
    return cluster
