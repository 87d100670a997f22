"""Where a notification may be sent (SSRF guard), checked when a channel is saved AND before every send.

Rules: the URL is ``https``, or ``http`` to a host an admin lists in ``RLARK_NOTIFY_ALLOWED_HOSTS``; every
address its host resolves to must be public (not loopback, link-local, private, reserved, multicast or
unspecified) unless the host is in that list. :func:`resolve` returns the checked address, and the sender
connects to exactly that address (``notifications.send``), so a DNS answer that changes between the check and
the connection cannot point it elsewhere.
"""

from __future__ import annotations

import ipaddress
import socket
from dataclasses import dataclass
from urllib.parse import urlsplit

from django.conf import settings
from django.utils.translation import gettext, gettext_noop

MAX_URL_LEN = 2048


class UnsafeURL(ValueError):
    """The URL is refused: ``message`` is the sentence in the active language (no secret in it), ``msgid`` and
    ``params`` the English message and its values (stored by a failed delivery, ``notifications.errors``)."""

    def __init__(self, msgid: str, **params: object) -> None:
        self.msgid, self.params = msgid, params
        self.message = gettext(msgid) % params if params else gettext(msgid)
        super().__init__(self.message)


@dataclass(frozen=True)
class Target:
    """A checked URL: ``scheme`` (http/https), ``host`` (as written, for Host and TLS), ``port``, ``path`` (with
    the query) and ``address`` (the IP to connect to)."""

    scheme: str
    host: str
    port: int
    path: str
    address: str


def allowed_hosts() -> set[str]:
    """Lower-case host names an admin allows over http or at private addresses."""
    return {h.lower() for h in getattr(settings, "RLARK_NOTIFY_ALLOWED_HOSTS", [])}


def _public(ip: ipaddress.IPv4Address | ipaddress.IPv6Address) -> bool:
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped
    return not (
        ip.is_loopback or ip.is_link_local or ip.is_private or ip.is_reserved or ip.is_multicast or ip.is_unspecified
    )


def parse(url: str) -> tuple[str, str, int, str]:
    """``(scheme, host, port, path)`` of ``url``; raises :class:`UnsafeURL` for a malformed, too long, non-http(s)
    URL, one with credentials, or plain http to a host not allowed."""
    url = (url or "").strip()
    if not url or len(url) > MAX_URL_LEN:
        raise UnsafeURL(gettext_noop("Enter a URL of at most %(n)d characters."), n=MAX_URL_LEN)
    parts = urlsplit(url)
    scheme = parts.scheme.lower()
    if scheme not in ("http", "https") or not parts.hostname:
        raise UnsafeURL(gettext_noop("The URL must start with https://."))
    if parts.username or parts.password:
        raise UnsafeURL(gettext_noop("The URL must not contain a user name or password."))
    host = parts.hostname.lower()
    if scheme == "http" and host not in allowed_hosts():
        raise UnsafeURL(gettext_noop("Only https URLs are allowed (http only to hosts an administrator allows)."))
    try:
        port = parts.port or (443 if scheme == "https" else 80)
    except ValueError:
        raise UnsafeURL(gettext_noop("The URL's port is not valid.")) from None
    path = parts.path or "/"
    if parts.query:
        path += "?" + parts.query
    return scheme, host, port, path


def resolve(url: str) -> Target:
    """Check ``url`` and resolve its host; returns the :class:`Target` to connect to. Raises :class:`UnsafeURL`
    when the host does not resolve or resolves to a non-public address (unless the host is allowed)."""
    scheme, host, port, path = parse(url)
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except (socket.gaierror, UnicodeError):
        raise UnsafeURL(gettext_noop("The host %(host)s cannot be resolved."), host=host) from None
    addresses = [ipaddress.ip_address(info[4][0].split("%")[0]) for info in infos]
    if not addresses:
        raise UnsafeURL(gettext_noop("The host %(host)s cannot be resolved."), host=host)
    if host not in allowed_hosts():
        for ip in addresses:
            if not _public(ip):
                msgid = gettext_noop(
                    "The host %(host)s resolves to a loopback, link-local or private address (%(ip)s): refused."
                )
                raise UnsafeURL(msgid, host=host, ip=str(ip))
    return Target(scheme, host, port, path, str(addresses[0]))


def masked_url(url: str) -> str:
    """``https://host/…``: the scheme and host of a stored URL, its path and query (which may hold a token)
    hidden; "" for none."""
    if not url:
        return ""
    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.netloc.rsplit('@', 1)[-1]}/…" if parts.netloc else "…"
