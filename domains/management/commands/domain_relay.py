"""``manage.py domain_relay``: the console's network-domain relay (``domains.relay``).

Listens on 127.0.0.1, on the console address of the isolated clusters (``100.127.255.1``) and on the addresses
of ``RLARK_DOMAIN_RELAY_LISTEN`` (where Kubernetes Pods reach the console) at ``RLARK_DOMAIN_RELAY_PORT``
(default 2223). A member is accepted while its address is allocated (``IPAllocation``);
``--publish`` (default every 5 s) also pushes the members to the isolated clusters' supervisors
(``domains.dataplane.publish``), so agents start without waiting for the next status sync.
"""

from __future__ import annotations

import asyncio
import logging
import signal

from django.core.management.base import BaseCommand

from domains import certs, dataplane, relay
from rlark_console.db_threads import in_thread


async def _member_ok(domain: str, ip: str) -> bool:
    """Whether ``ip`` is allocated in ``domain``. On a worker thread that gives its connection back afterwards
    (``in_thread``): a connection kept by the thread failed every later call once PostgreSQL had restarted."""
    return await in_thread(dataplane.member_allocated, domain, ip)


class Command(BaseCommand):
    help = "Run the network-domain relay (SSH TUN channels of domain members, forwarded by destination address)."

    def add_arguments(self, parser):  # noqa: D102
        parser.add_argument("--port", type=int, default=dataplane.relay_port())
        parser.add_argument("--publish", type=float, default=5.0, help="seconds between pushes of the members")

    def handle(self, *args, port: int, publish: float, **options):  # noqa: D102
        logging.basicConfig(level=logging.INFO, format="%(asctime)s domain-relay %(levelname)s %(message)s")
        asyncio.run(self._serve(port, publish))

    async def _serve(self, port: int, publish: float) -> None:
        r = relay.Relay(certs.ca_key(), _member_ok)
        hosts = dataplane.relay_listen_hosts()
        acceptors = await relay.serve(r, certs.relay_host_key(), port, hosts)
        self.stdout.write(f"domain relay on {', '.join(hosts)}, port {acceptors[0].get_port()}")
        self.stdout.flush()
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, stop.set)
        while not stop.is_set():
            try:
                # each push's connection is closed after it: one broken by a PostgreSQL restart fails at most the
                # push under way (a thread's kept connection failed every push on that thread)
                await in_thread(dataplane.publish)
            except Exception:  # noqa: BLE001 - the relay keeps relaying; the next push retries
                logging.getLogger("rlark.domains").exception("publishing domain members failed")
            try:
                await asyncio.wait_for(stop.wait(), publish)
            except TimeoutError:
                pass
        for a in acceptors:
            a.close()
