"""The network agent of a Kubernetes Task with ``spec.domain``: a native sidecar.

:func:`add` puts the agent first among the Pod's init containers with ``restartPolicy: Always`` (a native sidecar,
Kubernetes >= 1.28: it starts before ``main`` and runs beside it), adds its volumes and returns the Secret it reads:

- image: the cluster's ``network_agent_image`` (built from this repository: ``docker build --target netagent``);
- security: ``NET_ADMIN`` only (every other capability dropped), not privileged, no privilege escalation; the Pod
  keeps its own network (no ``hostNetwork``). ``/dev/net/tun`` comes from a ``hostPath`` of type ``CharDevice``
  (a non-privileged container has no device nodes beyond the defaults, and ``mknod`` would need ``CAP_MKNOD``);
- the member's certificate, key and agent config arrive in the Secret ``<task>-rlark-net`` (created empty here;
  the console fills in ``<pod>.json``, ``<pod>.key`` and ``<pod>-cert.pub`` once the domain IP is allocated), mounted
  read-only at ``/rlark/net``; the agent waits for ``/rlark/net/$POD_NAME.json``, then runs
  ``python -m domains.netagent`` on it. It writes the managed ``/etc/hosts`` block (the kubelet's hosts file is the
  same for every container of the Pod) and its state to ``/rlark/net-state/status.json`` (an ``emptyDir``).
"""

from __future__ import annotations

from typing import Any

from clusters.host_paths import TUN_DEVICE, TUN_VOLUME

DEFAULT_IMAGE = "rlark-console-netagent:latest"
NAME = "rlark-net"
SECRET_MOUNT = "/rlark/net"
STATE_MOUNT = "/rlark/net-state"
START = (
    'while [ ! -s "/rlark/net/$POD_NAME.json" ]; do echo "waiting for the domain address of $POD_NAME"; sleep 2; done; '
    'exec python -m domains.netagent "/rlark/net/$POD_NAME.json"'
)


def secret_name(task: str) -> str:
    return f"{task}-{NAME}"


def add(pod_spec: dict[str, Any], *, task: str, namespace: str, labels: dict[str, str], image: str) -> dict[str, Any]:
    """Add the sidecar to ``pod_spec`` (in place); returns the Secret object to create beside the StatefulSet."""
    sidecar = {
        "name": NAME,
        "image": image or DEFAULT_IMAGE,
        "restartPolicy": "Always",
        "command": ["sh", "-c", START],
        "env": [{"name": "POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}}],
        "securityContext": {
            "privileged": False,
            "allowPrivilegeEscalation": False,
            "capabilities": {"add": ["NET_ADMIN"], "drop": ["ALL"]},
        },
        "volumeMounts": [
            {"name": NAME, "mountPath": SECRET_MOUNT, "readOnly": True},
            {"name": f"{NAME}-state", "mountPath": STATE_MOUNT},
            {"name": TUN_VOLUME, "mountPath": TUN_DEVICE},
        ],
    }
    init = [c for c in pod_spec.get("initContainers") or [] if c.get("name") != NAME]
    pod_spec["initContainers"] = [sidecar, *init]
    volumes = [v for v in pod_spec.get("volumes") or [] if not str(v.get("name", "")).startswith(NAME)]
    volumes += [
        {"name": NAME, "secret": {"secretName": secret_name(task), "defaultMode": 0o400}},
        {"name": f"{NAME}-state", "emptyDir": {}},
        {"name": TUN_VOLUME, "hostPath": {"path": TUN_DEVICE, "type": "CharDevice"}},
    ]
    pod_spec["volumes"] = volumes
    pod_spec.pop("hostNetwork", None)
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": secret_name(task), "namespace": namespace, "labels": dict(labels)},
        "type": "Opaque",
        "data": {},
    }
