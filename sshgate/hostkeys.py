"""Host keys of the bastion and of every Worker it stands in for (generated once, kept in ``var/``).

``var/ssh/bastion_ed25519`` is the bastion's own key (its fingerprint is on the SSH keys page);
``var/ssh/workers/<pod>_ed25519`` is the key the bastion presents as Worker ``<pod>`` (the inner SSH connection of
``ssh -J``), so ``known_hosts`` stays valid for that Worker name. Files are 0600 in a 0700 directory.
:func:`known_hosts_lines` publishes the public halves (``GET /api/v1/ssh/``), so ``rlark ssh`` and
``rlark ssh-config`` write ``known_hosts`` from the authenticated API and no hop is trusted on first use.
"""

from __future__ import annotations

import os
import re
import secrets
from pathlib import Path

import asyncssh
from django.conf import settings

_SAFE = re.compile(r"^[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?$")


def key_dir() -> Path:
    path = Path(settings.VAR_DIR) / "ssh"
    (path / "workers").mkdir(parents=True, exist_ok=True, mode=0o700)
    return path


def _load_or_create(path: Path) -> asyncssh.SSHKey:
    """The key in ``path``; a new ed25519 key is created first when there is none. Creation links a complete
    temporary file into place, so concurrent processes (web page, bastion) all end up with the same key."""
    if not path.exists():
        key = asyncssh.generate_private_key("ssh-ed25519")
        tmp = path.with_name(f".{path.name}.{os.getpid()}.{secrets.token_hex(4)}")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "wb") as f:
            f.write(key.export_private_key())
        try:
            os.link(tmp, path)  # fails when another process created it first: theirs wins
        except FileExistsError:
            pass
        finally:
            tmp.unlink()
    return asyncssh.read_private_key(str(path))


def bastion_key() -> asyncssh.SSHKey:
    """The bastion's host key (created on first use)."""
    return _load_or_create(key_dir() / "bastion_ed25519")


def bastion_fingerprint() -> str:
    """``SHA256:…`` of the bastion host key, as ``ssh`` prints it when it first connects."""
    return bastion_key().get_fingerprint("sha256")


def worker_key(pod: str) -> asyncssh.SSHKey:
    """The host key shown as Worker ``pod`` (a DNS name; anything else raises ValueError)."""
    if not _SAFE.match(pod):
        raise ValueError(f"not a Worker name: {pod!r}")
    return _load_or_create(key_dir() / "workers" / f"{pod}_ed25519")


def _public_line(key: asyncssh.SSHKey) -> str:
    """``<type> <base64>`` of ``key``'s public half, without a comment."""
    return " ".join(key.convert_to_public().export_public_key("openssh").decode().split()[:2])


def known_hosts_lines(host: str, port: int, pods: list[str]) -> list[str]:
    """``known_hosts`` lines (OpenSSH format) for the bastion as users reach it (``host``:``port``) and for each
    Worker in ``pods`` (the inner hop of ``ssh -J``, ``<pod>`` on port 22). Worker keys are created when
    missing, as the bastion would on the first connection."""
    name = host if port == 22 else f"[{host}]:{port}"
    return [f"{name} {_public_line(bastion_key())}", *(f"{pod} {_public_line(worker_key(pod))}" for pod in pods)]
