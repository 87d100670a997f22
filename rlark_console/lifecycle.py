"""Child processes that die with the process that started them, and cleanup that is provably ours.

A supervisor (``runconsole``, the web tier) killed with SIGKILL gets no chance to stop its children. Two things
keep them from outliving it as orphans:

- :func:`die_with_parent` is a ``preexec_fn`` that asks Linux to signal the child when its parent dies
  (``prctl(PR_SET_PDEATHSIG)``); elsewhere it does nothing.
- :func:`reap_with_group` kills the process group of a child that was started in a session of its own
  (``start_new_session=True``) once the child has exited, so whatever it started dies with it. It signals before
  reaping the child: the group id cannot be given to another process while the exited child is unreaped or a
  member of the group lives, so the signal reaches only the child's own descendants.

:class:`Record` keeps (PID, start time) pairs in a file, so a later process can stop orphans of an earlier one it
can prove are ours (same PID and start time), and never touches a process by its name.
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import os
import signal
import subprocess
import sys
from collections.abc import Callable, Iterable
from pathlib import Path

import psutil

PR_SET_PDEATHSIG = 1  # <linux/prctl.h>
START_TIME_SLACK = 0.05  # s: psutil rounds the start time read from /proc


def die_with_parent(sig: int = signal.SIGTERM) -> Callable[[], None] | None:
    """A ``preexec_fn`` for ``subprocess.Popen``: the child gets ``sig`` when the process that started it dies
    (also when that happened between fork and the call: then the child sends itself ``sig`` at once).

    Returns None off Linux (no parent-death signal there). Only for a parent without threads of its own that start
    processes: Linux sends the signal when the *thread* that forked the child exits. The setting survives
    ``exec`` (not of a set-uid program) and is not inherited by the child's own children."""
    if not sys.platform.startswith("linux"):
        return None
    libc = ctypes.CDLL(None, use_errno=True)  # loaded before fork: nothing to load in the child
    parent = os.getpid()

    def preexec() -> None:
        if libc.prctl(PR_SET_PDEATHSIG, int(sig), 0, 0, 0) != 0:
            raise OSError(ctypes.get_errno(), "prctl(PR_SET_PDEATHSIG) failed")
        if os.getppid() != parent:  # the parent died before prctl took effect
            os.kill(os.getpid(), sig)

    return preexec


def kill_group(pgid: int, sig: int = signal.SIGKILL) -> bool:
    """Send ``sig`` to process group ``pgid`` (a child started with ``start_new_session=True``: its PID).

    True when the group still had a member; False when it was already gone. Never raises for a vanished group."""
    try:
        os.killpg(pgid, sig)
    except (ProcessLookupError, PermissionError):
        return False
    return True


def reap_with_group(proc: subprocess.Popen) -> int | None:
    """``proc.poll()``, but when ``proc`` (started with ``start_new_session=True``) has exited, first SIGKILL what
    remains of its process group while its unreaped exit still reserves the group's id, so no other process can
    hold that id. The return code, or None while ``proc`` runs."""
    if proc.returncode is not None:
        return proc.returncode
    try:
        exited = os.waitid(os.P_PID, proc.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT)
    except (ChildProcessError, AttributeError):  # already reaped / no waitid on this platform
        return proc.poll()
    if exited is None:
        return None
    kill_group(proc.pid)
    return proc.poll()


def identity(pid: int) -> tuple[int, float] | None:
    """``(pid, start time in s since the epoch)`` of a running process, None when there is none."""
    try:
        return pid, psutil.Process(pid).create_time()
    except psutil.Error:
        return None


def same_process(pid: int, started: float) -> psutil.Process | None:
    """The running, non-zombie process ``pid`` when it started at ``started`` (s since the epoch), else None."""
    try:
        proc = psutil.Process(pid)
        if abs(proc.create_time() - started) < START_TIME_SLACK and proc.status() != psutil.STATUS_ZOMBIE:
            return proc
    except psutil.Error:
        pass
    return None


class Record:
    """A JSON file naming a supervising process (``leader``) and the processes it started (``children``), each as
    ``[pid, start time]``. Written atomically (0600); read back by the next process that wants the same resource
    (e.g. a listening port) to stop what the previous one left behind."""

    def __init__(self, path: Path) -> None:
        self.path = Path(path)

    def write(self, leader: int, children: Iterable[int]) -> None:
        """Record ``leader`` and the ``children`` PIDs still running (an unknown PID is left out)."""
        data = {
            "leader": identity(leader),
            "children": [ident for pid in children if (ident := identity(pid)) is not None],
        }
        tmp = self.path.with_name(self.path.name + ".tmp")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as f:
            json.dump(data, f)
        os.replace(tmp, self.path)

    def remove(self) -> None:
        with contextlib.suppress(FileNotFoundError):
            self.path.unlink()

    def orphans(self) -> list[psutil.Process]:
        """The recorded children still running (same PID and start time) when the recorded leader is not:
        processes ours by record that nobody supervises. Empty when the leader runs or the file is unreadable."""
        try:
            data = json.loads(self.path.read_text())
        except (OSError, ValueError):
            return []
        leader = data.get("leader")
        if leader and same_process(int(leader[0]), float(leader[1])) is not None:
            return []
        found = (same_process(int(pid), float(started)) for pid, started in data.get("children") or [])
        return [proc for proc in found if proc is not None]

    def stop_orphans(self, grace: float = 3.0) -> list[int]:
        """SIGTERM the orphans (:meth:`orphans`), SIGKILL those alive after ``grace`` s; their PIDs."""
        procs = self.orphans()
        for proc in procs:
            with contextlib.suppress(psutil.Error):
                proc.terminate()
        _gone, alive = psutil.wait_procs(procs, timeout=grace)
        for proc in alive:
            with contextlib.suppress(psutil.Error):
                proc.kill()
        psutil.wait_procs(alive, timeout=grace)
        return [proc.pid for proc in procs]
