"""Short mode shared by every ``bench/`` script: ``--quick`` or ``RLARK_BENCH_QUICK=1``.

A quick run exercises the same code paths as the full one on a small fleet, so CI (tests/console/test_bench_quick.py)
runs every script and a script cannot rot; its figures are not the README's.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def quick_requested(argv: list[str] | None = None) -> bool:
    """True when ``--quick`` is in ``argv`` (default ``sys.argv``) or ``RLARK_BENCH_QUICK=1`` is set."""
    argv = sys.argv if argv is None else argv
    return "--quick" in argv or os.environ.get("RLARK_BENCH_QUICK", "") == "1"


def quick_defaults(parser, **small) -> None:
    """Add ``--quick`` to an argparse ``parser`` and, in quick mode, make ``small`` its defaults (flags given on
    the command line still win)."""
    parser.add_argument("--quick", action="store_true", help="short run on a small fleet (also RLARK_BENCH_QUICK=1)")
    if quick_requested():
        parser.set_defaults(**small)


def wait_for(check, timeout: float, what: str, interval: float = 0.5):
    """Poll ``check`` every ``interval`` s until it returns something truthy (returned); ``TimeoutError`` naming
    ``what`` and the last value after ``timeout`` s. Shared by the bench scripts."""
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        last = check()
        if last:
            return last
        time.sleep(interval)
    raise TimeoutError(f"timed out after {timeout:.0f} s waiting for {what} (last: {last!r})")


def start_local_console(tmp: Path) -> subprocess.Popen:
    """A private console state under ``tmp`` (SQLite, ``var/``, a local runtime root, Celery eager), migrated and
    seeded (admin ``bench-admin-1``, the demo local cluster), Django set up in this process, and the local
    supervisor started: its process, already listening (``RuntimeError`` when it did not start within 60 s)."""
    os.environ.update(
        RLARK_VAR_DIR=str(tmp / "var"),
        RLARK_LOCAL_ROOT=str(tmp / "local"),
        CELERY_TASK_ALWAYS_EAGER="1",
        DJANGO_SETTINGS_MODULE="rlark_console.settings",
    )
    os.environ.pop("DATABASE_URL", None)
    import django

    django.setup()
    from django.core.management import call_command

    from clusters.runtime.local.supervisor import socket_path

    call_command("migrate", verbosity=0)
    call_command("seed_demo", password="bench-admin-1", stdout=open(os.devnull, "w"))  # noqa: SIM115
    sup = subprocess.Popen(
        [sys.executable, str(ROOT / "manage.py"), "local_supervisor"],
        cwd=ROOT,
        env=os.environ.copy(),
        start_new_session=True,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 60
    while not socket_path(tmp / "local").exists():
        if time.monotonic() > deadline or sup.poll() is not None:
            sup.kill()
            raise RuntimeError("the local supervisor did not start")
        time.sleep(0.1)
    return sup


def pct(values: list[float], p: float) -> float:
    """The ``p``-th percentile of ``values`` (the nearest index of the sorted list). Shared by the bench scripts."""
    values = sorted(values)
    return values[min(len(values) - 1, round(p / 100 * (len(values) - 1)))]


def in_test_db(run, args) -> None:
    """Call ``run(args)`` inside a fresh Django test database (created, then destroyed even on failure), with
    warnings and below not logged. Shared by the bench scripts that seed a fleet."""
    import logging

    from django.db import connection
    from django.test.utils import setup_test_environment

    logging.disable(logging.WARNING)
    setup_test_environment()
    old_name = connection.creation.create_test_db(verbosity=0, keepdb=False)
    try:
        run(args)
    finally:
        connection.creation.destroy_test_db(old_name, verbosity=0)
