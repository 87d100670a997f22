"""Run the whole embedded console: ASGI server (daphne), Celery worker, Celery beat and the
local-runtime supervisor, each as its own process group. Children that exit unexpectedly are
restarted; Ctrl+C / SIGTERM stops them all (by process group, never by name)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from django.conf import settings
from django.core.management import get_commands
from django.core.management.base import BaseCommand

STOP_TIMEOUT = 15.0


class Command(BaseCommand):
    help = "Start the ASGI server, Celery worker + beat and the local runtime supervisor together."

    def add_arguments(self, parser):  # noqa: D102
        parser.add_argument("--host", default=os.environ.get("RLARK_HOST", "127.0.0.1"))
        parser.add_argument("--port", type=int, default=int(os.environ.get("RLARK_PORT", "8000")))

    def handle(self, *args, host: str, port: int, **options):  # noqa: D102
        bin_dir = Path(sys.executable).parent
        manage = [sys.executable, str(Path(settings.BASE_DIR) / "manage.py")]
        specs: dict[str, list[str]] = {
            "web": [
                str(bin_dir / "daphne"),
                "-b",
                host,
                "-p",
                str(port),
                # no --proxy-headers: forwarded headers are believed only from RLARK_TRUSTED_PROXIES
                # (accounts/clientaddr.py), never rewritten into the peer address by daphne
                "rlark_console.asgi:application",
            ],
            "worker": [
                str(bin_dir / "celery"),
                "-A",
                "rlark_console",
                "worker",
                "--loglevel=INFO",
                "--pool=threads",
                "--concurrency=4",
                "--without-mingle",
                "--without-gossip",
            ],
            "beat": [
                str(bin_dir / "celery"),
                "-A",
                "rlark_console",
                "beat",
                "--loglevel=INFO",
                "-s",
                settings.CELERY_BEAT_SCHEDULE_FILENAME,
            ],
        }
        if "local_supervisor" in get_commands():
            specs["supervisor"] = [*manage, "local_supervisor"]
        children: dict[str, subprocess.Popen] = {}
        stopping = False

        def start(name: str) -> None:
            children[name] = subprocess.Popen(specs[name], start_new_session=True, cwd=settings.BASE_DIR)

        def stop_all(*_args) -> None:
            nonlocal stopping
            stopping = True

        signal.signal(signal.SIGINT, stop_all)
        signal.signal(signal.SIGTERM, stop_all)
        for name in specs:
            start(name)
        self.stdout.write(self.style.SUCCESS(f"RLark Console is running at http://{host}:{port}/  (Ctrl+C to stop)"))
        self.stdout.flush()
        restarts: dict[str, float] = {}
        while not stopping:
            time.sleep(0.5)
            for name, proc in list(children.items()):
                if proc.poll() is not None and not stopping:
                    if time.monotonic() - restarts.get(name, 0) < 2:
                        time.sleep(2)
                    self.stderr.write(f"{name} exited with code {proc.returncode}; restarting")
                    restarts[name] = time.monotonic()
                    start(name)
        self.stdout.write("Stopping RLark Console ...")
        for proc in children.values():
            _signal_group(proc, signal.SIGTERM)
        deadline = time.monotonic() + STOP_TIMEOUT
        for proc in children.values():
            try:
                proc.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                _signal_group(proc, signal.SIGKILL)
                proc.wait(timeout=5)


def _signal_group(proc: subprocess.Popen, sig: int) -> None:
    """Signal the child's own process group (it was started with start_new_session=True)."""
    try:
        os.killpg(proc.pid, sig)
    except ProcessLookupError:
        pass
