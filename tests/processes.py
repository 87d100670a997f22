"""Stopping a process the tests or benchmarks started in a session of its own (``start_new_session=True``)."""

from __future__ import annotations

import os
import signal
import subprocess


def stop_group(proc: subprocess.Popen, timeout: float = 30) -> None:
    """SIGTERM to ``proc``, then SIGKILL to its process group after ``timeout`` s. Only that group: never a
    process the caller did not start."""
    proc.terminate()
    try:
        proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=10)
