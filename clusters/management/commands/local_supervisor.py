"""Run the local-runtime supervisor (owner of every local Worker process) in the foreground.

Started by ``manage.py runconsole`` (``make run``). Stops every Worker on SIGTERM/SIGINT unless
``--keep-pods`` (or ``RLARK_LOCAL_KEEP_PODS=1``); a restarted supervisor adopts Workers still alive.
The command replaces itself (same PID) with ``python -m clusters.runtime.local.supervisor``, which does
not load Django, so the long-running supervisor stays small (about 25 MB RSS).
"""

from __future__ import annotations

import os
import sys

from django.conf import settings
from django.core.management.base import BaseCommand


class Command(BaseCommand):
    help = "Run the local runtime supervisor (owns the Worker processes of local clusters)."

    def add_arguments(self, parser):  # noqa: D102
        parser.add_argument("--root", default=None, help="state directory (default: settings.RLARK_LOCAL_ROOT)")
        parser.add_argument("--keep-pods", action="store_true", help="leave Workers running on exit")

    def handle(self, *args, root: str | None, keep_pods: bool, **options):  # noqa: D102
        argv = [
            sys.executable,
            "-m",
            "clusters.runtime.local.supervisor",
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
