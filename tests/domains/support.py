"""Helpers of the network-domain tests: isolated local clusters on a real root supervisor."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import types

import pytest

from clusters.runtime.local import netns

needs_root = pytest.mark.skipif(
    os.geteuid() != 0, reason="isolated networks need root (network namespaces, veth, TUN); CI runs as root"
)


def isolated_runtime(sup, cluster: str, nodes: list[dict]):
    """A LocalRuntime of an isolated cluster ``cluster`` on the test's supervisor."""
    from clusters.runtime.local import LocalRuntime

    c = types.SimpleNamespace(name=cluster, namespace="rlark-system", isolated_network=True)
    return LocalRuntime(c, root=sup.root, nodes=nodes)


def reach(ns: str, host: str, port: int, timeout: float = 2.0) -> str:
    """``connected`` | ``refused`` | the error name, for a TCP connect from inside network namespace ``ns``."""
    code = (
        "import socket,sys\n"
        f"s=socket.socket(); s.settimeout({timeout!r})\n"
        f"try:\n s.connect(({host!r},{int(port)})); print('connected')\n"
        "except ConnectionRefusedError: print('refused')\n"
        "except OSError as e: print(type(e).__name__, e.errno)\n"
    )
    out = subprocess.run(
        ["ip", "netns", "exec", ns, sys.executable, "-c", code], capture_output=True, text=True, timeout=30
    )
    return out.stdout.strip() or out.stderr.strip()


def console_listener(port: int = 0) -> socket.socket:
    """A TCP listener on the console address every isolated cluster reaches (IP_FREEBIND: before any network)."""
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.setsockopt(socket.SOL_IP, 15, 1)
    s.bind((netns.CONSOLE_ADDRESS, port))
    s.listen(16)
    return s


def cleanup_networks(*clusters: str) -> None:
    for c in clusters:
        netns.delete_cluster(c)


class RelayThread:
    """The console's domain relay (``domains.relay``) on its own event loop in a thread of the test process,
    listening on 127.0.0.1 and the console address, or on ``hosts``. ``allowed`` is the set of ``(domain, ip)``
    the test says are allocated, unless ``member_ok`` is given (production's: ``dataplane.member_allocated``)."""

    def __init__(self, port: int = 0, hosts: tuple[str, ...] | None = None, member_ok=None) -> None:
        import asyncio
        import threading

        from domains import certs, relay

        self.allowed: set[tuple[str, str]] = set()
        self.hosts = hosts or ("127.0.0.1", netns.CONSOLE_ADDRESS)
        self.relay = relay.Relay(certs.ca_key(), member_ok or (lambda d, ip: (d, ip) in self.allowed))
        self.loop = asyncio.new_event_loop()
        self.port = port
        self._ready = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self.acceptors = []

    def _run(self) -> None:
        import asyncio

        from domains import certs, relay

        asyncio.set_event_loop(self.loop)

        async def start():
            self.acceptors = await relay.serve(self.relay, certs.relay_host_key(), self.port, self.hosts)
            self.port = self.acceptors[0].get_port()
            self._ready.set()

        self.loop.run_until_complete(start())
        self.loop.run_forever()

    def start(self) -> RelayThread:
        self._thread.start()
        assert self._ready.wait(20), "relay did not start"
        return self

    def stop(self) -> None:
        import asyncio

        if not self._thread.is_alive():
            return

        async def close():
            for a in self.acceptors:
                a.close()
            self.relay.close()
            await asyncio.sleep(0.5)

        asyncio.run_coroutine_threadsafe(close(), self.loop).result(10)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(10)


def domain_manifest(job: str, template: str, *, head: bool, domain: str, **kw):
    """``tests.clusters.test_local_runtime_support.manifest`` for a job with ``spec.domain``
    (what ``jobs.jobspec.manifests.injected_env`` adds: ``RLARK_DOMAIN`` on the head,
    ``<head>-0.rlark-domain`` for workers)."""
    from tests.clusters.test_local_runtime_support import manifest

    m = manifest(job, template, head=head, **kw)
    env = m.workload["spec"]["template"]["spec"]["containers"][0]["env"]
    if head:
        env.append({"name": "RLARK_DOMAIN", "value": domain})
    else:
        for e in env:
            if e["name"] == "RLARK_HEAD_ADDRESS":
                e["value"] = f"{job}-header-0.rlark-domain"
    return m
