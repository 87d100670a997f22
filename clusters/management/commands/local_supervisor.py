"""Run the local-runtime supervisor (owner of every local Worker process) in the foreground.

Started by ``manage.py runconsole`` (``make run``) in a session of its own, and left running when
runconsole stops, so local Workers outlive a restart of the web server, Celery and beat.
``--stop`` stops the running supervisor of the state directory (and with it every Worker).
Stops every Worker on SIGTERM/SIGINT unless ``--keep-pods`` (or ``RLARK_LOCAL_KEEP_PODS=1``); a restarted
supervisor adopts Workers still alive.
The command replaces itself (same PID) with ``python -m clusters.runtime.local`` (the supervisor), which does
not load Django, so the long-running supervisor stays small (about 25 MB RSS).
"""

from __future__ import annotations

import fcntl
import os
import signal
import sys
import time
from pathlib import Path

from django.conf import settings
from django.core.management.base import BaseCommand


class Command(BaseCommand):
    help = "Run the local runtime supervisor (owns the Worker processes of local clusters)."

    def add_arguments(self, parser):  # noqa: D102
        parser.add_argument("--root", default=None, help="state directory (default: settings.RLARK_LOCAL_ROOT)")
        parser.add_argument("--keep-pods", action="store_true", help="leave Workers running on exit")
        parser.add_argument("--stop", action="store_true", help="stop the running supervisor and its Workers")

    def handle(self, *args, root: str | None, keep_pods: bool, stop: bool, **options):  # noqa: D102
        if stop:
            pid = stop_running(Path(root or settings.RLARK_LOCAL_ROOT))
            self.stdout.write(f"stopped the local supervisor (pid {pid})" if pid else "no local supervisor is running")
            return
        argv = [
            sys.executable,
            "-m",
            "clusters.runtime.local",
            "--root",
            str(root or settings.RLARK_LOCAL_ROOT),
        ]
        if keep_pods:
            argv.append("--keep-pods")
        sys.stdout.flush()
        sys.stderr.flush()
        os.chdir(settings.BASE_DIR)
        # Workers never see the console's state: var/, the database's directory, the local root.
        hide = [str(settings.VAR_DIR), str(settings.RLARK_LOCAL_ROOT)]
        db = settings.DATABASES["default"]
        if "sqlite" in db.get("ENGINE", "") and str(db.get("NAME", "")).startswith("/"):
            hide.append(os.path.dirname(str(db["NAME"])))
        env = {
            **os.environ,
            "PYTHONPATH": os.pathsep.join(p for p in [str(settings.BASE_DIR), os.environ.get("PYTHONPATH")] if p),
            "RLARK_LOCAL_HIDE": os.pathsep.join(hide),
        }
        os.execve(sys.executable, argv, env)


def running_pid(root: Path) -> int | None:
    """PID of the supervisor holding ``<root>/supervisor.lock``, or None when none is running."""
    lock = Path(root) / "supervisor.lock"
    if not lock.exists():
        return None
    with open(lock) as f:
        try:
            fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            try:
                return int((Path(root) / "supervisor.pid").read_text().strip())
            except (OSError, ValueError):
                return None
        fcntl.flock(f, fcntl.LOCK_UN)
    return None


def stop_running(root: Path, timeout: float = 60.0) -> int | None:
    """SIGTERM the running supervisor of ``root`` (it stops its Workers) and wait up to ``timeout`` s for
    its lock to be released; returns its PID, or None when none was running."""
    pid = running_pid(root)
    if pid is None:
        return None
    try:
        os.kill(pid, signal.SIGTERM)
    except ProcessLookupError:
        return None
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and running_pid(root) is not None:
        time.sleep(0.2)
    return pid
