"""Login rate limiting, by address AND by account.

Within ``WINDOW_SECONDS`` a login is refused (429) once any of these counters of failed logins is reached:
- ``MAX_FAILURES`` for one (address, username) pair: the everyday lockout of a mistyped password;
- ``MAX_ACCOUNT_FAILURES`` for one username from any addresses: guessing one account from many addresses;
- ``MAX_ADDRESS_FAILURES`` for one address over any usernames: spraying many accounts from one address.
Addresses come from ``rlark_console.clientaddr.request_address`` (forwarded headers only from trusted proxies).
The per-account counter lets an attacker delay that account's logins by at most one window; that is the price
of not letting distributed guessing through.

Logins of one (address, username) pair are checked one at a time (:func:`pair_turn`, a lock in the shared cache):
without it, 30 simultaneous attempts all passed the check before the first failure was counted.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import os
import time
from collections.abc import Iterator
from pathlib import Path

from django.conf import settings
from django.core.cache import cache

MAX_FAILURES = 5
MAX_ACCOUNT_FAILURES = 10
MAX_ADDRESS_FAILURES = 30
WINDOW_SECONDS = 300
TURN_SECONDS = 20  # a pair's lock expires after this long (a crashed request), and a login waits at most this long


def _hash(kind: str, *parts: str) -> str:
    return f"login-fail:{kind}:" + hashlib.sha256("|".join(parts).encode()).hexdigest()


def _keys(remote_addr: str, username: str) -> list[tuple[str, int]]:
    user = username.strip().lower()
    return [
        (_hash("pair", remote_addr, user), MAX_FAILURES),
        (_hash("account", user), MAX_ACCOUNT_FAILURES),
        (_hash("address", remote_addr), MAX_ADDRESS_FAILURES),
    ]


def is_locked(remote_addr: str, username: str) -> bool:
    """True when the pair, the account or the address has reached its limit within the window."""
    keys = _keys(remote_addr, username)
    counts = cache.get_many([k for k, _ in keys])
    return any(counts.get(k, 0) >= limit for k, limit in keys)


def _incr(key: str) -> int:
    cache.add(key, 0, WINDOW_SECONDS)
    try:
        return cache.incr(key)
    except ValueError:  # expired between add and incr
        cache.set(key, 1, WINDOW_SECONDS)
        return 1


def record_failure(remote_addr: str, username: str) -> int:
    """Count one failure on all three counters; returns the (address, username) failures in the window."""
    counts = [_incr(key) for key, _ in _keys(remote_addr, username)]
    return counts[0]


def reset(remote_addr: str, username: str) -> None:
    """Forget the pair's failures after a successful login (the account and address counters run out)."""
    cache.delete(_keys(remote_addr, username)[0][0])


@contextlib.contextmanager
def pair_turn(remote_addr: str, username: str) -> Iterator[bool]:
    """Hold the (address, username) pair's turn while its login is checked; yields False when the turn did not come
    within :data:`TURN_SECONDS` (the caller refuses the login as throttled). The turn is an atomic ``add`` in a
    shared (Redis) cache, else an ``flock`` on a file in ``VAR_DIR/login-turns/`` (the embedded default's web
    workers share one machine, and its file cache has no atomic ``add``)."""
    name = _keys(remote_addr, username)[0][0].rsplit(":", 1)[1]
    deadline = time.monotonic() + TURN_SECONDS
    if "redis" in type(cache).__module__.lower():
        key = "login-turn:" + name
        while not cache.add(key, 1, TURN_SECONDS):
            if time.monotonic() > deadline:
                yield False
                return
            time.sleep(0.05)
        try:
            yield True
        finally:
            cache.delete(key)
        return
    turns = Path(settings.VAR_DIR) / "login-turns"
    turns.mkdir(mode=0o700, exist_ok=True)
    fd = os.open(turns / f"{name[:32]}.lock", os.O_RDWR | os.O_CREAT, 0o600)
    try:
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() > deadline:
                    yield False
                    return
                time.sleep(0.05)
        yield True
    finally:
        os.close(fd)  # releases the lock
