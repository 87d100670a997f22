"""Stopping a process the tests or benchmarks started in a session of its own (``start_new_session=True``)."""

from __future__ import annotations

import os
import signal
import subprocess
import time
import urllib.request
from pathlib import Path
from typing import IO

import psutil


def stop_group(proc: subprocess.Popen, timeout: float = 30) -> None:
    """SIGTERM to ``proc``, then SIGKILL to its process group after ``timeout`` s. Only that group: never a
    process the caller did not start."""
    proc.terminate()
    try:
        proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=10)


def start_web_tier(
    manage: list[str], env: dict, cwd: Path, log_path: Path, workers: int, timeout: float = 90
) -> tuple[subprocess.Popen, str, IO]:
    """``manage.py serve_web`` with ``workers`` on a free loopback port, in a session of its own, its output in
    ``log_path``: ``(process, base URL, open log file)`` once ``/login/`` answers. RuntimeError with the log's tail
    when it does not within ``timeout`` s (the process is killed)."""
    from tests.conftest import free_port  # local import: conftest imports pytest fixtures this module need not load

    port = free_port()
    log = open(log_path, "w")  # noqa: SIM115 - closed by the caller after stop_group
    proc = subprocess.Popen(
        [*manage, "serve_web", "--port", str(port), "--workers", str(workers)],
        env=env,
        cwd=cwd,
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    base = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + timeout
    while True:
        try:
            urllib.request.urlopen(base + "/login/", timeout=2).close()
            return proc, base, log
        except OSError:
            if time.monotonic() > deadline or proc.poll() is not None:
                proc.kill()
                log.close()
                raise RuntimeError(log_path.read_text()[-3000:]) from None
            time.sleep(0.3)


def alive(procs: set[tuple[int, float]]) -> set[tuple[int, float]]:
    """The recorded processes still running (same PID and start time, not a zombie)."""
    left = set()
    for pid, started in procs:
        try:
            proc = psutil.Process(pid)
            if proc.create_time() == started and proc.status() != psutil.STATUS_ZOMBIE:
                left.add((pid, started))
        except psutil.Error:
            pass
    return left
