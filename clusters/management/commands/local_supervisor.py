"""Run the local-runtime supervisor (owner of every local Worker process) in the foreground.

Started by ``manage.py runconsole`` (``make run``). Stops every Worker on SIGTERM/SIGINT unless
``--keep-pods`` (or ``RLARK_LOCAL_KEEP_PODS=1``); a restarted supervisor adopts Workers still alive.
"""

from __future__ import annotations

import logging
from pathlib import Path

from django.conf import settings
from django.core.management.base import BaseCommand


class Command(BaseCommand):
    help = "Run the local runtime supervisor (owns the Worker processes of local clusters)."

    def add_arguments(self, parser):  # noqa: D102
        parser.add_argument("--root", default=None, help="state directory (default: settings.RLARK_LOCAL_ROOT)")
        parser.add_argument("--keep-pods", action="store_true", default=None, help="leave Workers running on exit")

    def handle(self, *args, root: str | None, keep_pods: bool | None, **options):  # noqa: D102
        from clusters.runtime.local.supervisor import serve

        logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
        serve(Path(root or settings.RLARK_LOCAL_ROOT), keep_pods=keep_pods)
