"""``rlark exec JOB [WORKER] [--timeout S] -- CMD [ARG...]``: run one command in a Worker and exit with its exit code.

The console runs it through the WebTerminal's permission path and audit (``POST /api/v1/jobs/{name}/exec/``,
``terminal.services.command``); ``WORKER`` is a Pod name or its suffix (``rollout-1``), the Header without it. The
output (stdout and stderr together, as a terminal shows them) is printed when the command has ended. A command
that outlives ``--timeout`` seconds is killed and ``rlark exec`` exits with ``EXIT_TIMEOUT``.
"""

from __future__ import annotations

import argparse
import json
import sys
import urllib.parse

from rlark_cli.client import EXIT_TIMEOUT, EXIT_USAGE, Client, CLIError, emit, fail

DEFAULT_TIMEOUT = 60


def cmd_exec(client: Client, args: argparse.Namespace) -> int:
    if not args.exec_command:
        raise CLIError("rlark exec needs a command after --: rlark exec JOB [WORKER] -- CMD", code=EXIT_USAGE)
    body = {"command": args.exec_command, "worker": args.worker or "", "timeout": args.timeout}
    status, data = client.request(
        "POST",
        f"jobs/{urllib.parse.quote(args.name, safe='')}/exec/",
        json.dumps(body).encode("utf-8"),
        "application/json",
    )
    if status != 200 or not isinstance(data, dict):
        raise fail(status, data, f"exec in {args.name}")
    if emit(args, data):
        return _code(data)
    sys.stdout.write(data.get("output") or "")
    sys.stdout.flush()
    if data.get("droppedBytes"):
        print(f"rlark: {data['droppedBytes']} more bytes of output were dropped", file=sys.stderr)
    if data.get("timedOut"):
        print(f"Error: the command ran longer than {args.timeout} s and was stopped", file=sys.stderr)
    return _code(data)


def _code(data: dict) -> int:
    code = data.get("exitCode")
    if data.get("timedOut") or code is None:
        return EXIT_TIMEOUT
    return int(code) & 0xFF


def add_commands(sub: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:
    """Register ``rlark exec`` (what follows ``--`` is taken apart by ``rlark_cli.main.parse_args``)."""
    p = sub.add_parser("exec", parents=[common], help="run a command in a Worker; exit with its exit code")
    p.add_argument("name", metavar="JOB")
    p.add_argument("worker", nargs="?", metavar="WORKER", help="Pod name or its suffix (rollout-1); default Header")
    p.add_argument("--timeout", type=int, default=DEFAULT_TIMEOUT, help="seconds before the command is stopped")
    p.set_defaults(func=cmd_exec, exec_command=[])
