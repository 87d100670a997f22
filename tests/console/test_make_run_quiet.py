"""``make run`` starts without warnings: no Celery "superuser privileges" SecurityWarning for a
JSON-only worker, no runpy RuntimeWarning when the local supervisor starts (``python -m clusters.runtime.local``)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _run(*args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "rlark_console.settings", "PYTHONWARNINGS": "default"}
    return subprocess.run([sys.executable, *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)


def test_celery_worker_privilege_check_is_quiet_for_a_json_only_worker():
    code = (
        "import os, warnings\n"
        "from rlark_console.celery import app\n"
        "from celery.platforms import check_privileges\n"
        "assert 'pickle' not in app.conf.accept_content\n"
        "os.getuid = os.geteuid = lambda: 0  # as make run does in the dev container\n"
        "with warnings.catch_warnings(record=True) as seen:\n"
        "    check_privileges(app.conf.accept_content)\n"
        "print('warnings:', [str(w.message)[:60] for w in seen])\n"
    )
    done = _run("-c", code)
    assert done.returncode == 0, done.stderr
    assert "warnings: []" in done.stdout and "superuser" not in done.stderr


def test_supervisor_entry_point_has_no_runpy_warning():
    done = _run("-W", "error::RuntimeWarning", "-m", "clusters.runtime.local", "--help")
    assert done.returncode == 0, done.stderr
    assert "found in sys.modules" not in done.stderr and "--root" in done.stdout
    command = (ROOT / "clusters/management/commands/local_supervisor.py").read_text()
    assert '"clusters.runtime.local",' in command
