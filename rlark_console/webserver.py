"""The web tier: several daphne processes sharing one listening socket, sized by cores (issue 18).

Django runs a synchronous view of one ASGI process in one thread (``thread_sensitive``), so a single daphne
served requests one at a time: 8 connections were barely faster than 1, and one user's slow request (a hung
cluster, a large log) held everyone's list. Here the parent binds the socket once and starts ``workers`` daphne
processes with ``--fd`` on it; the kernel hands each new connection to an idle process. Every process serves HTTP
and websockets alike (a websocket stays in the process that accepted it; cross-process messages go through the
Redis channel layer when ``REDIS_URL`` is set). A worker that exits is restarted.

Sizing (``RLARK_WEB_WORKERS``, else ``default_workers()``): 2 per core, at least 2, at most 8 — views mostly
wait on PostgreSQL and the clusters, so two per core keeps the cores busy; each process costs ~100 MB.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time

MAX_WORKERS = 8
STOP_TIMEOUT = 15.0


def default_workers(cores: int | None = None) -> int:
    """``RLARK_WEB_WORKERS`` when set (1..32), else 2 per usable core within 2..``MAX_WORKERS``."""
    env = os.environ.get("RLARK_WEB_WORKERS", "").strip()
    if env:
        return max(1, min(32, int(env)))
    if cores is None:
        cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    return max(2, min(MAX_WORKERS, 2 * cores))


def bind(host: str, port: int, backlog: int = 1024) -> socket.socket:
    """A listening TCP socket on ``host:port`` (IPv6 when ``host`` has a colon), inheritable by children."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host, port))
    sock.listen(backlog)
    sock.set_inheritable(True)
    return sock


def daphne_command(fd: int, application: str = "rlark_console.asgi:application") -> list[str]:
    """One worker: daphne on the inherited listening socket ``fd``, with the request body limit of
    ``rlark_console.daphne_worker``. No ``--proxy-headers``: forwarded headers are believed only from
    ``RLARK_TRUSTED_PROXIES`` (accounts/clientaddr.py)."""
    return [sys.executable, "-m", "rlark_console.daphne_worker", "--fd", str(fd), application]


class WebTier:
    """``workers`` daphne processes on one socket; ``run()`` supervises them until SIGINT/SIGTERM."""

    def __init__(self, host: str, port: int, workers: int, cwd: str | os.PathLike, log=print) -> None:
        self.sock = bind(host, port)
        self.workers = workers
        self.cwd = cwd
        self.log = log
        self.children: list[subprocess.Popen | None] = [None] * workers
        self.stopping = False

    def start(self, slot: int) -> None:
        fd = self.sock.fileno()
        env = {**os.environ, "RLARK_WEB_TIER": "1"}  # settings: one cache shared by the workers (login rate limit)
        self.children[slot] = subprocess.Popen(daphne_command(fd), pass_fds=(fd,), cwd=self.cwd, env=env)

    def run(self) -> None:
        def stop(*_args) -> None:
            self.stopping = True

        signal.signal(signal.SIGINT, stop)
        signal.signal(signal.SIGTERM, stop)
        for slot in range(self.workers):
            self.start(slot)
        self.log(f"web tier: {self.workers} daphne workers on {self.sock.getsockname()[:2]}")
        restarted: dict[int, float] = {}
        while not self.stopping:
            time.sleep(0.5)
            for slot, proc in enumerate(self.children):
                if proc is not None and proc.poll() is not None and not self.stopping:
                    if time.monotonic() - restarted.get(slot, 0) < 2:
                        time.sleep(2)  # a worker that dies at once is not restarted in a tight loop
                    self.log(f"web worker {slot} exited with code {proc.returncode}; restarting")
                    restarted[slot] = time.monotonic()
                    self.start(slot)
        self.shutdown()

    def shutdown(self) -> None:
        for proc in self.children:
            if proc is not None and proc.poll() is None:
                proc.terminate()
        deadline = time.monotonic() + STOP_TIMEOUT
        for proc in self.children:
            if proc is None:
                continue
            try:
                proc.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=5)
        self.sock.close()
