"""The console's domain relay (docs/network-domains.md): SSH layer 3 tunnels of domain members, forwarded by address.

An asyncssh server (the library that already serves the console's SSH bastion, ``sshgate``; same host key). A member
authenticates with an OpenSSH **user certificate** signed by the console's domain CA (:mod:`domains.certs`) whose
only principal is ``rlark-domain:<domain>:<ip>``; ``member_ok(domain, ip)`` then checks that the address is still
allocated (the certificate is short-lived; a released address loses the relay at once). The member opens one TUN
channel (``tun@openssh.com``, like ``ssh -w``); every IPv4 packet it sends is written, unchanged, to the channel of
the member that holds the packet's destination address **in the same domain**. The relay keeps no TCP state and
parses only the 20-byte IPv4 header: it drops packets that are not IPv4, whose source is not the sender's own
address (no spoofing), whose destination is no member of the sender's domain (so d1 never reaches d2), or whose
receiver is more than :data:`MAX_QUEUED` bytes behind (IP may drop; TCP in the Workers retransmits).

Listens on ``127.0.0.1`` and on :data:`clusters.runtime.local.netns.CONSOLE_ADDRESS` (the address every isolated
cluster reaches the console at; bound with ``IP_FREEBIND`` so the relay can start before the first cluster network
exists). Counters in :attr:`Relay.stats` (packets/bytes forwarded, dropped by reason) feed the bench and the back
office; :meth:`Relay.members` lists connected members.
"""

from __future__ import annotations

import inspect
import logging
import socket
import time
from collections import Counter
from collections.abc import Awaitable, Callable
from typing import Any

import asyncssh

from domains.certs import parse_principal
from rlark_console.sshserver import KeysOnlyServer

log = logging.getLogger("rlark.domain_relay")
MAX_QUEUED = 4 << 20  # bytes waiting on one receiver's channel before its packets are dropped
IP_FREEBIND = 15


class Relay:
    """Routing table ``{domain: {ip: channel}}`` and counters; one per relay server."""

    def __init__(self, ca_key: asyncssh.SSHKey, member_ok: Callable[[str, str], bool | Awaitable[bool]]) -> None:
        self.ca_public = ca_key.export_public_key()
        self.member_ok = member_ok
        self.routes: dict[str, dict[str, Any]] = {}
        self.connected_at: dict[tuple[str, str], float] = {}
        self.stats: Counter[str] = Counter()
        self.connections: set[asyncssh.SSHServerConnection] = set()

    def close(self) -> None:
        """Close every member connection (the relay stops; agents reconnect to the next one)."""
        for conn in list(self.connections):
            conn.close()

    def members(self) -> list[dict[str, Any]]:
        return [
            {"domain": d, "ip": ip, "connected_at": self.connected_at.get((d, ip))}
            for d, table in sorted(self.routes.items())
            for ip in sorted(table)
        ]

    def forward(self, domain: str, source: str, packet: bytes) -> None:
        if len(packet) < 20 or packet[0] >> 4 != 4:
            self.stats["dropped_not_ipv4"] += 1
            return
        if socket.inet_ntoa(packet[12:16]) != source:
            self.stats["dropped_spoofed"] += 1
            return
        target = self.routes.get(domain, {}).get(socket.inet_ntoa(packet[16:20]))
        if target is None:
            self.stats["dropped_no_route"] += 1
            return
        if target.get_write_buffer_size() > MAX_QUEUED:
            self.stats["dropped_queue"] += 1
            return
        target.write(packet)
        self.stats["packets"] += 1
        self.stats["bytes"] += len(packet)


class _MemberTunnel(asyncssh.SSHTunTapSession):
    def __init__(self, relay: Relay, domain: str, ip: str) -> None:
        self.relay, self.domain, self.ip = relay, domain, ip
        self.chan = None

    def connection_made(self, chan) -> None:
        self.chan = chan
        old = self.relay.routes.setdefault(self.domain, {}).get(self.ip)
        if old is not None:  # a reconnected member replaces its stale channel
            old.close()
        self.relay.routes[self.domain][self.ip] = chan
        self.relay.connected_at[(self.domain, self.ip)] = time.time()
        log.info("member %s of domain %s connected", self.ip, self.domain)

    def data_received(self, data: bytes, datatype) -> None:
        self.relay.forward(self.domain, self.ip, data)

    def connection_lost(self, exc) -> None:
        table = self.relay.routes.get(self.domain, {})
        if table.get(self.ip) is self.chan:
            del table[self.ip]
            self.relay.connected_at.pop((self.domain, self.ip), None)
            log.info("member %s of domain %s disconnected", self.ip, self.domain)


class _RelayServer(KeysOnlyServer):
    """Public-key authentication as the bastion's (``sshgate.server``), but certificates of the domain CA only."""

    def __init__(self, relay: Relay) -> None:
        self.relay = relay
        self.member: tuple[str, str] | None = None

    def connection_made(self, conn) -> None:
        self.conn = conn
        self.relay.connections.add(conn)

    def connection_lost(self, exc) -> None:
        self.relay.connections.discard(self.conn)

    def validate_public_key(self, username: str, key: asyncssh.SSHKey) -> bool:
        return False  # certificates only

    async def validate_ca_key(self, username: str, key: asyncssh.SSHKey) -> bool:
        member = parse_principal(username)
        if member is None or key.export_public_key() != self.relay.ca_public:
            return False
        ok = self.relay.member_ok(*member)
        if inspect.isawaitable(ok):
            ok = await ok
        if ok:
            self.member = member
        return bool(ok)

    def session_requested(self) -> bool:
        return False

    def connection_requested(self, *args) -> bool:
        return False

    def server_requested(self, *args) -> bool:
        return False

    def tun_requested(self, unit):
        if self.member is None:
            return False
        return _MemberTunnel(self.relay, *self.member)


def _socket(host: str, port: int) -> socket.socket:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.setsockopt(socket.SOL_IP, IP_FREEBIND, 1)
    sock.bind((host, port))
    sock.setblocking(False)
    return sock


async def serve(
    relay: Relay, host_key: asyncssh.SSHKey, port: int, hosts: tuple[str, ...] = ("127.0.0.1",)
) -> list[asyncssh.SSHAcceptor]:
    """Start listening on each of ``hosts`` at ``port`` (0: pick one, then the same for the others)."""
    acceptors = []
    for host in hosts:
        sock = _socket(host, port)
        port = sock.getsockname()[1]
        acceptors.append(
            await asyncssh.listen(
                sock=sock,
                server_factory=lambda: _RelayServer(relay),
                server_host_keys=[host_key],
                allow_pty=False,
                agent_forwarding=False,
                x11_forwarding=False,
                keepalive_interval=10,
                keepalive_count_max=3,
            )
        )
    return acceptors
