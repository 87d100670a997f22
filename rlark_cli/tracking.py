"""``rlark tracking list|add|delete``: the caller's experiment-tracking credentials (W&B, SwanLab) through
``/api/v1/tracking-credentials/``.

``add`` never takes the API key as a command-line argument: arguments are visible to every local user in ``ps``
(``/proc/<pid>/cmdline``) and are kept in the shell's history. The key comes from ``--api-key-env VAR`` (the
variable's value), else from standard input when it is not a terminal (``echo "$KEY" | rlark tracking add ...``,
first line), else from a prompt that does not echo it (``getpass``). The answers never hold the key.
"""

from __future__ import annotations

import argparse
import getpass
import json
import os
import re
import sys
import urllib.parse
from typing import Any

from rlark_cli.client import Client, CLIError, emit, exit_code_of, print_table

MAX_KEY_CHARS = 512  # the console refuses longer keys; more is never read from stdin
PATH = "tracking-credentials/"
VAR_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,127}")


def read_key(args: argparse.Namespace) -> str:
    """The API key for ``add``: ``--api-key-env``, else stdin (not a terminal), else a prompt without echo.
    Raises CLIError when it is empty or the variable is unset."""
    if args.api_key_env:
        if not VAR_NAME.fullmatch(args.api_key_env):  # a key typed here by mistake is not echoed back
            raise CLIError("--api-key-env takes the NAME of an environment variable (letters, digits, '_')")
        key = os.environ.get(args.api_key_env, "")
        if not key:
            raise CLIError(f"environment variable {args.api_key_env} is not set or empty")
    elif sys.stdin is not None and not sys.stdin.isatty():
        key = sys.stdin.readline(MAX_KEY_CHARS + 2)
    else:
        key = getpass.getpass("API key (not shown): ")
    key = key.strip()
    if not key:
        raise CLIError("no API key given (use --api-key-env VAR, stdin or the prompt)")
    return key


def failure(status: int, body: Any, what: str) -> CLIError:
    """A readable failure: each field's messages (``name: ...``) of a 400, else the API's ``detail``."""
    lines = [f"{what} failed: HTTP {status}"]
    detail = body.get("detail") if isinstance(body, dict) else body
    if isinstance(detail, dict):
        for field, messages in detail.items():
            for message in messages if isinstance(messages, list) else [messages]:
                lines.append(f"  {field}: {message}")
    elif detail:
        lines.append(f"  {str(detail)[:500]}")
    return CLIError("\n".join(lines), body, exit_code_of(status))


def cmd_list(client: Client, args) -> int:
    status, data = client.request("GET", PATH)
    if status != 200 or not isinstance(data, list):
        raise failure(status, data, "tracking list")
    if emit(args, data):
        return 0
    header = ("NAME", "SERVICE", "HOST", "ENTITY", "CREATED")
    table = [header] + [
        (
            r["name"],
            r.get("kind", ""),
            r.get("host") or "-",
            r.get("entity") or "-",
            str(r.get("created_at", ""))[:19].replace("T", " "),
        )
        for r in data
    ]
    print_table(table)
    return 0


def cmd_add(client: Client, args) -> int:
    body = {
        "name": args.name,
        "kind": args.kind,
        "api_key": read_key(args),
        "host": args.host or "",
        "entity": args.entity or "",
    }
    status, data = client.request("POST", PATH, json.dumps(body).encode(), "application/json")
    if status != 201 or not isinstance(data, dict):
        raise failure(status, data, "tracking add")
    if not emit(args, data):
        print(f"tracking/{data['name']} created")
    return 0


def cmd_delete(client: Client, args) -> int:
    status, data = client.request("DELETE", f"{PATH}{urllib.parse.quote(args.name, safe='')}/")
    if status != 204:
        raise failure(status, data, "tracking delete")
    if not emit(args, {"name": args.name, "deleted": True}):
        print(f"tracking/{args.name} deleted")
    return 0


def add_commands(sub: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:
    """Register ``rlark tracking list|add|delete``."""
    p = sub.add_parser("tracking", help="experiment-tracking credentials (W&B, SwanLab)")
    actions = p.add_subparsers(dest="tracking_command", required=True)
    a = actions.add_parser("list", parents=[common], help="list your credentials (never the keys)")
    a.set_defaults(func=cmd_list)
    a = actions.add_parser(
        "add",
        parents=[common],
        allow_abbrev=False,  # "--api-key SECRET" must fail, not read a variable called SECRET
        help="store a credential; the key comes from --api-key-env, stdin or a prompt, never an argument",
    )
    a.add_argument("name", help="lowercase letters, digits and '-' (at most 63)")
    a.add_argument("--kind", required=True, choices=["wandb", "swanlab"])
    a.add_argument("--host", default="", help="self-hosted server URL (https://...)")
    a.add_argument("--entity", default="", help="W&B team or user the runs are logged under (WANDB_ENTITY)")
    a.add_argument("--api-key-env", metavar="VAR", help="read the API key from this environment variable")
    a.set_defaults(func=cmd_add)
    a = actions.add_parser("delete", parents=[common], help="delete one of your credentials")
    a.add_argument("name")
    a.set_defaults(func=cmd_delete)
