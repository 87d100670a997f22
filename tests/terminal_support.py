"""Helpers of the terminal, console and browser tests: a logged-in session and a websocket client against the real
ASGI application, and the demo console (``python -m launcher.terminal_demo``, on :mod:`terminal.demo_runtime`) as a
subprocess with its login."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

from launcher.asgi import application
from launcher.demo_users import PASSWORD


def wait_for(predicate, timeout: float = 5.0, interval: float = 0.02) -> bool:
    """Poll ``predicate`` until true or ``timeout`` seconds passed."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(interval)
    return bool(predicate())


def session_cookie(user) -> str:
    """A logged-in session for ``user`` (the value of the session cookie)."""
    from django.conf import settings
    from django.test import Client

    client = Client()
    client.force_login(user)
    return client.cookies[settings.SESSION_COOKIE_NAME].value


def ws_communicator(
    path: str, cookie: str | None = None, origin: str | None = "http://127.0.0.1", language: str | None = None
):
    """A ``WebsocketCommunicator`` against the real ASGI application (Origin check, session auth); ``language``
    is sent as the browser's Accept-Language."""
    from channels.testing import WebsocketCommunicator
    from django.conf import settings

    headers = [(b"host", b"127.0.0.1")]
    if origin:
        headers.append((b"origin", origin.encode()))
    if cookie:
        headers.append((b"cookie", f"{settings.SESSION_COOKIE_NAME}={cookie}".encode()))
    if language:
        headers.append((b"accept-language", language.encode()))
    return WebsocketCommunicator(application, path, headers=headers)


class DemoConsole:
    """``python -m launcher.terminal_demo`` as a subprocess (own database and DirRuntime in ``base``)."""

    def __init__(self, base: Path, interval: float = 1.0, lines: int = 0) -> None:
        import socket

        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            self.port = s.getsockname()[1]
        self.base = Path(base)
        self.url = f"http://127.0.0.1:{self.port}"
        self.runtime_root = self.base / "rt"
        self.args = ["--dir", str(self.base), "--port", str(self.port), "--interval", str(interval)]
        self.args += ["--lines", str(lines)]
        self.proc: subprocess.Popen | None = None

    def start(self, timeout: float = 60) -> DemoConsole:
        import sys
        import urllib.request

        root = Path(__file__).resolve().parent.parent
        env = {**os.environ, "DEBUG": "0", "PYTHONUNBUFFERED": "1"}
        env.pop("DATABASE_URL", None)
        self.log = open(self.base / "demo.log", "w")  # noqa: SIM115 - closed in stop()
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "launcher.terminal_demo", *self.args],
            cwd=root,
            env=env,
            stdout=self.log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                break
            try:
                with urllib.request.urlopen(self.url + "/login/", timeout=2) as resp:
                    if resp.status == 200:
                        return self
            except OSError:
                time.sleep(0.3)
        self.stop()
        raise RuntimeError("demo console did not start:\n" + (self.base / "demo.log").read_text()[-3000:])

    def stop(self) -> None:
        if self.proc and self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(timeout=10)
        if getattr(self, "log", None):
            self.log.close()


def demo_login(page, url: str, user: str = "alice") -> None:
    """Log a Playwright ``page`` in to the DemoConsole at ``url`` as ``user`` (the demo password)."""
    page.goto(url + "/login/")
    page.fill("input[name=username]", user)
    page.fill("input[name=password]", PASSWORD)
    page.click("button[type=submit]")
    page.wait_for_load_state("load")
