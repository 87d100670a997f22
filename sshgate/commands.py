"""What users type to reach a Worker (upstream 4.7 bastion command).

The address shown is ``RLARK_SSH_PUBLIC_HOST`` / ``RLARK_SSH_PUBLIC_PORT`` when set (the name users reach the
bastion by, e.g. behind a load balancer), else the host of the page's own URL and ``RLARK_SSH_PORT``.
"""

from __future__ import annotations

import os


def jump_address(request=None) -> tuple[str, int]:
    """``(host, port)`` of the bastion as users reach it."""
    host = os.environ.get("RLARK_SSH_PUBLIC_HOST", "")
    if not host:
        host = request.get_host().rsplit(":", 1)[0] if request is not None else ""
        host = host.strip("[]") or os.environ.get("RLARK_SSH_HOST", "127.0.0.1")
    port = int(os.environ.get("RLARK_SSH_PUBLIC_PORT") or os.environ.get("RLARK_SSH_PORT", "2222"))
    return host, port


def jump_spec(username: str, request=None) -> str:
    """``<user>@<host>:<port>`` for ``ssh -J``."""
    host, port = jump_address(request)
    if ":" in host:
        host = f"[{host}]"
    return f"{username}@{host}:{port}"


def ssh_command(username: str, pod: str, request=None) -> str:
    """``ssh -J <user>@<host>:<port> <pod>``."""
    return f"ssh -J {jump_spec(username, request)} {pod}"
