"""The Worker processes of one supervisor: which ones it started, whether they still run, how they stop.

Stop = SIGTERM to the Worker's own process group, the stop grace (``RLARK_LOCAL_STOP_GRACE`` s, default 5), then
SIGKILL of the group and of its PID namespace (:func:`launcher.kill_group`); never by name. A Worker adopted
from a previous supervisor (same PID and process start time, :func:`still_running`) has no ``Popen``: its exit is
seen as a zombie or a vanished PID, without an exit status.
"""

from __future__ import annotations

import os
import subprocess
import threading
from collections.abc import Callable
from typing import Any

from clusters.runtime.local import launcher


def still_running(pod: dict[str, Any]) -> bool:
    """Whether the Pod's recorded process (``pid``, ``pid_create_time``) is the same process and still runs (a
    PID taken over by another process does not count)."""
    import psutil

    try:
        proc = psutil.Process(pod["pid"])
        return abs(proc.create_time() - pod.get("pid_create_time", 0)) < 0.05 and proc.status() != "zombie"
    except psutil.Error:
        return False


def create_time(pid: int) -> float:
    """The process start time of ``pid`` (seconds since the epoch, as psutil reads it)."""
    import psutil

    return psutil.Process(pid).create_time()


def ns_pid(pid: int | None, id_mapped: bool) -> int | None:
    """PID (host view) of PID 1 of the Worker's namespaces (the forked child of unshare) whose process is ``pid``;
    None when there is none (yet). ``id_mapped``: the Worker runs in an id-mapped user namespace (a root
    supervisor), ready only once it has entered it."""
    import psutil

    if not pid:
        return None
    try:
        children = psutil.Process(pid).children()
    except psutil.Error:
        return None
    if not children:
        return None
    if id_mapped:
        # podinit.sh enters the id-mapped user namespace by exec'ing `unshare --user` as this same PID: until it
        # has, `nsenter --user` into it fails ("reassociate to namespace 'ns/user' failed"), so it is not ready.
        try:
            if os.readlink(f"/proc/{children[0].pid}/ns/user") == os.readlink("/proc/self/ns/user"):
                return None
        except OSError:
            return None
    return children[0].pid


def reap_vanished(pid: int) -> None:
    """A Worker's process ``pid`` was found gone: reap what may remain of its process group. A PID that now
    belongs to another process means the group is gone: signal nothing."""
    import psutil

    if not psutil.pid_exists(pid):
        launcher.kill_group(pid, grace=0.5)


def exit_reason(code: int | None) -> str:
    """The container's terminated reason: ``Completed`` (0), ``Error`` (another code), ``Unknown`` (None)."""
    return "Completed" if code == 0 else ("Error" if code else "Unknown")


class Processes:
    """``procs``: pod key -> ``Popen`` of the Workers this supervisor started (its children only); ``killing``:
    the pod keys being terminated; ``stop_grace``: seconds between SIGTERM and SIGKILL."""

    def __init__(self, stop_grace: float) -> None:
        self.stop_grace = stop_grace
        self.procs: dict[str, subprocess.Popen] = {}
        self.killing: set[str] = set()

    def exited(self, pkey: str, pid: int) -> tuple[bool, int | None]:
        """``(exited, exit code)`` of the Worker ``pkey`` (process ``pid``). The code is ``128 + signal`` for a
        signal, None for an adopted Worker (no exit status available)."""
        import psutil

        proc = self.procs.get(pkey)
        if proc is not None:
            code = proc.poll()
            if code is None:
                return False, None
            return True, 128 - code if code < 0 else code
        try:  # adopted from a previous supervisor: no exit status available
            if psutil.Process(pid).status() != psutil.STATUS_ZOMBIE:
                return False, None
        except psutil.Error:
            pass
        return True, None

    def started(self, pkey: str, proc: subprocess.Popen) -> None:
        """This supervisor started the Worker ``pkey`` as ``proc``."""
        self.procs[pkey] = proc

    def reap(self, pkey: str, pid: int) -> None:
        """The Worker ``pkey`` exited: reap leftovers of its PID namespace (the forked child may outlive unshare on
        SIGKILL) and forget its ``Popen``."""
        launcher.kill_group(pid, grace=0.5)
        self.procs.pop(pkey, None)

    def stop_in_background(self, pkey: str, pid: int, then: Callable[[str], None]) -> None:
        """Stop the Worker ``pkey`` in a thread (stop grace, then SIGKILL), then call ``then(pkey)`` (also when
        stopping failed). The key is in :attr:`killing` meanwhile; ``then`` calls :meth:`stopped`."""
        self.killing.add(pkey)
        proc = self.procs.get(pkey)

        def stop() -> None:
            try:
                launcher.kill_group(pid, grace=self.stop_grace, wait_pid=proc)
            finally:
                then(pkey)

        threading.Thread(target=stop, daemon=True).start()

    def stopped(self, pkey: str) -> None:
        """The Worker ``pkey`` is stopped: no longer being terminated, its ``Popen`` forgotten."""
        self.killing.discard(pkey)
        self.procs.pop(pkey, None)

    def stop_all(self, workers: list[tuple[int, subprocess.Popen | None]]) -> None:
        """Stop every Worker of ``workers`` (``(pid, Popen or None)``) in parallel; returns when all are stopped."""
        threads = [
            threading.Thread(target=launcher.kill_group, args=(pid, self.stop_grace, proc)) for pid, proc in workers
        ]
        for th in threads:
            th.start()
        for th in threads:
            th.join()
