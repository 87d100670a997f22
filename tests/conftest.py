"""Shared fixtures: Playwright on Debian Chromium, users, and the whole console as subprocesses."""

from __future__ import annotations

import hashlib
import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
CHROMIUM = os.environ.get("RLARK_CHROMIUM", "/usr/bin/chromium")
ARTIFACTS = ROOT / "test-artifacts"
E2E_ADMIN_PASSWORD = "e2e-admin-pass-1"


def screenshot_dir() -> Path:
    """Where browser tests put their zh/en screenshots: ``RLARK_SHOTS_DIR`` or ``test-artifacts/`` (created)."""
    path = Path(os.environ.get("RLARK_SHOTS_DIR") or ARTIFACTS)
    path.mkdir(parents=True, exist_ok=True)
    return path


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(config, items):
    """Run browser tests last. Playwright's sync API keeps an asyncio loop running in the main thread
    for the rest of the session, after which ``asyncio.run`` (Channels and async tests) cannot start;
    everything else keeps pytest-django's order."""

    def is_browser(item) -> bool:
        return item.get_closest_marker("browser") is not None or "page" in getattr(item, "fixturenames", ())

    items[:] = [i for i in items if not is_browser(i)] + [i for i in items if is_browser(i)]


@pytest.fixture(scope="session", autouse=True)
def _patient_browser_assertions():
    """Browser assertions wait up to 15 s (default 5 s): on a loaded 2-core CI machine a websocket
    round trip through the ASGI server can take longer than 5 s; a real failure still fails."""
    from playwright.sync_api import expect

    expect.set_options(timeout=15_000)


@pytest.fixture(scope="session")
def browser_type_launch_args(browser_type_launch_args):
    """Debian Chromium with the flags this closed network needs; never `playwright install`."""
    if not Path(CHROMIUM).exists():
        pytest.skip(f"{CHROMIUM} not installed")
    return {
        **browser_type_launch_args,
        "executable_path": CHROMIUM,
        "args": [
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--no-first-run",
            "--disable-quic",
        ],
    }


@pytest.fixture(scope="session")
def browser_context_args(browser_context_args):
    """Our users' browsers ask for Chinese first (the console's default language)."""
    return {**browser_context_args, "locale": "zh-CN", "viewport": {"width": 1440, "height": 900}}


@pytest.fixture(scope="module")
def orm_beside_playwright():
    """Playwright's sync API keeps an event loop in the test thread while the test's own ORM calls (and the
    database flush after each test) stay synchronous. Allowed only for the modules that use this fixture,
    so the variable never leaks into other tests (``check --deploy`` warns about it)."""
    previous = os.environ.get("DJANGO_ALLOW_ASYNC_UNSAFE")
    os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = "true"
    yield
    if previous is None:
        os.environ.pop("DJANGO_ALLOW_ASYNC_UNSAFE", None)
    else:
        os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = previous


@pytest.fixture
def admin_user(django_user_model):
    return django_user_model.objects.create_superuser("root", "", "root-pass-1")


@pytest.fixture
def alice(django_user_model):
    return django_user_model.objects.create_user("alice", "", "alice-pass-1")


@pytest.fixture
def bob(django_user_model):
    return django_user_model.objects.create_user("bob", "", "bob-pass-1")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _e2e_database_url(tmp: Path) -> str:
    """A database of its own for the subprocess console: SQLite in ``tmp`` or, when
    DATABASE_URL names PostgreSQL, a fresh ``<name>_e2e`` database beside it."""
    url = os.environ.get("DATABASE_URL", "")
    if not url.startswith(("postgres://", "postgresql://")):
        return f"sqlite:///{tmp / 'e2e.sqlite3'}"
    import psycopg

    base, _, name = url.rpartition("/")
    # one database per console server: a test's own console must not drop the session console's database
    e2e_name = f"{name or 'rlark'}_e2e_{hashlib.sha1(str(tmp).encode()).hexdigest()[:8]}"
    with psycopg.connect(f"{base}/postgres", autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{e2e_name}" WITH (FORCE)')
        conn.execute(f'CREATE DATABASE "{e2e_name}"')
    return f"{base}/{e2e_name}"


STATE_BASE = Path("/var/lib/rlark-tests")


def state_dir_outside_tmp(tmp: Path) -> Path:
    """The console's var dir: outside /tmp (``/var/lib/rlark-tests/<name>/var``) when the tests run as root, as
    a production console's ``/var/lib/rlark`` or a checkout in a home directory would be, so that every e2e
    Worker starts the way it starts there (a private /tmp hides nothing of a state directory outside it);
    ``tmp/var`` otherwise."""
    if os.geteuid() != 0:
        return tmp / "var"
    STATE_BASE.mkdir(parents=True, exist_ok=True)
    import tempfile

    return Path(tempfile.mkdtemp(prefix="console-", dir=STATE_BASE)) / "var"


def _drop_e2e_database(url: str) -> None:
    """Drop a console server's own PostgreSQL database (nothing for SQLite). Never raises."""
    if not url.startswith(("postgres://", "postgresql://")) or "_e2e_" not in url:
        return
    import psycopg

    base, _, name = url.rpartition("/")
    try:
        with psycopg.connect(f"{base}/postgres", autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
    except psycopg.Error:
        pass


class ConsoleServer:
    """A running console (``manage.py runconsole``) with its own var dir and database."""

    def __init__(self, tmp: Path) -> None:
        self.tmp = tmp
        self.var_dir = state_dir_outside_tmp(tmp)
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.ssh_port = free_port()  # the SSH bastion (sshgate)
        self.relay_port = free_port()  # the network-domain relay
        self.env = {
            **os.environ,
            "RLARK_VAR_DIR": str(self.var_dir),
            "DATABASE_URL": _e2e_database_url(tmp),
            "RLARK_SYNC_INTERVAL": os.environ.get("RLARK_E2E_SYNC_INTERVAL", "2"),
            "RLARK_SSH_PORT": str(self.ssh_port),
            "RLARK_DOMAIN_RELAY_PORT": str(self.relay_port),
            "DEBUG": "0",
            "PYTHONUNBUFFERED": "1",
            "RLARK_WEB_WORKERS": "2",  # two daphne workers (not 2 per core): a quicker cold start on a busy CI box
        }
        self.proc: subprocess.Popen | None = None
        self.log_path = tmp / "console.log"

    def manage(self, *args: str, check: bool = True) -> subprocess.CompletedProcess:
        return subprocess.run(
            [sys.executable, str(ROOT / "manage.py"), *args],
            env=self.env,
            cwd=ROOT,
            check=check,
            capture_output=True,
            text=True,
            timeout=300,
        )

    def start(self) -> None:
        self.manage("migrate", "--noinput", "-v0")
        # the tests' own output directories (pytest's base temp) besides each user's directory of the demo
        self.manage("seed_demo", "--password", E2E_ADMIN_PASSWORD, "--host-path-root", str(self.tmp.parent))
        log = open(self.log_path, "a")  # noqa: SIM115
        self.proc = subprocess.Popen(
            [sys.executable, str(ROOT / "manage.py"), "runconsole", "--port", str(self.port)],
            env=self.env,
            cwd=ROOT,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        # 60 s, more on a loaded machine (x1 to x4 by the load per core): at load 20 on 2 cores it took longer
        deadline = time.monotonic() + 60 * min(4.0, max(1.0, os.getloadavg()[0] / (os.cpu_count() or 1)))
        while time.monotonic() < deadline:
            try:
                with urllib.request.urlopen(self.url + "/login/", timeout=2) as resp:
                    if resp.status == 200:
                        return
            except OSError:
                time.sleep(0.3)
        self.stop()  # not left running (with its supervisor) after a failed start
        raise RuntimeError("console did not start:\n" + self.log_path.read_text()[-4000:])

    def stop(self, supervisor: bool = True) -> None:
        """Stop runconsole (web server, Celery worker and beat). The local supervisor it started outlives
        it (its Workers keep running); ``supervisor`` True stops it too (``local_supervisor --stop``)."""
        if self.proc and self.proc.poll() is None:
            import signal

            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(timeout=10)
        if supervisor:
            self.manage("local_supervisor", "--stop", check=False)
            if self.var_dir.parent.parent == STATE_BASE:
                shutil.rmtree(self.var_dir.parent, ignore_errors=True)
            _drop_e2e_database(self.env["DATABASE_URL"])


@pytest.fixture(scope="session")
def console_server(tmp_path_factory):
    """The whole console running as a user would start it (session-scoped)."""
    server = ConsoleServer(tmp_path_factory.mktemp("console"))
    server.start()
    yield server
    server.stop()
    ARTIFACTS.mkdir(exist_ok=True)
    shutil.copy(server.log_path, ARTIFACTS / "console.log")
