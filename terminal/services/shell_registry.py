"""Where a kept WebTerminal shell lives, so that any web worker can find it on a reconnect.

A shell kept for the reconnect grace period stays in the web process that started it (its owner). The owner
records ``token -> {owner, user, job, pod, container}`` here with a time to live; a worker that gets a
``?resume=<token>`` it does not hold looks the token up and asks the owner, over the channel layer, to relay the
shell (:mod:`terminal.services.shell_relay`).

Backed by Redis (``settings.REDIS_URL``, keys ``rlark:terminal:shell:<token>``) so that every web worker sees
the same records; without Redis the channel layer is in-memory and only this process can be reached, so the
records live in a dict of this process.
"""

from __future__ import annotations

import asyncio
import json
import re
import time
import weakref

from django.conf import settings

KEY_PREFIX = "rlark:terminal:shell:"
TOKEN_RE = re.compile(r"[A-Za-z0-9_-]{8,64}")
MAX_RECORD = 4096  # bytes of JSON; a record holds a channel name and four short identifiers

_local: dict[str, tuple[dict, float]] = {}
_clients: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()  # event loop -> redis.asyncio.Redis


def valid_token(token: object) -> bool:
    """True for a well-formed resume token (user input: 8..64 URL-safe characters)."""
    return isinstance(token, str) and TOKEN_RE.fullmatch(token) is not None


def _redis():
    """This event loop's Redis client, or None without ``REDIS_URL``."""
    if not settings.REDIS_URL:
        return None
    loop = asyncio.get_running_loop()
    client = _clients.get(loop)
    if client is None:
        import redis.asyncio  # local import: only needed with Redis

        client = redis.asyncio.Redis.from_url(settings.REDIS_URL, socket_timeout=5, socket_connect_timeout=5)
        _clients[loop] = client
    return client


async def register(token: str, record: dict, ttl: float) -> None:
    """Record (or refresh) where ``token``'s shell lives for ``ttl`` seconds (at least 1).

    ``record``: ``{"owner": channel name, "user": int, "job": str, "pod": str, "container": str}``.
    Raises ValueError for a malformed token or an oversized record; redis errors propagate."""
    data = json.dumps(record, separators=(",", ":"))
    if not valid_token(token) or len(data) > MAX_RECORD:
        raise ValueError("malformed shell record")
    seconds = max(1, int(ttl + 0.999))
    client = _redis()
    if client is None:
        _local[token] = (record, time.monotonic() + seconds)
        return
    await client.set(KEY_PREFIX + token, data, ex=seconds)


async def lookup(token: str) -> dict | None:
    """The record for ``token``, or None (unknown, expired or malformed). Redis errors propagate."""
    if not valid_token(token):
        return None
    client = _redis()
    if client is None:
        record, expires = _local.get(token, (None, 0.0))
        if record is None or expires < time.monotonic():
            _local.pop(token, None)
            return None
        return record
    raw = await client.get(KEY_PREFIX + token)
    if raw is None or len(raw) > MAX_RECORD:
        return None
    try:
        record = json.loads(raw)
    except ValueError:
        return None
    return record if isinstance(record, dict) else None


async def forget(token: str) -> None:
    """Drop ``token``'s record (the shell ended or is attached in its own process again)."""
    if not valid_token(token):
        return
    client = _redis()
    if client is None:
        _local.pop(token, None)
        return
    await client.delete(KEY_PREFIX + token)
