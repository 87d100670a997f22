"""The console's SSH certificate authority for domain members (docs/network-domains.md; upstream-rlark 12.4 signs
DomainPeer certificates the same way).

The CA key is ``var/ssh/domain/ca_ed25519`` and the relay's host key ``var/ssh/domain/relay_ed25519`` (0600 in a
0700 directory, made on first use). :func:`member_credentials` makes a fresh ed25519 key per member and signs an
OpenSSH user certificate for it: key id ``<domain>/<pod key>``, the only principal ``rlark-domain:<domain>:<ip>``
(:func:`principal`), no extensions (no shell, no PTY, no forwarding), valid from 5 minutes ago for
:data:`VALID_SECONDS`. Credentials are cached per process and re-signed when less than half of their life is left.
"""

from __future__ import annotations

import os
import socket
import time
from pathlib import Path

import asyncssh
from django.conf import settings

VALID_SECONDS = 24 * 3600
PRINCIPAL_PREFIX = "rlark-domain:"
_cache: dict[tuple[str, str, str], tuple[float, dict[str, str]]] = {}


def principal(domain: str, ip: str) -> str:
    return f"{PRINCIPAL_PREFIX}{domain}:{ip}"


def parse_principal(username: str) -> tuple[str, str] | None:
    """``(domain, ip)`` of ``rlark-domain:<domain>:<ip>``, else None."""
    if not username.startswith(PRINCIPAL_PREFIX):
        return None
    rest = username[len(PRINCIPAL_PREFIX) :]
    domain, _, ip = rest.rpartition(":")
    try:
        socket.inet_aton(ip)
    except OSError:
        return None
    return (domain, ip) if domain and ip.count(".") == 3 else None


def _key(name: str) -> asyncssh.SSHKey:
    """The key ``var/ssh/domain/<name>``; the first process to need it writes it (``O_EXCL``: one wins)."""
    d = Path(settings.VAR_DIR) / "ssh" / "domain"
    d.mkdir(mode=0o700, parents=True, exist_ok=True)
    path = d / name
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        for _ in range(50):  # another process is writing it
            if path.stat().st_size:
                break
            time.sleep(0.1)
        return asyncssh.read_private_key(str(path))
    key = asyncssh.generate_private_key("ssh-ed25519")
    with os.fdopen(fd, "wb") as f:
        f.write(key.export_private_key())
    return key


def ca_key() -> asyncssh.SSHKey:
    return _key("ca_ed25519")


def relay_host_key() -> asyncssh.SSHKey:
    return _key("relay_ed25519")


def member_credentials(domain: str, ip: str, pod_key: str) -> dict[str, str]:
    """``{"username", "key" (OpenSSH private key), "cert" (OpenSSH certificate)}`` for one member."""
    now = time.time()
    cached = _cache.get((domain, ip, pod_key))
    if cached and cached[0] - now > VALID_SECONDS / 2:
        return cached[1]
    key = asyncssh.generate_private_key("ssh-ed25519")
    cert = ca_key().generate_user_certificate(
        key,
        f"{domain}/{pod_key}",
        principals=[principal(domain, ip)],
        valid_after=int(now) - 300,
        valid_before=int(now) + VALID_SECONDS,
        permit_x11_forwarding=False,
        permit_agent_forwarding=False,
        permit_port_forwarding=False,
        permit_pty=False,
        permit_user_rc=False,
    )
    creds = {
        "username": principal(domain, ip),
        "key": key.export_private_key().decode(),
        "cert": cert.export_certificate().decode(),
    }
    _cache[(domain, ip, pod_key)] = (now + VALID_SECONDS, creds)
    return creds
