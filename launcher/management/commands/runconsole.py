"""Run the whole embedded console: ASGI web tier (``serve_web``: daphne workers sized by cores), Celery
worker, Celery beat and the local-runtime supervisor, each as its own process group. Children that exit unexpectedly are
restarted; Ctrl+C / SIGTERM stops the web server, Celery worker and beat (by process group, never by
name).

Nothing is left behind by a kill: every child but the local supervisor gets SIGTERM when runconsole dies
(``rlark_console.lifecycle.die_with_parent``, also of SIGKILL), and a child that exits has what remains of its
process group (e.g. the web tier's daphne workers) killed before it is started again, so the new one finds its
port free.

The local supervisor is started in a session of its own (log: ``<local root>/supervisor.log``) and is
left running when runconsole stops, so local Workers keep running across a restart of the rest; a runconsole
that finds one running reuses it, and starts a new one whenever none is running.
``manage.py local_supervisor --stop`` stops it and its Workers."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from django.conf import settings
from django.core.management import get_commands
from django.core.management.base import BaseCommand

import rlark_config
from clusters.management.commands.local_supervisor import running_pid
from rlark_console.lifecycle import die_with_parent, reap_with_group

STOP_TIMEOUT = 15.0


def child_commands(host: str, port: int) -> dict[str, list[str]]:
    """The command line of each process runconsole keeps running, by name: ``web`` (``serve_web`` on
    ``host:port``), Celery ``worker`` and ``beat``, and, where their management commands exist, the ``watcher``
    (watch-driven status of Kubernetes jobs), ``ssh`` (the SSH bastion) and ``relay`` (the network-domain relay)."""
    bin_dir = Path(sys.executable).parent
    manage = _manage()
    specs: dict[str, list[str]] = {
        # several daphne processes on one socket, 2 per core (RLARK_WEB_WORKERS): rlark_console/webserver.py
        "web": [*manage, "serve_web", "--host", host, "--port", str(port)],
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
    if "watch_clusters" in get_commands():
        specs["watcher"] = [*manage, "watch_clusters"]  # watch-driven status of Kubernetes jobs
    if "sshgate" in get_commands():
        specs["ssh"] = [*manage, "sshgate"]  # the SSH bastion, RLARK_SSH_HOST:RLARK_SSH_PORT
    if "domain_relay" in get_commands():
        specs["relay"] = [*manage, "domain_relay"]  # network-domain relay, RLARK_DOMAIN_RELAY_PORT
    return specs


def _manage() -> list[str]:
    """``python manage.py`` of this console."""
    return [sys.executable, str(Path(settings.BASE_DIR) / "manage.py")]


class _LocalSupervisor:
    """Keeps a local supervisor running: ours, or one left by an earlier runconsole (never stopped here).
    ``command``: ``manage.py local_supervisor``, None when this console has no local runtime; ``say`` and
    ``warn`` write a line to stdout and stderr."""

    def __init__(self, command: list[str] | None, say: Callable[[str], Any], warn: Callable[[str], Any]) -> None:
        self.command = command
        self.say = say
        self.warn = warn
        self.proc: subprocess.Popen | _Foreign | None = None

    def ensure(self) -> None:
        """Start the local supervisor unless one is running (ours, or one left by an earlier runconsole)."""
        if self.command is None or (self.proc is not None and self.proc.poll() is None):
            return
        root = Path(settings.RLARK_LOCAL_ROOT)
        pid = running_pid(root)
        if pid is not None:
            if self.proc is None:
                self.say(f"local supervisor already running (pid {pid}); its Workers keep running")
                self.proc = _Foreign(pid)
            return
        if self.proc is not None:
            self.warn("local supervisor exited; restarting")
        root.mkdir(parents=True, exist_ok=True, mode=0o700)
        fd = os.open(root / "supervisor.log", os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        try:
            self.proc = subprocess.Popen(
                self.command,
                start_new_session=True,
                cwd=settings.BASE_DIR,
                stdin=subprocess.DEVNULL,
                stdout=fd,
                stderr=subprocess.STDOUT,
            )
        finally:
            os.close(fd)


class Command(BaseCommand):
    help = "Start the ASGI server, Celery worker + beat and the local runtime supervisor together."

    def add_arguments(self, parser):  # noqa: D102
        parser.add_argument("--host", default=rlark_config.current().host)
        parser.add_argument("--port", type=int, default=rlark_config.current().port)

    def handle(self, *args, host: str, port: int, **options):  # noqa: D102
        self.specs = child_commands(host, port)
        command = [*_manage(), "local_supervisor"] if "local_supervisor" in get_commands() else None
        supervisor = _LocalSupervisor(command, self.stdout.write, self.stderr.write)
        self.children: dict[str, subprocess.Popen] = {}
        self.stopping = False
        signal.signal(signal.SIGINT, self._stop_all)
        signal.signal(signal.SIGTERM, self._stop_all)
        supervisor.ensure()
        for name in self.specs:
            self._start(name)
        self.stdout.write(self.style.SUCCESS(f"RLark Console is running at http://{host}:{port}/  (Ctrl+C to stop)"))
        self.stdout.flush()
        self._keep_running(supervisor)
        self.stdout.write("Stopping RLark Console (the local supervisor and its Workers keep running) ...")
        _stop_children(list(self.children.values()))

    def _stop_all(self, *_args) -> None:
        self.stopping = True

    def _start(self, name: str) -> None:
        self.children[name] = subprocess.Popen(
            self.specs[name], start_new_session=True, cwd=settings.BASE_DIR, preexec_fn=die_with_parent()
        )

    def _keep_running(self, supervisor: _LocalSupervisor) -> None:
        """Until SIGINT/SIGTERM: restart the local supervisor when none runs, and each child that exits (at most
        one restart of a child every 2 s)."""
        restarts: dict[str, float] = {}
        while not self.stopping:
            time.sleep(0.5)
            supervisor.ensure()
            for name, proc in list(self.children.items()):
                # an exited child's leftovers (e.g. the web tier's daphne workers) are killed with its group
                if reap_with_group(proc) is not None and not self.stopping:
                    if time.monotonic() - restarts.get(name, 0) < 2:
                        time.sleep(2)
                    self.stderr.write(f"{name} exited with code {proc.returncode}; restarting")
                    restarts[name] = time.monotonic()
                    self._start(name)


def _stop_children(children: list[subprocess.Popen]) -> None:
    """SIGTERM to each child's process group; a group still there after :data:`STOP_TIMEOUT` s gets SIGKILL."""
    for proc in children:
        _signal_group(proc, signal.SIGTERM)
    deadline = time.monotonic() + STOP_TIMEOUT
    for proc in children:
        try:
            proc.wait(timeout=max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            _signal_group(proc, signal.SIGKILL)
            proc.wait(timeout=5)


class _Foreign:
    """A supervisor started by an earlier runconsole (not our child): alive while its PID exists."""

    def __init__(self, pid: int) -> None:
        self.pid = pid

    def poll(self) -> int | None:
        try:
            os.kill(self.pid, 0)
        except ProcessLookupError:
            return 0
        return None


def _signal_group(proc: subprocess.Popen, sig: int) -> None:
    """Signal the child's own process group (it was started with start_new_session=True)."""
    try:
        os.killpg(proc.pid, sig)
    except ProcessLookupError:
        pass
