"""The web tier: several daphne processes sharing one listening socket, sized by cores.

Django runs a synchronous view of one ASGI process in one thread (``thread_sensitive``), so a single daphne
served requests one at a time: 8 connections were barely faster than 1, and one user's slow request (a hung
cluster, a large log) held everyone's list. Here the parent binds the socket once and starts ``workers`` daphne
processes with ``--fd`` on it; the kernel hands each new connection to an idle process. Every process serves HTTP
and websockets alike (a websocket stays in the process that accepted it; cross-process messages go through the
Redis channel layer when ``REDIS_URL`` is set). A worker that exits is restarted.

The workers die with the tier: each gets SIGTERM when its parent dies (``rlark_console.lifecycle.die_with_parent``),
even of SIGKILL. ``record`` (a file) names the tier and its workers by PID and start time; a tier started on the
same port while the port is still held stops the workers of a dead tier named there (never a process it cannot
prove its own) and waits up to ``BIND_WAIT`` s for the port before it gives up.

Sizing (``RLARK_WEB_WORKERS``, else ``default_workers()``): 2 per core, at least 2, at most 8 — views mostly
wait on PostgreSQL and the clusters, so two per core keeps the cores busy; each process costs ~100 MB.
"""

from __future__ import annotations

import errno
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import psutil

from rlark_console.lifecycle import Record, die_with_parent

MAX_WORKERS = 8
STOP_TIMEOUT = 15.0
BIND_WAIT = 20.0  # s a starting tier waits for its port (a dead tier's workers still exiting)


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


def bind_when_free(
    host: str, port: int, record: Record | None = None, wait: float = BIND_WAIT, log: Callable[[str], None] = print
) -> socket.socket:
    """:func:`bind`, retried every 0.2 s for up to ``wait`` s while the address is in use. Each time it is, the
    workers of a dead tier named in ``record`` are stopped (ours by recorded PID and start time; nothing else is
    signalled). Raises OSError (EADDRINUSE) after ``wait`` s, naming the processes that hold the port when
    they are visible."""
    deadline = time.monotonic() + wait
    while True:
        try:
            return bind(host, port)
        except OSError as exc:
            if exc.errno != errno.EADDRINUSE:
                raise
            if time.monotonic() > deadline:
                holders = ", ".join(port_holders(port)) or "unknown processes"
                raise OSError(errno.EADDRINUSE, f"{host}:{port} is held by {holders} (not recorded as ours)") from exc
        stopped = record.stop_orphans() if record is not None else []
        if stopped:
            log(f"web tier: stopped the workers {stopped} a dead web tier left on port {port}")
        else:
            time.sleep(0.2)


def port_holders(port: int) -> list[str]:
    """``"PID (name)"`` of each process listening on TCP ``port`` that this user may inspect (for messages)."""
    out = []
    try:
        conns = psutil.net_connections(kind="tcp")
    except (psutil.Error, OSError):
        return out
    for conn in conns:
        if conn.status == psutil.CONN_LISTEN and conn.laddr and conn.laddr.port == port and conn.pid:
            try:
                out.append(f"{conn.pid} ({psutil.Process(conn.pid).name()})")
            except psutil.Error:
                out.append(str(conn.pid))
    return sorted(set(out))


def daphne_command(fd: int, application: str = "launcher.asgi:application") -> list[str]:
    """One worker: daphne on the inherited listening socket ``fd``, with the request body limit of
    ``rlark_console.daphne_worker``. No ``--proxy-headers``: forwarded headers are believed only from
    ``RLARK_TRUSTED_PROXIES`` (rlark_console/clientaddr.py)."""
    return [sys.executable, "-m", "rlark_console.daphne_worker", "--fd", str(fd), application]


class WebTier:
    """``workers`` daphne processes on one socket; ``run()`` supervises them until SIGINT/SIGTERM.

    ``record``: a file (e.g. ``<VAR_DIR>/web-<port>.json``) naming this tier and its workers, kept current while it
    runs and removed on a clean stop; ``None`` keeps no record. The port is bound by :func:`bind_when_free`."""

    def __init__(
        self,
        host: str,
        port: int,
        workers: int,
        cwd: str | os.PathLike,
        log=print,
        record: Path | None = None,
        bind_wait: float = BIND_WAIT,
    ) -> None:
        self.record = Record(record) if record is not None else None
        self.sock = bind_when_free(host, port, self.record, bind_wait, log)
        self.workers = workers
        self.cwd = cwd
        self.log = log
        self.children: list[subprocess.Popen | None] = [None] * workers
        self.stopping = False

    def start(self, slot: int) -> None:
        fd = self.sock.fileno()
        env = {**os.environ, "RLARK_WEB_TIER": "1"}  # settings: one cache shared by the workers (login rate limit)
        self.children[slot] = subprocess.Popen(
            daphne_command(fd), pass_fds=(fd,), cwd=self.cwd, env=env, preexec_fn=die_with_parent()
        )
        self.write_record()

    def write_record(self) -> None:
        """Name this process and its running workers in the record (when there is one)."""
        if self.record is not None:
            self.record.write(os.getpid(), [p.pid for p in self.children if p is not None and p.poll() is None])

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
        if self.record is not None:
            self.record.remove()
