"""The local-runtime supervisor process: serves :class:`~clusters.runtime.local.supervision.Supervisor` over a
unix socket.

Started by ``python manage.py local_supervisor`` (``manage.py runconsole`` / ``make run`` start it), which
replaces itself with ``python -m clusters.runtime.local.supervisor --root DIR``. The web/Celery processes talk
to it through :class:`clusters.runtime.local.LocalRuntime`: one JSON request line
``{"op": <name>, "args": {...}}``, one JSON answer line ``{"ok": true, "result": ...}`` or
``{"ok": false, "error": <message>, "reason": not_found|invalid|internal}``; the operations are :data:`OPS`
(each a ``Supervisor.op_*`` method). The socket is ``<root>/supervisor.sock`` (0600; a short path in /tmp when
that is too long, ``statedir.socket_path``); ``supervisor.lock`` keeps one supervisor per state directory and
``supervisor.pid`` names it. On SIGTERM/SIGINT it stops every Worker unless ``RLARK_LOCAL_KEEP_PODS=1``.
Process supervision itself (state, restarts, back-off, scheduling, adoption) is
:mod:`clusters.runtime.local.supervision`.
"""

from __future__ import annotations

import argparse
import contextlib
import fcntl
import json
import logging
import os
import signal
import socketserver
import threading
from pathlib import Path

import rlark_config
from clusters.runtime.local.statedir import socket_path
from clusters.runtime.local.supervision import Supervisor

log = logging.getLogger("rlark.local_supervisor")


OPS = {
    "ping": "op_ping",
    "set_nodes": "op_set_nodes",
    "apply_task": "op_apply_task",
    "scale_task": "op_scale_task",
    "delete_task": "op_delete_task",
    "restart_pods": "op_restart_pods",
    "list_pods": "op_list_pods",
    "list_nodes": "op_list_nodes",
    "pod_info": "op_pod_info",
    "job_ids": "op_job_ids",
    "pod_metrics": "op_pod_metrics",
    "list_namespaces": "op_list_namespaces",
    "set_network": "op_set_network",
    "delete_network": "op_delete_network",
    "set_domain_members": "op_set_domain_members",
    "domain_states": "op_domain_states",
}


class _Handler(socketserver.StreamRequestHandler):
    def handle(self) -> None:
        sup: Supervisor = self.server.supervisor  # type: ignore[attr-defined]
        line = self.rfile.readline(16 * 2**20)
        if not line.strip():  # a connect-only probe
            return
        try:
            req = json.loads(line)
            method = getattr(sup, OPS[req["op"]])
            args = req.get("args") or {}
            nodes = args.pop("nodes", None) if req["op"] != "set_nodes" else None
            network = args.pop("network", None) if req["op"] != "set_network" else None
            with sup.lock:
                if nodes is not None and "cluster" in args:
                    sup.op_set_nodes(args["cluster"], nodes)
                if network is not None and "cluster" in args:
                    sup.op_set_network(args["cluster"], bool(network.get("isolated")))
                result = method(**args)
                sup._save()
            if req["op"] in (
                "apply_task",
                "scale_task",
                "delete_task",
                "restart_pods",
                "set_nodes",
                "set_domain_members",
            ):
                sup.reconcile()
            answer = {"ok": True, "result": result}
        except LookupError as exc:
            answer = {"ok": False, "error": str(exc).strip("'\""), "reason": "not_found"}
        except (KeyError, TypeError, ValueError) as exc:
            answer = {"ok": False, "error": f"invalid request: {exc}", "reason": "invalid"}
        except Exception as exc:  # noqa: BLE001
            log.exception("request failed")
            answer = {"ok": False, "error": str(exc), "reason": "internal"}
        self.wfile.write(json.dumps(answer).encode() + b"\n")


class _Server(socketserver.ThreadingMixIn, socketserver.UnixStreamServer):
    daemon_threads = True


def serve(root: Path, keep_pods: bool | None = None) -> None:
    """Run the supervisor until SIGTERM/SIGINT. If another supervisor holds the state directory's lock,
    wait for it to exit first."""
    root = Path(root)
    root.mkdir(parents=True, exist_ok=True)
    lock_file = open(root / "supervisor.lock", "w")  # noqa: SIM115 - held for the process lifetime
    try:
        fcntl.flock(lock_file, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        # Another supervisor (e.g. left by a killed `runconsole`) owns the Workers: wait and take over
        # (adopting its Workers) when it exits, instead of exiting and being restarted in a loop.
        log.info("another local supervisor is running for %s; waiting for it to exit", root)
        fcntl.flock(lock_file, fcntl.LOCK_EX)
    if keep_pods is None:
        keep_pods = rlark_config.current().local_keep_pods
    sup = Supervisor(root)
    sock = socket_path(root)
    with contextlib.suppress(FileNotFoundError):
        sock.unlink()
    server = _Server(str(sock), _Handler)
    server.supervisor = sup  # type: ignore[attr-defined]
    os.chmod(sock, 0o600)
    (root / "supervisor.pid").write_text(str(os.getpid()))
    stop = threading.Event()

    def on_signal(signum, _frame):
        stop.set()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.2}, daemon=True).start()
    loop = threading.Thread(target=sup.run_loop, daemon=True)
    loop.start()
    log.info("local supervisor listening on %s (root %s)", sock, root)
    while not stop.is_set():
        stop.wait(1.0)
    server.shutdown()
    sup.shutdown(keep_pods=keep_pods)
    loop.join(timeout=5)
    with contextlib.suppress(FileNotFoundError):
        sock.unlink()


def main(argv: list[str] | None = None) -> None:
    """``python -m clusters.runtime.local --root DIR [--keep-pods]`` (``__main__.py``) (no Django: small RSS)."""
    parser = argparse.ArgumentParser(description="RLark local runtime supervisor")
    parser.add_argument("--root", required=True)
    parser.add_argument("--keep-pods", action="store_true", default=None)
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    serve(Path(args.root), keep_pods=args.keep_pods)


if __name__ == "__main__":
    main()
