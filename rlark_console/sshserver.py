"""The base of the console's SSH servers: the bastion (``sshgate.server``) and the domain relay (``domains.relay``)."""

from __future__ import annotations

import asyncssh


class KeysOnlyServer(asyncssh.SSHServer):
    """Public keys only, always asked for (no passwords, no keyboard-interactive, no "none")."""

    def connection_made(self, conn) -> None:
        self.conn = conn

    def begin_auth(self, username: str) -> bool:
        return True

    def password_auth_supported(self) -> bool:
        return False

    def kbdint_auth_supported(self) -> bool:
        return False

    def public_key_auth_supported(self) -> bool:
        return True
