"""Keep Ray on loopback in the RLark local runtime (imported by the ``ray`` shim and ``sitecustomize``).

Ray rewrites ``127.0.0.1`` to the host's non-loopback address for ``--node-ip-address`` and
``--address`` (``ray._private.services.resolve_ip_for_localhost``), and a node then retries that
address forever. :func:`patch` replaces the function with the identity. :func:`local_start_args`
adds the per-node ports/temp settings the local runtime passes in ``RLARK_LOCAL_RAY_START_ARGS``
(a JSON list) to a ``ray start`` command line, so several Ray nodes share one host.

Only active when ``RLARK_LOCAL_RUNTIME=1`` (set by the local runtime for its Worker processes).
"""

from __future__ import annotations

import json
import os

_PATCHED = False


def active() -> bool:
    return os.environ.get("RLARK_LOCAL_RUNTIME") == "1"


def patch(services=None) -> None:
    """Make ``resolve_ip_for_localhost`` the identity (idempotent)."""
    global _PATCHED
    if services is None:
        import ray._private.services as services  # noqa: PLC0415
    if getattr(services, "_rlark_loopback_patched", False):
        return

    def resolve_ip_for_localhost(host: str) -> str:
        if not host:
            raise ValueError(f"Malformed host: {host}")
        return host

    services.resolve_ip_for_localhost = resolve_ip_for_localhost
    node_ip = os.environ.get("RLARK_LOCAL_NODE_IP", "127.0.0.1")
    # A driver/worker asking "which IP am I" must answer loopback too (no UDP probe to 8.8.8.8).
    services.get_node_ip_address = lambda address=None: node_ip
    services._rlark_loopback_patched = True
    _PATCHED = True


def local_start_args(argv: list[str]) -> list[str]:
    """Return ``argv`` (the ray CLI arguments after the program name) with local-runtime
    options added to a ``start`` command: the extra args from ``RLARK_LOCAL_RAY_START_ARGS``
    (options already given on the command line win), ``--node-ip-address`` for workers and, on the host's
    loopback, ``--dashboard-host`` forced to the node IP (a Worker in a network namespace of its own keeps the
    script's ``0.0.0.0``: only its job's network and its own loopback are there, as in a Pod)."""
    if not argv or argv[0] != "start":
        return argv
    node_ip = os.environ.get("RLARK_LOCAL_NODE_IP", "127.0.0.1")
    shared_loopback = node_ip.startswith("127.")
    out = []
    for arg in argv:
        if arg.startswith("--dashboard-host=") and shared_loopback:
            arg = f"--dashboard-host={node_ip}"
        out.append(arg)
    given = {a.split("=", 1)[0] for a in out if a.startswith("--")}
    extra = json.loads(os.environ.get("RLARK_LOCAL_RAY_START_ARGS") or "[]")
    if "--node-ip-address" not in given:
        extra.append(f"--node-ip-address={node_ip}")
    is_head = "--head" in given
    for arg in extra:
        name = arg.split("=", 1)[0]
        if name in given:
            continue
        if not is_head and name in {"--include-dashboard", "--dashboard-port", "--ray-client-server-port"}:
            continue
        out.append(arg)
        given.add(name)
    return out


RAY_PROCESS_NAMES = ("raylet", "gcs_server", "ray::", "plasma_store", "dashboard", "log_monitor", "monitor.py")


def ray_processes() -> list[int]:
    """PIDs of Ray processes visible in /proc (in a local Worker: its own PID namespace only)."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                cmd = f.read().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if any(name in cmd for name in RAY_PROCESS_NAMES) or "ray/_private/workers" in cmd:
            found.append(int(entry))
    return found
