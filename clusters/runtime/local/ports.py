"""Port blocks of the local Ray nodes: several Ray nodes share one host, so each gets ports of its own.

Every Worker's Ray node, and every job's GCS, gets a block of :data:`PORT_BLOCK` consecutive ports from
``RLARK_LOCAL_PORT_MIN`` .. ``RLARK_LOCAL_PORT_MAX`` (default 20000 .. 32000). A block is claimed across every
supervisor on the host (other state roots, tests) by an exclusive ``flock`` on
``RLARK_LOCAL_PORT_LOCKS/<base>.lock`` (default ``/tmp/rlark-local-ports``), held while the block is allocated
and released automatically if the supervisor dies. The bases in use are ``state["ports"]`` (``state.json``).

Offsets in a block (:func:`ray_start_args`): 0 node manager, 1 object manager, 2 and 3 dashboard agent (gRPC,
listen), 4 metrics export, 5 runtime env agent, 6 Ray client server (head), 7 dashboard (head, when
``RLARK_LOCAL_RAY_DASHBOARD=1``), 16 .. 63 Ray workers.
"""

from __future__ import annotations

import math
import os
import socket
from typing import Any

import rlark_config
from clusters.runtime.local.host_locks import try_lock

PORT_RANGE = (rlark_config.current().local_port_min, rlark_config.current().local_port_max)
PORT_BLOCK = 64
PORT_LOCK_DIR = rlark_config.current().local_port_locks


def port_free(port: int) -> bool:
    """Whether ``port`` can be bound on 127.0.0.1 right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


class PortBlocks:
    """The port blocks of one supervisor: the bases in ``state["ports"]`` and the lock file held for each
    (``locks``: base -> file descriptor)."""

    def __init__(self, state: dict[str, Any]) -> None:
        self.state = state
        self.locks: dict[int, int] = {}

    def lock(self, base: int) -> bool:
        """Claim the block ``base`` across every supervisor on this host; False when another one holds it."""
        if base in self.locks:
            return True
        fd = try_lock(PORT_LOCK_DIR, f"{base}.lock", 0o777, 0o666)
        if fd is None:
            return False
        self.locks[base] = fd
        return True

    def allocate(self) -> int:
        """A free block's base, locked and recorded in ``state["ports"]``. Raises RuntimeError when none is left."""
        taken = set(self.state["ports"])
        for base in range(PORT_RANGE[0], PORT_RANGE[1] - PORT_BLOCK, PORT_BLOCK):
            if base in taken or not self.lock(base):
                continue
            if all(port_free(p) for p in (base, base + 1, base + 2, base + 3, base + 6, base + 7)):
                self.state["ports"].append(base)
                return base
            self.unlock(base)
        raise RuntimeError("no free port block for a local Ray node")

    def unlock(self, base: int) -> None:
        """Release the lock of block ``base`` (it stays recorded, if it was)."""
        fd = self.locks.pop(base, None)
        if fd is not None:
            os.close(fd)

    def free(self, base: int | None) -> None:
        """Give block ``base`` back (None: nothing to give)."""
        if base in self.state["ports"]:
            self.state["ports"].remove(base)
        if base is not None:
            self.unlock(base)

    def relock(self) -> None:
        """After ``state.json`` was read: lock every recorded block again; one another supervisor took meanwhile
        is given up."""
        for base in list(self.state["ports"]):
            if not self.lock(base):
                self.state["ports"].remove(base)

    def keep_only(self, keep: set[int]) -> None:
        """Release every block but ``keep`` (the jobs' GCS ports, when the supervisor stops its Workers)."""
        for base in list(self.locks):
            if base not in keep:
                self.unlock(base)
        self.state["ports"] = sorted(keep)


def ray_start_args(base: int, head: bool, gpus: float, cpus: float = 0) -> list[str]:
    """Per-node ``ray start`` options so several Ray nodes share one host (see rlark_ray_local): the ports of the
    block ``base``, the object store size (``RLARK_LOCAL_OBJECT_STORE_BYTES``, default 128 MiB), the GPUs and
    CPUs the Pod requested."""
    args = [
        f"--node-manager-port={base}",
        f"--object-manager-port={base + 1}",
        f"--dashboard-agent-grpc-port={base + 2}",
        f"--dashboard-agent-listen-port={base + 3}",
        f"--metrics-export-port={base + 4}",
        f"--runtime-env-agent-port={base + 5}",
        f"--min-worker-port={base + 16}",
        f"--max-worker-port={base + PORT_BLOCK - 1}",
        f"--object-store-memory={rlark_config.current().local_object_store_bytes}",
    ]
    if head:
        args.append(f"--ray-client-server-port={base + 6}")
        if rlark_config.current().local_ray_dashboard:
            args += ["--include-dashboard=true", f"--dashboard-port={base + 7}"]
        else:
            args.append("--include-dashboard=false")
    if gpus:
        args.append(f"--num-gpus={int(gpus)}")
    # Ray pre-starts one idle worker per CPU; local nodes share the host, so they claim what the Pod
    # requested (default 1) instead of every host core.
    args.append(f"--num-cpus={max(1, math.ceil(cpus))}")
    return args
