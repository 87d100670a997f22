"""Helpers of the network-domain tests (issue 13): isolated local clusters on a real root supervisor."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import types

import pytest

from clusters.runtime.local import netns

needs_root = pytest.mark.skipif(
    os.geteuid() != 0, reason="isolated networks need root (network namespaces, veth, TUN); CI runs as root"
)


def isolated_runtime(sup, cluster: str, nodes: list[dict]):
    """A LocalRuntime of an isolated cluster ``cluster`` on the test's supervisor."""
    from clusters.runtime.local import LocalRuntime

    c = types.SimpleNamespace(name=cluster, namespace="rlark-system", isolated_network=True)
    return LocalRuntime(c, root=sup.root, nodes=nodes)


def reach(ns: str, host: str, port: int, timeout: float = 2.0) -> str:
    """``connected`` | ``refused`` | the error name, for a TCP connect from inside network namespace ``ns``."""
    code = (
        "import socket,sys\n"
        f"s=socket.socket(); s.settimeout({timeout!r})\n"
        f"try:\n s.connect(({host!r},{int(port)})); print('connected')\n"
        "except ConnectionRefusedError: print('refused')\n"
        "except OSError as e: print(type(e).__name__, e.errno)\n"
    )
    out = subprocess.run(
        ["ip", "netns", "exec", ns, sys.executable, "-c", code], capture_output=True, text=True, timeout=30
    )
    return out.stdout.strip() or out.stderr.strip()


def console_listener(port: int = 0) -> socket.socket:
    """A TCP listener on the console address every isolated cluster reaches (IP_FREEBIND: before any network)."""
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.setsockopt(socket.SOL_IP, 15, 1)
    s.bind((netns.CONSOLE_ADDRESS, port))
    s.listen(16)
    return s


def cleanup_networks(*clusters: str) -> None:
    for c in clusters:
        netns.delete_cluster(c)
