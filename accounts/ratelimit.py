"""Login rate limiting: at most ``MAX_FAILURES`` failed logins per (address, username) per window."""

from __future__ import annotations

import hashlib

from django.core.cache import cache

MAX_FAILURES = 5
WINDOW_SECONDS = 300


def _key(remote_addr: str, username: str) -> str:
    raw = f"{remote_addr}|{username.strip().lower()}".encode()
    return "login-fail:" + hashlib.sha256(raw).hexdigest()


def is_locked(remote_addr: str, username: str) -> bool:
    """True when this address has failed ``MAX_FAILURES`` times for ``username`` within the window."""
    return cache.get(_key(remote_addr, username), 0) >= MAX_FAILURES


def record_failure(remote_addr: str, username: str) -> int:
    """Count one failure; returns the failures in the current window."""
    key = _key(remote_addr, username)
    cache.add(key, 0, WINDOW_SECONDS)
    try:
        return cache.incr(key)
    except ValueError:  # expired between add and incr
        cache.set(key, 1, WINDOW_SECONDS)
        return 1


def reset(remote_addr: str, username: str) -> None:
    """Forget failures after a successful login."""
    cache.delete(_key(remote_addr, username))
