"""``make k8s-up`` / ``make k8s-down``: a control plane of :mod:`tools.k8s.controlplane`, and with ``--real-nodes N``
real nodes of :mod:`tools.k8s.nodes`, left running between commands.

``python -m tools.k8s.session up [--real-nodes N]|down|status``: ``up`` leaves the processes running in their own
sessions, records them in ``<state>/state.json`` (:func:`state_dir`) and prints the admin kubeconfig path on its last
line; ``down`` stops what ``up`` recorded, real nodes first (with what their kubelets added to the host); ``status``
lists the processes. Exit codes: 0 done, 1 not running (status), 2 usage, 3 could not start.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from tools.k8s import images, nodes
from tools.k8s.controlplane import HERE, ControlPlane, ControlPlaneError, _kill_group, build, versions


def state_dir() -> Path:
    """Where ``up`` records what it started (``state.json``) and keeps the control plane's files."""
    return Path(os.environ.get("RLARK_VAR_DIR") or HERE.parent.parent / "var") / "k8s"


def _real_nodes_wanted(argv: list[str]) -> int:
    """``--real-nodes N`` (or ``$REAL_NODES``): how many real nodes ``up`` joins (0 = kwok only)."""
    if "--real-nodes" in argv:
        return int(argv[argv.index("--real-nodes") + 1])
    value = os.environ.get("REAL_NODES", "").strip()
    return int(value) if value.isdigit() else 0


def _up_real_nodes(cp: ControlPlane, count: int) -> dict:
    """Build (when missing) and start ``count`` real nodes for ``cp``; returns their state for state.json."""
    nodes.build_node_binaries()
    built = images.build_all()
    rn = nodes.RealNodes.start(cp, images.node_images(built), count=count)
    print(f"{count} real node(s) Ready: {', '.join(rn.names)} on {rn.network.bridge} ({rn.network.cidr})")
    for image in built.values():
        print(f"  image {image.ref}")
    return rn.to_state()


def _down_real_nodes(state: dict) -> None:
    server = state["server"]
    cp = ControlPlane(bins=Path(state["bins"]), work=Path(state["work"]), api_port=int(server.rsplit(":", 1)[1]))
    left = nodes.RealNodes.from_state(cp, state["real_nodes"]).stop()
    if left:
        print("could not remove: " + ", ".join(left), file=sys.stderr)


def cli(argv: list[str]) -> int:
    cmd = argv[0] if argv else "status"
    state_dir_ = state_dir()
    state_file = state_dir_ / "state.json"
    if cmd == "up":
        if state_file.exists():
            state = json.loads(state_file.read_text())
            alive = [n for n, p in state["pids"].items() if nodes.pid_alive(p)]
            if len(alive) == len(state["pids"]):
                print(f"control plane already running at {state['server']}")
                print(state["kubeconfig"])
                return 0
            cli(["down"])
        try:
            bins = build()
        except ControlPlaneError as exc:
            print(exc, file=sys.stderr)
            return 3
        state_dir_.mkdir(parents=True, exist_ok=True)
        state_dir_.chmod(0o700)
        work = state_dir_ / "run"
        subprocess.run(["rm", "-rf", str(work)], check=False, timeout=60)
        cp = ControlPlane.start(bins, work)
        state = cp.state()
        state_file.write_text(json.dumps(state, indent=1))
        count = _real_nodes_wanted(argv)
        if count:
            try:
                state["real_nodes"] = _up_real_nodes(cp, count)
            except Exception as exc:
                print(f"real nodes: {exc}", file=sys.stderr)
                cli(["down"])
                return 3
            state_file.write_text(json.dumps(state, indent=1))
        v = versions()
        print(f"Kubernetes {v['KUBE_VERSION']} (etcd {v['ETCD_VERSION']}, kwok {v['KWOK_VERSION']}) at {cp.server}")
        print("add nodes and get the console's kubeconfig:  .venv/bin/python -m tools.k8s.fleet --count 4 --gpus 8")
        print("stop it:     make k8s-down")
        print(cp.admin_kubeconfig)
        return 0
    if cmd == "down":
        if not state_file.exists():
            print("no control plane recorded")
            return 0
        state = json.loads(state_file.read_text())
        if state.get("real_nodes"):
            _down_real_nodes(state)
        for name in ("kwok", "kube-scheduler", "kube-controller-manager", "kube-apiserver", "etcd"):
            if name in state["pids"]:
                _kill_group(int(state["pids"][name]), 10)
        link = Path(state["work"]) / "etcd-data"
        if link.is_symlink():
            subprocess.run(["rm", "-rf", str(link.resolve())], check=False, timeout=60)
        state_file.unlink()
        print("control plane stopped")
        return 0
    if cmd == "status":
        if not state_file.exists():
            print("not running")
            return 1
        state = json.loads(state_file.read_text())
        for name, pid in state["pids"].items():
            print(f"{name:24} pid {pid:>7}  {'running' if nodes.pid_alive(pid) else 'gone'}")
        print(state["kubeconfig"])
        return 0
    print("usage: python -m tools.k8s.session up [--real-nodes N]|down|status", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(cli(sys.argv[1:]))
