"""The network agent of one domain member (docs/network-domains.md): ``python -m domains.netagent <config.json>``.

Runs inside the member Worker's network namespace, as root there (the local runtime's supervisor starts it with
``nsenter --net``; on Kubernetes it is the native sidecar with ``NET_ADMIN`` only). No Django: only asyncssh.

1. Creates the persistent TUN device ``tun0`` (``ip tuntap``, no packet info), gives it ``<ip>/<prefix>`` (the
   kernel adds the route to the whole domain CIDR through it) and brings it up. Persistent, so the address and the
   Worker's TCP connections outlive a reconnection of the tunnel.
2. Connects to the console's domain relay over SSH (``relay_host:relay_port``; the relay's host key is pinned
   from ``host_key``), authenticated by the member's SSH user certificate signed by the console for this domain
   and this address (principal = ``username``), and opens an OpenSSH-compatible layer 3 tunnel channel
   (``ssh -w``: asyncssh ``forward_tun``) attached to ``tun0``. IP packets then go both ways unchanged.
3. Reconnects by itself when the connection drops (console or relay restarted): back-off 1 s doubling to 30 s,
   as upstream's agent (upstream-rlark 12.4); each connection runs in a fresh child process (:func:`supervise`).

``status`` (a JSON file) tells the supervisor and the back office: ``{"state": "connecting"|"connected",
"tun": "<ip once tun0 is up>", "since": <unix time>, "error": "<last error>", "connects": <count>}``.

Config keys: ``ip``, ``prefix``, ``relay_host``, ``relay_port``, ``host_key``, ``username``, ``key``, ``cert``,
``status`` (paths are files on the agent's side), optional ``device`` (default ``tun0``), ``mtu``, and ``hosts_file``
with ``hosts`` (``{pod: ip}``: the agent keeps that file's ``# BEGIN rlark sidecar`` block, as on Kubernetes).
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import asyncssh

log = logging.getLogger("rlark.netagent")
BACKOFF_START = 1.0
BACKOFF_MAX = 30.0
KEEPALIVE = 10  # seconds between SSH keepalives; 3 missed ones drop the connection and start a reconnect
HOSTS_EVERY = 2.0  # seconds between checks of the managed hosts block (see Agent.keep_hosts)


def _ip(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(["ip", *args], capture_output=True, text=True, timeout=30)


MTU = 16000  # < asyncssh's default max SSH packet (32 KiB) with the 4-byte address family; fewer, larger packets


def ensure_tun(device: str, ip: str, prefix: int, mtu: int = MTU) -> None:
    """``device`` exists, persistent, with ``ip/prefix`` and ``mtu``, up (idempotent). Raises RuntimeError."""
    if _ip("link", "show", device).returncode != 0:
        out = _ip("tuntap", "add", "dev", device, "mode", "tun")
        if out.returncode != 0:
            raise RuntimeError(f"ip tuntap add {device}: {out.stderr.strip()}")
    if f" {ip}/" not in _ip("-o", "addr", "show", "dev", device).stdout:
        out = _ip("addr", "add", f"{ip}/{int(prefix)}", "dev", device)
        if out.returncode != 0:
            raise RuntimeError(f"ip addr add {ip}/{prefix}: {out.stderr.strip()}")
    out = _ip("link", "set", device, "mtu", str(int(mtu)), "up")
    if out.returncode != 0:
        raise RuntimeError(f"ip link set {device} up: {out.stderr.strip()}")


BEGIN = "# BEGIN rlark sidecar"
END = "# END rlark sidecar"


def hosts_block(hosts: dict[str, str]) -> str:
    """The managed block: ``ip<TAB><pod>.rlark-domain`` sorted by host name (upstream-rlark 12.1)."""
    lines = [f"{ip}\t{name}.rlark-domain" for name, ip in sorted(hosts.items())]
    return "\n".join([BEGIN, *lines, END]) + "\n"


def _without_managed_lines(text: str) -> tuple[str, str]:
    """Split ``text`` around the managed block(s) and drop them: returns ``(head, tail)``, the lines before the
    first ``BEGIN`` and every other line after it.

    A complete block (``BEGIN`` ... ``END``) goes whole. A half-written one (``BEGIN`` and no ``END``: the agent
    was killed mid-write, or a disk filled) goes up to the first line that is not a managed entry
    (``ip<TAB><name>.rlark-domain``), or to the end with a last line cut mid-write, so its stale entries never
    stay and the lines after it (the kubelet's) are kept. A stray ``END`` and further blocks (left by an older
    agent) go too, so a file holds one block.
    """
    head: list[str] = []
    tail: list[str] = []
    seen = False
    inside = False
    lines = text.splitlines()
    torn = len(lines) - 1 if text and not text.endswith("\n") else -1  # a last line cut mid-write
    for number, line in enumerate(lines):
        marker = line.strip()
        if marker == BEGIN:
            seen, inside = True, True
            continue
        if marker == END:
            inside = False
            continue
        if inside:
            if _is_managed_entry(marker) or number == torn:
                continue
            inside = False  # an unterminated block ends at the first line that is not one of its entries
        (tail if seen else head).append(line)
    return "".join(f"{line}\n" for line in head), "".join(f"{line}\n" for line in tail)


def _is_managed_entry(line: str) -> bool:
    """``True`` for a line of the managed block's form (``ip<whitespace><name>.rlark-domain``), or an empty one."""
    parts = line.split()
    return not parts or (len(parts) == 2 and parts[1].endswith(".rlark-domain"))


def write_hosts_block(path: str, hosts: dict[str, str]) -> None:
    """Replace the managed block of ``path`` (append it when missing), in place: on Kubernetes ``/etc/hosts`` is the
    kubelet's file, shared by every container of the Pod, so the other lines stay and no rename may replace it.
    A half-written block (a ``BEGIN`` without its ``END``) is replaced like a whole one (``_without_managed_lines``).
    """
    with open(path, "r+") as f:
        text = f.read()
        head, tail = _without_managed_lines(text)
        new = head + hosts_block(hosts) + tail
        if new != text:
            f.seek(0)
            f.truncate()
            f.write(new)


class Agent:
    def __init__(self, config: dict[str, Any], config_path: str | None = None) -> None:
        self.config = config
        self.config_path = config_path
        self.device = str(config.get("device") or "tun0")
        self.state: dict[str, Any] = {"state": "connecting", "tun": "", "since": time.time(), "connects": 0}
        self.stopping = asyncio.Event()

    def _status(self, **changes: Any) -> None:
        if changes.get("state") and changes["state"] != self.state.get("state"):
            changes["since"] = time.time()
        self.state.update(changes)
        path = Path(self.config["status"])
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(self.state))
        os.replace(tmp, path)

    def _unit(self) -> int:
        return int(self.device.removeprefix("tun") or 0)

    def _current_hosts(self) -> dict[str, str]:
        """The ``hosts`` of the config file as it is now (Kubernetes updates a mounted Secret in place when members
        join); the config read at start when the file is missing or unreadable."""
        if self.config_path:
            try:
                hosts = json.loads(Path(self.config_path).read_text()).get("hosts")
                if isinstance(hosts, dict):
                    self.config["hosts"] = hosts
            except (OSError, ValueError):
                pass
        return self.config.get("hosts") or {}

    async def keep_hosts(self) -> None:
        """Keep the managed block in ``hosts_file`` every ``HOSTS_EVERY`` seconds: the kubelet rewrites a Pod's
        hosts file whenever one of its containers starts (``ensureHostsFile`` in the kubelet's ``kubelet_pods.go``),
        so the block written before ``main`` started would be gone by the time the Ray head looks up its domain
        address (``ray_head.sh``); members that join later appear too."""
        while True:
            try:
                write_hosts_block(self.config["hosts_file"], self._current_hosts())
            except OSError as exc:
                log.warning("hosts file %s: %s", self.config["hosts_file"], exc)
            await asyncio.sleep(HOSTS_EVERY)

    async def run_once(self) -> bool:
        """One connection, in this process (``--once``): True when it was connected at some point."""
        ensure_tun(self.device, self.config["ip"], self.config["prefix"], int(self.config.get("mtu") or MTU))
        keeper = None
        if self.config.get("hosts_file"):  # Kubernetes; the local runtime's supervisor writes the Worker's file
            write_hosts_block(self.config["hosts_file"], self._current_hosts())
            keeper = asyncio.ensure_future(self.keep_hosts())
        self._status(tun=self.config["ip"])
        try:
            await self._connect_once()
            return True
        except (TimeoutError, OSError, asyncssh.Error) as exc:
            self._status(state="connecting", error=f"{exc.__class__.__name__}: {exc}"[:300])
            log.warning("relay connection failed: %s", exc)
            return False
        finally:
            if keeper is not None:
                keeper.cancel()

    async def _connect_once(self) -> None:
        c = self.config
        key = asyncssh.read_private_key(c["key"])
        cert = asyncssh.read_certificate(c["cert"])
        known = asyncssh.import_known_hosts(f"* {c['host_key']}\n") if c.get("host_key") else None
        async with asyncssh.connect(
            c["relay_host"],
            int(c["relay_port"]),
            username=c["username"],
            client_keys=[(key, cert)],
            known_hosts=known,
            agent_path=None,
            connect_timeout=10,
            keepalive_interval=KEEPALIVE,
            keepalive_count_max=3,
        ) as conn:
            forwarder = await conn.forward_tun(local_unit=self._unit())
            self._status(state="connected", error="", connects=int(self.state.get("connects") or 0) + 1)
            log.info("connected to the domain relay; %s carries %s", self.device, c["ip"])
            closed = asyncio.ensure_future(conn.wait_closed())
            stop = asyncio.ensure_future(self.stopping.wait())
            await asyncio.wait({closed, stop}, return_when=asyncio.FIRST_COMPLETED)
            stop.cancel()
            forwarder.close()
        self._status(state="connecting", error="the relay closed the connection")


def supervise(config_path: str) -> None:
    """Run one connection per child process, again and again, with back-off (1 s doubling to 30 s; reset after a
    connection that worked). A fresh process per connection: asyncssh's TUN reader thread keeps the old file
    descriptor attached to ``tun0`` after a disconnection, so a reconnection in the same process would lose packets."""
    stopping = False
    child: subprocess.Popen | None = None

    def stop(_sig, _frame):
        nonlocal stopping
        stopping = True
        if child is not None and child.poll() is None:
            child.terminate()

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    delay = BACKOFF_START
    while not stopping:
        child = subprocess.Popen([sys.executable, "-m", "domains.netagent", config_path, "--once"])
        code = child.wait()
        if stopping:
            break
        delay = BACKOFF_START if code == 0 else min(delay * 2, BACKOFF_MAX)
        log.info("connection ended (%s); reconnecting in %.0f s", code, delay)
        time.sleep(delay)


def main(argv: list[str] | None = None) -> None:
    argv = sys.argv[1:] if argv is None else argv
    logging.basicConfig(level=logging.INFO, format="%(asctime)s netagent %(levelname)s %(message)s")
    if "--once" not in argv:
        supervise(argv[0])
        return
    config = json.loads(Path(argv[0]).read_text())
    agent = Agent(config, argv[0])
    try:
        agent.state.update(json.loads(Path(config["status"]).read_text()))
    except (OSError, ValueError):
        pass
    loop = asyncio.new_event_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, agent.stopping.set)
    try:
        ok = loop.run_until_complete(agent.run_once())
    finally:
        loop.close()
    os._exit(0 if ok else 1)  # asyncssh's TUN reader thread may still block in read()


if __name__ == "__main__":
    main()
