"""A full ``var/`` (the state directory: SQLite database, cache, logs) is said, never a bare 500.

The served web tier runs on a real, tiny tmpfs mounted as its ``RLARK_VAR_DIR`` (root only; unmounted in the
fixture's ``finally``), which a filler file then fills up to ``ENOSPC``: an API write answers a JSON 503 in the
request's language (it was Django's HTML 500: SQLite's "disk I/O error"), and every page carries a banner in zh
and en. The status sync, which runs in Celery, logs the failure as a full disk and the pages show it.
"""

from __future__ import annotations

import http.cookiejar
import json
import logging
import os
import re
import sqlite3
import subprocess
import sys
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path

import pytest
from django.db import OperationalError

from tests.processes import start_web_tier, stop_group

ROOT = Path(__file__).resolve().parents[2]
PASSWORD = "correct horse battery"
BANNER = {"en": "storage is full", "zh-hans": "存储空间已满"}

SETUP = f"""
from django.contrib.auth import get_user_model
from accounts.authentication import issue_token
alice = get_user_model().objects.create_user(username="alice", password={PASSWORD!r})
print("TOKEN", issue_token(alice, "t")[1])
"""


def _mount_tmpfs(path: Path, size: str) -> bool:
    """Mount a tmpfs of ``size`` (``"48m"``) on ``path``; False when this machine does not let us (not root)."""
    if os.geteuid() != 0:
        return False
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={size},mode=0700", "tmpfs", str(path)], capture_output=True, timeout=30
    )
    return done.returncode == 0


def _fill(directory: Path) -> int:
    """Write a filler file in ``directory`` until the file system says ENOSPC; the bytes written."""
    written = 0
    with open(directory / "filler", "wb") as filler:
        try:
            while True:
                filler.write(b"\0" * 65536)
                filler.flush()
                written += 65536
        except OSError as exc:
            assert exc.errno == 28, exc  # ENOSPC
    return written


def _session(base: str) -> http.cookiejar.CookieJar:
    """Cookies of alice's logged-in session (login page, then its form)."""
    jar = http.cookiejar.CookieJar()
    opener = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(jar))
    with opener.open(base + "/login/", timeout=60) as response:
        csrf = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', response.read().decode()).group(1)
    form = urllib.parse.urlencode({"username": "alice", "password": PASSWORD, "csrfmiddlewaretoken": csrf}).encode()
    request = urllib.request.Request(base + "/login/", data=form, headers={"Referer": base + "/login/"})
    with opener.open(request, timeout=60) as response:
        assert "/login/" not in response.url, "login failed"
    return jar


@pytest.fixture(scope="module")
def full_var(tmp_path_factory):
    """``(base URL, API token, session cookies, web log)`` of a web tier whose var/ is a full 48 MB tmpfs."""
    tmp = tmp_path_factory.mktemp("varfull")
    var = tmp / "var"
    var.mkdir()
    if not _mount_tmpfs(var, "48m"):
        pytest.skip("needs root to mount a tmpfs as var/")
    proc = log = None
    try:
        env = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "REDIS_URL", "RLARK_DB_POOL")}
        env.update(RLARK_VAR_DIR=str(var), DEBUG="0", ALLOWED_HOSTS="127.0.0.1", PYTHONUNBUFFERED="1")
        manage = [sys.executable, str(ROOT / "manage.py")]
        subprocess.run([*manage, "migrate", "--noinput", "-v0"], env=env, cwd=ROOT, check=True, timeout=300)
        out = subprocess.run(
            [*manage, "shell", "-c", SETUP], env=env, cwd=ROOT, check=True, timeout=120, capture_output=True, text=True
        ).stdout
        token = out.split("TOKEN", 1)[1].split()[0]
        proc, base, log = start_web_tier(manage, env, ROOT, tmp / "web.log", 1)
        jar = _session(base)
        print(f"var/ filled with {_fill(var) / 2**20:.1f} MB")
        yield base, token, jar, tmp / "web.log"
    finally:
        if proc is not None:
            stop_group(proc)
            log.close()
        if subprocess.run(["umount", str(var)], timeout=60).returncode != 0:
            subprocess.run(["umount", "-l", str(var)], timeout=60)


@pytest.mark.e2e
@pytest.mark.parametrize("language, word", [("en", "storage is full"), ("zh-hans", "存储空间已满")])
def test_an_api_write_on_a_full_var_is_a_json_503(full_var, language, word):
    base, token, _jar, log = full_var
    request = urllib.request.Request(
        base + "/api/v1/tokens/",
        data=json.dumps({"name": f"ci-{language}"}).encode(),
        headers={"Authorization": f"Token {token}", "Content-Type": "application/json", "Accept-Language": language},
    )
    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(request, timeout=30)
    assert refused.value.code == 503, log.read_text()[-3000:]
    assert refused.value.headers["Content-Type"] == "application/json"
    body = json.loads(refused.value.read())
    assert body["code"] == "var_full" and word in body["detail"], body
    assert "failed: no space left" in log.read_text()  # logged as what it is


@pytest.mark.e2e
@pytest.mark.parametrize("language", ["en", "zh-hans"])
def test_every_page_shows_the_full_var_banner(full_var, language):
    base, _token, jar, log = full_var
    opener = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(jar))
    for path in ("/", "/jobs/"):
        request = urllib.request.Request(base + path, headers={"Accept-Language": language})
        try:
            with opener.open(request, timeout=30) as response:
                page = response.read().decode()  # PostgreSQL: the page as usual, with the banner
        except urllib.error.HTTPError as exc:  # SQLite in var/ cannot open its database: a 503 that says why
            assert exc.code == 503, f"{path}: {exc.code}\n{log.read_text()[-4000:]}"
            page = exc.read().decode()
        banner = re.search(r'<div class="error-banner" role="alert" data-testid="var-full">([^<]+)</div>', page)
        assert banner and BANNER[language] in banner.group(1), (path, page[:2000])


def _sqlite_disk_full() -> OperationalError:
    """Django's error for a SQLite write on a full disk, as raised (wrapping sqlite3's)."""
    try:
        try:
            raise sqlite3.OperationalError("database or disk is full")
        except sqlite3.OperationalError as exc:
            raise OperationalError(*exc.args) from exc
    except OperationalError as wrapped:
        return wrapped


@pytest.mark.django_db
def test_the_status_sync_reports_a_full_disk_and_the_pages_say_so(monkeypatch, caplog, rf):
    from jobs import tasks
    from rlark_console import varspace

    def write_fails(*_args, **_kwargs):
        raise _sqlite_disk_full()

    monkeypatch.setattr(varspace, "_checked", (float("-inf"), False))
    monkeypatch.setattr(varspace, "_reported", {})
    monkeypatch.setattr(tasks, "sync_all_clusters", write_fails)
    with caplog.at_level(logging.ERROR, logger="rlark_console.varspace"):
        tasks.sync_all()  # the task does not die with an unexplained error
    assert any("status sync failed: no space left" in r.getMessage() for r in caplog.records), caplog.text
    assert "var_full_message" in varspace.var_status(rf.get("/"))  # the banner for the next pages
