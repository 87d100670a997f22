"""``manage.py serve_web``: the web tier alone (rlark_console/webserver.py): ``--workers`` daphne processes on one
socket, 2 per core by default (``RLARK_WEB_WORKERS``). ``runconsole`` and docker-compose's ``web`` run it.
The workers die with it; ``<VAR_DIR>/web-<port>.json`` names them, so the next ``serve_web`` on the port can stop
the workers a killed one left behind."""

from __future__ import annotations

from pathlib import Path

from django.conf import settings
from django.core.management.base import BaseCommand

import rlark_config
from rlark_console.webserver import WebTier, default_workers


class Command(BaseCommand):
    help = "Serve HTTP and websockets with several daphne worker processes on one port (sized by cores)."

    def add_arguments(self, parser):  # noqa: D102
        parser.add_argument("--host", default=rlark_config.current().host)
        parser.add_argument("--port", type=int, default=rlark_config.current().port)
        parser.add_argument("--workers", type=int, default=None, help="default: RLARK_WEB_WORKERS or 2 per core")

    def handle(self, *args, host: str, port: int, workers: int | None, **options):  # noqa: D102
        count = workers if workers and workers > 0 else default_workers()
        record = Path(settings.VAR_DIR) / f"web-{port}.json"
        tier = WebTier(host, port, count, cwd=settings.BASE_DIR, log=lambda m: self.stdout.write(m), record=record)
        self.stdout.flush()
        tier.run()
