"""The environment of a local Worker's ``main`` container.

As the kubelet would give it: the container's ``env`` (``value``, ``fieldRef`` and ``configMapKeyRef`` of the
Task's ConfigMaps), over the launcher's base environment (``launcher.base_env``); ``PYTHONPATH`` starts with the
local helpers; the Ray token's path (never the token, :mod:`.ray_auth`). Then how the Worker's Ray node is
reached: in a network of its own, upstream's fixed Ray port on the Worker's address (the domain IP for a domain
member); on the host's network, the job's GCS port on 127.0.0.1. ``RLARK_POD_PATH`` repeats ``PATH`` for login
shells (/etc/profile resets it).
"""

from __future__ import annotations

from typing import Any

from clusters.runtime.local import launcher, ray_auth


def _declared(t: dict[str, Any], pod: dict[str, Any], main: dict[str, Any], env: dict[str, str]) -> None:
    """The container's own ``env`` into ``env``; a ``PATH`` it sets wins over the base one."""
    objects = {(o.get("kind"), (o.get("metadata") or {}).get("name")): o for o in t.get("extra_objects") or []}
    fields = {
        "metadata.name": pod["name"],
        "metadata.namespace": pod["namespace"],
        "metadata.uid": pod["uid"],
        "spec.nodeName": pod["node"],
        "status.podIP": "127.0.0.1",
        "status.hostIP": "127.0.0.1",
    }
    user_path = None
    for item in main.get("env") or []:
        name = item.get("name")
        if not name:
            continue
        if "value" in item:
            value = str(item.get("value") or "")
        elif (item.get("valueFrom") or {}).get("fieldRef"):
            value = fields.get(item["valueFrom"]["fieldRef"].get("fieldPath", ""), "")
        elif (item.get("valueFrom") or {}).get("configMapKeyRef"):
            ref = item["valueFrom"]["configMapKeyRef"]
            value = str(((objects.get(("ConfigMap", ref.get("name"))) or {}).get("data") or {}).get(ref.get("key"), ""))
        else:
            continue
        if name == "PATH":
            user_path = value
        if name == "PYTHONPATH":
            value = f"{launcher.LOCAL_HELPERS}:{value}" if value else launcher.LOCAL_HELPERS
        env[name] = value
    if user_path is not None:
        env["PATH"] = user_path


def worker_env(
    t: dict[str, Any],
    pod: dict[str, Any],
    main: dict[str, Any],
    *,
    address: str,
    domain_ip: str | None = None,
    gcs_port: int | None = None,
) -> dict[str, str]:
    """The ``main`` container's environment. ``t``: the Task, ``pod``: the Pod record, ``main``: the container;
    ``address``: the Worker's address in its own network ("" on the host's network, then ``gcs_port`` is the
    job's Ray port); ``domain_ip``: its network-domain address when it is a member (None otherwise)."""
    env = launcher.base_env(pod["name"])
    _declared(t, pod, main, env)
    env["POD_NAME"] = pod["name"]
    env.update(ray_auth.worker_env())  # the token's path, never the token
    if address:  # a network namespace of its own: upstream's fixed Ray port
        env["RLARK_LOCAL_NODE_IP"] = domain_ip if domain_ip is not None else address
        if t["ray_role"] == "head":
            env["RLARK_NODE_IP"] = address  # a domain head resolves $(hostname).rlark-domain (ray_head.sh)
        # a worker keeps the head Service's name; /etc/hosts resolves it when the head is in this cluster
    else:
        env["RLARK_RAY_PORT"] = str(gcs_port)
        if t["ray_role"] == "head":
            env["RLARK_NODE_IP"] = "127.0.0.1"
        else:
            env["RLARK_HEAD_ADDRESS"] = "127.0.0.1"
    env["RLARK_POD_PATH"] = env["PATH"]
    return env
