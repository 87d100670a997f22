"""The client's address, the one rule used by the login rate limit, the audit log, WebTerminal sessions and the
Origin check (the forwarded scheme).

``X-Forwarded-For`` is believed only from ``settings.RLARK_TRUSTED_PROXIES`` (IPs or CIDRs, empty by default).
The header is read from the right: starting at the TCP peer, while the current hop is a trusted proxy, step to
the address that proxy says it saw. The result is the address the nearest trusted proxy saw (the first
untrusted hop from the right); made-up entries a client puts on the left are never reached. With no trusted
proxies the TCP peer is the client, whatever the headers say.

The ASGI server must NOT rewrite the peer from the headers itself (daphne runs without ``--proxy-headers``).
"""

from __future__ import annotations

import functools
import ipaddress
from collections.abc import Iterable

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured

Network = ipaddress.IPv4Network | ipaddress.IPv6Network
MAX_HOPS = 32  # a longer X-Forwarded-For chain is cut: its left part can only be claims


@functools.lru_cache(maxsize=8)
def _networks(entries: tuple[str, ...]) -> tuple[Network, ...]:
    nets = []
    for entry in entries:
        try:
            nets.append(ipaddress.ip_network(entry, strict=False))
        except ValueError as exc:
            raise ImproperlyConfigured(f"RLARK_TRUSTED_PROXIES: {entry!r} is not an IP address or CIDR") from exc
    return tuple(nets)


def trusted_networks() -> tuple[Network, ...]:
    """``settings.RLARK_TRUSTED_PROXIES`` parsed (ImproperlyConfigured for a bad entry)."""
    return _networks(tuple(getattr(settings, "RLARK_TRUSTED_PROXIES", ()) or ()))


def _parse(value: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    """``1.2.3.4``, ``1.2.3.4:5678``, ``::1``, ``[::1]:80`` -> address; None when not an address."""
    text = value.strip()
    if text.startswith("["):
        text = text[1:].split("]", 1)[0]
    elif text.count(":") == 1:
        text = text.split(":", 1)[0]
    try:
        addr = ipaddress.ip_address(text)
    except ValueError:
        return None
    mapped = getattr(addr, "ipv4_mapped", None)
    return mapped or addr


def _trusted(addr, nets: tuple[Network, ...]) -> bool:
    return any(addr.version == net.version and addr in net for net in nets)


def client_address(peer: str, forwarded_for: Iterable[str] = ()) -> str:
    """The client address for a TCP ``peer`` and the ``X-Forwarded-For`` header values (in arrival order).

    ``client_address("10.0.0.2", ["6.6.6.6, 203.0.113.9"])`` with ``10.0.0.0/8`` trusted -> ``"203.0.113.9"``;
    with nothing trusted -> ``"10.0.0.2"``. An unparsable hop stops the walk at the last good address."""
    nets = trusted_networks()
    current = _parse(peer or "")
    if current is None:
        return (peer or "")[:64]
    if not nets or not _trusted(current, nets):
        return str(current)
    hops = [h for value in forwarded_for for h in str(value).split(",") if h.strip()][-MAX_HOPS:]
    for hop in reversed(hops):
        addr = _parse(hop)
        if addr is None:
            break
        current = addr
        if not _trusted(addr, nets):
            break
    return str(current)


def request_address(request) -> str:
    """:func:`client_address` of a Django request (``""`` when there is none)."""
    meta = getattr(request, "META", None)
    if meta is None:
        return ""
    forwarded = meta.get("HTTP_X_FORWARDED_FOR")
    return client_address(meta.get("REMOTE_ADDR", ""), [forwarded] if forwarded else [])


def scope_address(scope) -> str:
    """:func:`client_address` of an ASGI (websocket) scope."""
    client = scope.get("client") or ("", 0)
    headers = [v.decode("latin-1") for k, v in scope.get("headers", ()) if k.lower() == b"x-forwarded-for"]
    return client_address(str(client[0] or ""), headers)


def forwarded_scheme(scope) -> str | None:
    """``X-Forwarded-Proto`` of an ASGI scope when the peer is a trusted proxy (``"https"``), else None."""
    nets = trusted_networks()
    client = scope.get("client") or ("", 0)
    peer = _parse(str(client[0] or ""))
    if not nets or peer is None or not _trusted(peer, nets):
        return None
    for key, value in scope.get("headers", ()):
        if key.lower() == b"x-forwarded-proto":
            return value.decode("latin-1").split(",")[0].strip().lower() or None
    return None
