"""Populate a test control plane the way an operator would: kwok GPU nodes, and the console's own
credentials from ``deploy/rbac.yaml``.

- :func:`add_nodes` creates Nodes that kwok manages (annotation ``kwok.x-k8s.io/node=fake``) with the
  console's labels (``rlark.io/node-category``, ``rlark.io/gpu-model``) and ``nvidia.com/gpu`` capacity;
  ``cordoned`` ones are ``spec.unschedulable``.
- :func:`console_kubeconfig` applies ``deploy/rbac.yaml`` (its ``rlark-system`` namespace and cluster-scoped
  names rewritten to ``namespace`` so several test clusters can share one control plane), asks the real
  TokenRequest API for a token of the ``rlark-console`` ServiceAccount and returns a kubeconfig dict for it:
  exactly what a user pastes into "register cluster". A verb missing from our RBAC fails there as in production.
"""

from __future__ import annotations

import base64
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from tools.k8s.controlplane import KWOK_NODE_ANNOTATION, ControlPlane

ROOT = Path(__file__).resolve().parent.parent.parent
RBAC = ROOT / "deploy" / "rbac.yaml"


@dataclass
class NodeSpec:
    """One kwok Node. ``gpus`` = ``nvidia.com/gpu`` capacity (0 = none); cpu in cores, memory in GiB."""

    name: str
    labels: dict[str, str] = field(default_factory=dict)
    gpus: int = 8
    cpu: int = 96
    memory_gi: int = 1024
    cordoned: bool = False
    pods: int = 110


def node_manifest(spec: NodeSpec) -> dict:
    capacity = {"cpu": str(spec.cpu), "memory": f"{spec.memory_gi}Gi", "pods": str(spec.pods)}
    if spec.gpus:
        capacity["nvidia.com/gpu"] = str(spec.gpus)
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": spec.name,
            "annotations": {KWOK_NODE_ANNOTATION: "fake", "node.alpha.kubernetes.io/ttl": "0"},
            "labels": {
                "kubernetes.io/hostname": spec.name,
                "kubernetes.io/os": "linux",
                "kubernetes.io/arch": "amd64",
                "type": "kwok",
                **spec.labels,
            },
        },
        "spec": {"unschedulable": spec.cordoned},
        "status": {"capacity": capacity, "allocatable": capacity},
    }


def add_nodes(cp: ControlPlane, nodes: list[NodeSpec]) -> None:
    """Create (or update) the Nodes in one kubectl call; kwok makes them Ready within a second or two."""
    docs = [node_manifest(n) for n in nodes]
    cp.kubectl("apply", "--server-side", "--force-conflicts", "-f", "-", input=yaml.safe_dump_all(docs))


def delete_nodes(cp: ControlPlane, names: list[str]) -> None:
    if names:
        cp.kubectl("delete", "node", "--ignore-not-found", "--wait=false", *names)


def rbac_for(namespace: str) -> str:
    """``deploy/rbac.yaml`` for another namespace (its cluster-scoped names suffixed the same way)."""
    text = RBAC.read_text()
    if namespace == "rlark-system":
        return text
    text = text.replace("name: rlark-console-nodes", f"name: rlark-console-nodes-{namespace}")
    return text.replace("rlark-system", namespace)


def console_kubeconfig(cp: ControlPlane, namespace: str = "rlark-system", hours: int = 24) -> dict:
    """Apply our RBAC for ``namespace`` and return a kubeconfig dict holding a ServiceAccount token."""
    cp.kubectl("apply", "-f", "-", input=rbac_for(namespace))
    token = cp.kubectl("-n", namespace, "create", "token", "rlark-console", f"--duration={hours}h").strip()
    ca = base64.b64encode((cp.pki / "ca.crt").read_bytes()).decode()
    return {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "kwok", "cluster": {"server": cp.server, "certificate-authority-data": ca}}],
        "users": [{"name": "rlark-console", "user": {"token": token}}],
        "contexts": [{"name": "kwok", "context": {"cluster": "kwok", "user": "rlark-console", "namespace": namespace}}],
        "current-context": "kwok",
    }


def gpu_fleet(
    prefix: str,
    count: int,
    gpus: int = 8,
    category: str = "gpu",
    model: str = "A800",
    cordoned: int = 0,
    extra_labels: dict[str, str] | None = None,
) -> list[NodeSpec]:
    """``count`` GPU nodes named ``<prefix>-<i>``; the last ``cordoned`` of them are cordoned."""
    return [
        NodeSpec(
            name=f"{prefix}-{i}",
            labels={"rlark.io/node-category": category, "rlark.io/gpu-model": model, **(extra_labels or {})},
            gpus=gpus,
            cordoned=i >= count - cordoned,
        )
        for i in range(count)
    ]


def _main(argv: list[str]) -> int:
    import argparse
    import json

    parser = argparse.ArgumentParser(description="add kwok GPU nodes to the control plane of `make k8s-up`")
    parser.add_argument("--count", type=int, default=4)
    parser.add_argument("--gpus", type=int, default=8)
    parser.add_argument("--prefix", default="kwok-gpu")
    parser.add_argument("--namespace", default="rlark-system", help="print a console kubeconfig for it")
    args = parser.parse_args(argv)
    from tools.k8s.session import state_dir  # local import: only the command line reads make k8s-up's state

    state = json.loads((state_dir() / "state.json").read_text())
    cp = ControlPlane(bins=Path(state["bins"]), work=Path(state["work"]))
    cp.api_port = int(state["server"].rsplit(":", 1)[1])
    fleet = gpu_fleet(args.prefix, max(0, min(args.count, 5000)), args.gpus)
    if fleet:  # --count 0: only the console's kubeconfig (real nodes of `make k8s-up-real` are already there)
        add_nodes(cp, fleet)
    out = Path(state["work"]) / f"console-{args.namespace}.kubeconfig"
    out.write_text(yaml.safe_dump(console_kubeconfig(cp, args.namespace, hours=24 * 30)))
    out.chmod(0o600)
    print(f"{args.count} nodes added; the console's kubeconfig (ServiceAccount rlark-console) is:")
    print(out)
    return 0


if __name__ == "__main__":
    import sys

    sys.exit(_main(sys.argv[1:]))
