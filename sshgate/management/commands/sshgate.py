"""``manage.py sshgate``: the SSH bastion. Started by ``runconsole`` (``make run``) and as its own
``docker-compose.yml`` service. SIGINT/SIGTERM close every session with a message, then exit."""

from __future__ import annotations

import asyncio
import logging
import os
import signal

from django.core.management.base import BaseCommand

from sshgate import hostkeys
from sshgate.server import Gate


class Command(BaseCommand):
    help = "Run the SSH bastion (ssh -J <user>@<host>:<port> <worker>)."

    def add_arguments(self, parser):  # noqa: D102
        parser.add_argument("--host", default=os.environ.get("RLARK_SSH_HOST", "127.0.0.1"))
        parser.add_argument("--port", type=int, default=int(os.environ.get("RLARK_SSH_PORT", "2222")))

    def handle(self, *args, host: str, port: int, **options):  # noqa: D102
        logging.basicConfig(level=logging.INFO, format="%(asctime)s sshgate %(levelname)s %(message)s")
        if os.environ.get("RLARK_SSH_DEBUG"):
            import asyncssh

            asyncssh.set_debug_level(2)
            logging.getLogger("asyncssh").setLevel(logging.DEBUG)
        asyncio.run(self._serve(host, port))

    async def _serve(self, host: str, port: int) -> None:
        gate = Gate(host, port)
        await gate.start()
        self.stdout.write(f"SSH bastion on {host}:{gate.port} (host key {hostkeys.bastion_fingerprint()})")
        self.stdout.flush()
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, stop.set)
        await stop.wait()
        self.stdout.write("SSH bastion stopping: closing sessions")
        await gate.stop()
