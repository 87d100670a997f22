"""Wait until a Ray cluster has at least N alive nodes (upstream-rlark 5.2).

Usage: ``python -u ray_check.py <address> <required nodes>``. Exit 0 when ready, 1 on timeout.
Timeout and poll interval default to upstream's 900 s / 10 s and can be changed with
``RLARK_RAY_CHECK_TIMEOUT`` / ``RLARK_RAY_CHECK_INTERVAL`` (seconds). SIGTERM/SIGINT exit 0.
Every printed line is byte-identical to upstream.
"""

from __future__ import annotations

import os
import signal
import sys
import time


def _on_signal(signum, _frame):
    print(f"Signal {signum} received, shutting down gracefully...", flush=True)
    sys.exit(0)


def main(argv: list[str]) -> int:
    signal.signal(signal.SIGTERM, _on_signal)
    signal.signal(signal.SIGINT, _on_signal)
    address = argv[1] if len(argv) > 1 else "auto"
    required = int(argv[2]) if len(argv) > 2 else 1
    timeout = float(os.environ.get("RLARK_RAY_CHECK_TIMEOUT", "900"))
    interval = float(os.environ.get("RLARK_RAY_CHECK_INTERVAL", "10"))

    print("Starting Ray cluster status check...", flush=True)
    print(f"Waiting for cluster to have at least {required} nodes.", flush=True)
    print(f"Ray Address: {address}", flush=True)

    import ray

    deadline = time.monotonic() + timeout
    while True:
        alive = None
        try:
            ray.init(address=address, ignore_reinit_error=True, namespace="cluster_check", logging_level="ERROR")
            nodes = ray.nodes()
            alive = sum(1 for n in nodes if n.get("Alive"))
            print(f"Found {len(nodes)} total nodes, {alive} of which are alive.", flush=True)
            print(f"Current node count: {alive}", flush=True)
        except Exception as exc:  # noqa: BLE001 - any failure means "retry"
            print(f"[Warning] Failed to connect or query Ray cluster: {exc}", flush=True)
            print("Could not retrieve node count, retrying...", flush=True)
        finally:
            try:
                ray.shutdown()
            except Exception:  # noqa: BLE001
                pass
        if alive is not None and alive >= required:
            print(f"Cluster is ready: {alive} nodes available (required: {required}).", flush=True)
            print("Ray cluster check passed.", flush=True)
            return 0
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            break
        print(f"Time remaining: {int(remaining)}s", flush=True)
        time.sleep(min(interval, max(remaining, 0.1)))
    minutes = int(timeout // 60) if timeout >= 60 else round(timeout / 60, 2)
    print(f"Error: Cluster did not become ready within {minutes} minutes (required {required} nodes).", flush=True)
    print("Ray cluster check failed.", flush=True)
    return 1


if __name__ == "__main__":
    sys.exit(main(sys.argv))
