"""``rlark logs JOB [WORKER] [-f] [--previous] [--tail N] [--timestamps] [--all-workers]``: a Worker's ``main`` log
through the same REST endpoint the Logs tab's links use (``GET /api/v1/jobs/{name}/logs/``), so the same
permission check and the same archived copy of a finished job apply.

``WORKER`` is a Pod name or its part after ``<job>-`` (``rollout-1``); without it the Header. ``-f`` keeps reading
every ``--interval`` seconds and prints only the lines that are new (the last line printed is found again in the
next read); ``--all-workers`` reads every Worker of the job and prefixes each line with ``[pod]``, as ``kubectl logs
--prefix`` does. ``--timestamps`` asks the console for each line's time where the runtime records one.
"""

from __future__ import annotations

import argparse
import sys
import time
import urllib.parse

from rlark_cli.client import EXIT_NOT_FOUND, EXIT_USAGE, Client, CLIError, fail
from rlark_cli.get import fetch_job

FOLLOW_INTERVAL = 2.0
FOLLOW_WINDOW = 1000  # lines read on each look while following
MAX_TAIL = 100000  # what the API serves at most (tail=all)


def _log(client: Client, job: str, pod: str, tail: int | None, args: argparse.Namespace) -> list[str]:
    params = {"pod": pod, "tail": "all" if tail is None else str(tail)}
    if args.previous:
        params["previous"] = "true"
    if args.timestamps:
        params["timestamps"] = "true"
    path = f"jobs/{urllib.parse.quote(job, safe='')}/logs/?{urllib.parse.urlencode(params)}"
    status, text = client.request("GET", path)
    if status != 200:
        raise fail(status, text, f"logs {job} {pod}")
    return str(text or "").splitlines()


def new_lines(before: list[str], now: list[str]) -> list[str]:
    """The lines of ``now`` (the log's last lines, read again) that come after what ``before`` ended with: the
    last lines of ``before`` are looked for in ``now`` from its end (up to 5 lines must agree); all of ``now``
    when they are not there (the window moved past them, or the log started again)."""
    if not before:
        return now
    probe = before[-min(5, len(before)) :]
    for end in range(len(now), len(probe) - 1, -1):
        if now[end - len(probe) : end] == probe:
            return now[end:]
    return now


def _pods(client: Client, args: argparse.Namespace) -> list[str]:
    """The Worker names to read: every Worker (``--all-workers``), the one named, or the Header."""
    if not args.all_workers and args.worker:
        return [args.worker if args.worker.startswith(f"{args.name}-") else f"{args.name}-{args.worker}"]
    workers = (fetch_job(client, args.name, f"logs {args.name}").get("status") or {}).get("workers") or []
    if not workers:
        raise CLIError(f"job {args.name} has no Workers yet", code=EXIT_NOT_FOUND)
    if args.all_workers:
        return [w["name"] for w in sorted(workers, key=lambda w: w.get("rank", 0))]
    head = min(workers, key=lambda w: w.get("rank", 0))
    return [head["name"]]


def cmd_logs(client: Client, args: argparse.Namespace) -> int:
    if args.tail is not None and not 0 <= args.tail <= MAX_TAIL:
        raise CLIError(f"--tail must be between 0 and {MAX_TAIL}", code=EXIT_USAGE)
    pods = _pods(client, args)
    prefix = len(pods) > 1 or args.all_workers
    seen: dict[str, list[str]] = {}
    for pod in pods:
        seen[pod] = _log(client, args.name, pod, None if args.tail is None else args.tail or None, args)
        _print(pod, seen[pod], prefix)
    while args.follow:
        time.sleep(args.interval)
        for pod in pods:
            now = _log(client, args.name, pod, FOLLOW_WINDOW, args)
            _print(pod, new_lines(seen[pod], now), prefix)
            seen[pod] = now
    return 0


def _print(pod: str, lines: list[str], prefix: bool) -> None:
    for line in lines:
        print(f"[{pod}] {line}" if prefix else line)
    sys.stdout.flush()


def add_commands(sub: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:
    """Register ``rlark logs``."""
    p = sub.add_parser("logs", parents=[common], help="print a Worker's log (kubectl logs)")
    p.add_argument("name", metavar="JOB")
    p.add_argument("worker", nargs="?", metavar="WORKER", help="Pod name or its suffix (rollout-1); default Header")
    p.add_argument("-f", "--follow", action="store_true", help="keep printing new lines until Ctrl-C")
    p.add_argument("-p", "--previous", action="store_true", help="the previous container instance (after a restart)")
    p.add_argument("--tail", type=int, help="the last N lines (default: all, up to 100000; 0 = all)")
    p.add_argument("--timestamps", action="store_true", help="each line's time where the runtime records one")
    p.add_argument("--all-workers", action="store_true", help="every Worker of the job, each line prefixed [pod]")
    p.add_argument("--interval", type=float, default=FOLLOW_INTERVAL, help="seconds between two looks (-f)")
    p.set_defaults(func=cmd_logs)
