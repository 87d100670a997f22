"""``rlark tracking list|add|delete`` against a live console: the key comes from an environment variable, stdin
or a no-echo prompt and never from an argument; the answers and the printed output never hold it; bad input is
the API's localized message naming the field; another user's credential cannot be deleted."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from accounts.authentication import issue_token
from accounts.models import TrackingCredential
from rlark_cli import tracking as cli_tracking
from rlark_cli.main import main

pytestmark = pytest.mark.django_db(transaction=True)

KEY = "cli-wandb-key-a1b2c3d4e5f60718293a4b5c6d7e8f90"
ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def env(live_server, alice, monkeypatch, tmp_path):
    _, token = issue_token(alice, "cli")
    monkeypatch.setenv("RLARK_URL", live_server.url)
    monkeypatch.setenv("RLARK_TOKEN", token)
    monkeypatch.setenv("RLARK_LANG", "en")
    monkeypatch.setenv("RLARK_CONFIG", str(tmp_path / "none.yaml"))
    return tmp_path


class _Stdin(io.StringIO):
    def __init__(self, text: str, tty: bool):
        super().__init__(text)
        self.tty = tty

    def isatty(self) -> bool:
        return self.tty


def test_add_from_an_env_var_list_and_delete(env, alice, monkeypatch, capsys):
    monkeypatch.setenv("MY_WANDB_KEY", KEY)
    args = ["tracking", "add", "team-wandb", "--kind", "wandb", "--entity", "rl-team", "--api-key-env", "MY_WANDB_KEY"]
    assert main(args) == 0
    assert capsys.readouterr().out.strip() == "tracking/team-wandb created"
    cred = TrackingCredential.objects.get(user=alice, name="team-wandb")
    assert (cred.api_key, cred.entity) == (KEY, "rl-team")

    assert main(["tracking", "list"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split() == ["NAME", "SERVICE", "HOST", "ENTITY", "CREATED"]
    assert lines[1].split()[:4] == ["team-wandb", "wandb", "-", "rl-team"]
    assert main(["tracking", "list", "-o", "json"]) == 0
    out = capsys.readouterr().out
    assert json.loads(out)[0]["api_key"] == "stored" and KEY not in out

    assert main(["tracking", "delete", "team-wandb"]) == 0
    assert capsys.readouterr().out.strip() == "tracking/team-wandb deleted"
    assert not TrackingCredential.objects.exists()
    assert main(["tracking", "delete", "team-wandb"]) == 3  # not found
    assert "HTTP 404" in capsys.readouterr().err


def test_the_key_comes_from_stdin_or_a_prompt_without_echo(env, alice, monkeypatch, capsys):
    monkeypatch.setattr(sys, "stdin", _Stdin(KEY + "\n", tty=False))
    assert main(["tracking", "add", "piped", "--kind", "swanlab", "--host", "https://swan.example.org"]) == 0
    asked = []

    def no_echo(prompt: str = "") -> str:
        asked.append(prompt)
        return KEY

    monkeypatch.setattr(sys, "stdin", _Stdin("", tty=True))
    monkeypatch.setattr(cli_tracking.getpass, "getpass", no_echo)
    assert main(["tracking", "add", "prompted", "--kind", "wandb"]) == 0
    assert asked == ["API key (not shown): "]
    out = capsys.readouterr()
    assert KEY not in out.out + out.err
    assert {c.name: c.api_key for c in TrackingCredential.objects.filter(user=alice)} == {
        "piped": KEY,
        "prompted": KEY,
    }
    assert TrackingCredential.objects.get(name="piped").host == "https://swan.example.org"


def test_no_argument_takes_the_key(env, capsys):
    with pytest.raises(SystemExit) as stop:
        main(["tracking", "add", "x", "--kind", "wandb", "--api-key", KEY])
    assert stop.value.code == 2 and "unrecognized arguments: --api-key" in capsys.readouterr().err
    assert main(["tracking", "add", "x", "--kind", "wandb", "--api-key-env", "RLARK_UNSET_VARIABLE"]) == 1
    assert "RLARK_UNSET_VARIABLE is not set" in capsys.readouterr().err
    assert main(["tracking", "add", "x", "--kind", "wandb", "--api-key-env", KEY]) == 1  # the key, by mistake
    err = capsys.readouterr().err
    assert "NAME of an environment variable" in err and KEY not in err
    assert not TrackingCredential.objects.exists()


def test_bad_input_shows_the_field_and_the_message_in_the_users_language(env, monkeypatch, capsys):
    monkeypatch.setenv("K", KEY)
    assert main(["tracking", "add", "bad", "--kind", "wandb", "--entity", "a team", "--api-key-env", "K"]) == 5
    err = capsys.readouterr().err
    assert "tracking add failed: HTTP 400" in err and "  entity: Enter the W&B entity as letters" in err
    assert main(["tracking", "add", "Bad", "--kind", "wandb", "--lang", "zh", "--api-key-env", "K"]) == 5
    assert "  name: " in (err := capsys.readouterr().err) and "小写字母" in err


def test_another_users_credential_is_not_found(env, bob, capsys):
    TrackingCredential.objects.create(user=bob, name="bobs", kind="wandb", api_key=KEY)
    assert main(["tracking", "list", "-o", "json"]) == 0
    assert json.loads(capsys.readouterr().out) == []
    assert main(["tracking", "delete", "bobs"]) == 3  # not found
    assert "HTTP 404" in capsys.readouterr().err
    assert TrackingCredential.objects.filter(name="bobs").exists()


def test_a_real_process_reads_the_key_from_a_pipe(env, alice):
    proc = subprocess.run(
        [sys.executable, "-m", "rlark_cli.main", "tracking", "add", "piped", "--kind", "wandb", "-o", "json"],
        input=KEY + "\n",
        capture_output=True,
        text=True,
        timeout=60,
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["name"] == "piped" and KEY not in proc.stdout
    assert TrackingCredential.objects.get(user=alice, name="piped").api_key == KEY
