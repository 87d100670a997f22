"""Restarting the local PostgreSQL cluster of ``DATABASE_URL`` (tests marked ``pg_restart`` only)."""

from __future__ import annotations

import os
import shutil
import subprocess
import urllib.parse


def local_cluster(url: str | None = None) -> tuple[str, str] | None:
    """``(version, cluster name)`` of the online Debian PostgreSQL cluster serving ``url`` (``DATABASE_URL``) on
    this machine's loopback, or None when it is not PostgreSQL, not local, or cannot be restarted here (not root,
    no ``pg_lsclusters``)."""
    url = os.environ.get("DATABASE_URL", "") if url is None else url
    if not url.startswith(("postgres://", "postgresql://")) or os.geteuid() != 0 or not shutil.which("pg_lsclusters"):
        return None
    parsed = urllib.parse.urlsplit(url)
    if parsed.hostname not in ("127.0.0.1", "localhost"):
        return None
    out = subprocess.run(["pg_lsclusters", "--no-header"], capture_output=True, text=True, timeout=30).stdout
    for line in out.splitlines():
        version, cluster, port, status, *_rest = line.split()
        if int(port) == (parsed.port or 5432) and status == "online":
            return version, cluster
    return None


def ctl(action: str, version: str, cluster: str) -> None:
    """``pg_ctlcluster <version> <cluster> <action>`` (``restart``, ``start``) without systemd; waits for it (at
    most 120 s). Raises CalledProcessError when it fails."""
    command = ["pg_ctlcluster", "--skip-systemctl-redirect", version, cluster, action]
    subprocess.run(command, check=True, timeout=120)


def restart(version: str, cluster: str) -> None:
    """Restart the cluster; started again if the restart left it down."""
    try:
        ctl("restart", version, cluster)
    finally:
        if local_cluster() is None:
            ctl("start", version, cluster)
