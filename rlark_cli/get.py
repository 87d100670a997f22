"""``rlark get``, ``rlark describe`` and ``rlark wait``: reading jobs the way ``kubectl`` reads objects.

- ``rlark get jobs [--phase P] [--owner U] [--search S] [-o wide|json|yaml] [-w]`` lists jobs;
  ``rlark get job NAME`` prints one row. ``-o wide`` adds the nodes, the restarts and the message; ``-w`` keeps
  watching (every ``--interval`` seconds, 2 by default) and prints a row again each time it changes, until Ctrl-C.
- ``rlark describe job NAME``: the job, its Tasks, each Worker's Pod IP, node, restarts and phase, its conditions
  and its recent events (the conditions' transitions, newest last, as ``kubectl describe`` ends with Events).
- ``rlark wait job NAME --for=phase=Running --timeout=60s``: exit 0 once the job's phase is the one asked for,
  ``EXIT_TIMEOUT`` when the time ran out, ``EXIT_NOT_FOUND`` for a job that does not exist.
"""

from __future__ import annotations

import argparse
import re
import sys
import time
import urllib.parse
from typing import Any

from rlark_cli.client import EXIT_NOT_FOUND, EXIT_TIMEOUT, EXIT_USAGE, Client, CLIError, emit, fail, print_table

WATCH_INTERVAL = 2.0
MAX_WAIT_SECONDS = 7 * 24 * 3600
PHASES = ("Pending", "Running", "Succeeded", "Failed", "Stopped", "Unknown")


def progress_text(job: dict) -> str:
    """The ``progress`` line the API gave for ``job`` (in the client's language), ``-`` before the first step."""
    progress = job.get("progress")
    return str(progress.get("text") or "-") if isinstance(progress, dict) else "-"


def fetch_job(client: Client, name: str, what: str) -> dict:
    """``GET /api/v1/jobs/NAME/`` (the job detail); raises CLIError (exit code from the HTTP status)."""
    status, data = client.request("GET", f"jobs/{urllib.parse.quote(name, safe='')}/")
    if status != 200 or not isinstance(data, dict):
        raise fail(status, data, what)
    return data


def list_jobs(client: Client, args: argparse.Namespace) -> list[dict]:
    """Every job the filters select (all pages of ``GET /api/v1/jobs/``)."""
    params = {k: v for k, v in (("phase", args.phase), ("owner", args.owner), ("search", args.search)) if v}
    params["limit"] = "200"
    rows: list[dict] = []
    path = "jobs/?" + urllib.parse.urlencode(params)
    while path:
        status, data = client.request("GET", path)
        if status != 200 or not isinstance(data, dict):
            raise fail(status, data, "get jobs")
        rows.extend(data.get("results") or [])
        nxt = data.get("next")
        path = nxt.split("/api/v1/", 1)[1] if nxt and "/api/v1/" in nxt else ""
    return rows


HEADER = ("NAME", "DISPLAY NAME", "PHASE", "PROGRESS", "WORKERS", "ROLES", "OWNER", "CREATED")
WIDE = ("NODES", "RESTARTS", "MESSAGE")


def row_of(job: dict, wide: bool) -> tuple[str, ...]:
    """One table row of ``job`` (a list entry or a detail); the wide columns need the detail's ``status``."""
    row = (
        job["name"],
        job.get("display_name") or "-",
        job["phase"] + (" (stopped)" if job.get("stopped") and job["phase"] != "Stopped" else ""),
        progress_text(job),
        str(job.get("workers", "")),
        str(job.get("roles", "")),
        job.get("owner", ""),
        str(job.get("created_at", ""))[:19].replace("T", " "),
    )
    if not wide:
        return row
    workers = (job.get("status") or {}).get("workers") or []
    nodes = ",".join(sorted({w["node"] for w in workers if w.get("node")})) or "-"
    restarts = str(sum(int(w.get("restarts") or 0) for w in workers))
    return (*row, nodes, restarts, (job.get("message") or "-").replace("\n", " ")[:120])


def _rows(client: Client, args: argparse.Namespace, wide: bool) -> list[dict]:
    if args.name:
        return [fetch_job(client, args.name, f"get job {args.name}")]
    rows = list_jobs(client, args)
    if wide:  # the nodes and restarts are in each job's detail
        rows = [fetch_job(client, r["name"], f"get job {r['name']}") for r in rows]
    return rows


def cmd_get(client: Client, args: argparse.Namespace) -> int:
    if args.resource == "job" and not args.name and not args.watch:
        raise CLIError("rlark get job needs a NAME (rlark get jobs lists them all)", code=EXIT_USAGE)
    wide = args.output == "wide"
    rows = _rows(client, args, wide)
    if not args.watch:
        if emit(args, rows[0] if args.name else rows):
            return 0
        print_table([HEADER + (WIDE if wide else ())] + [row_of(r, wide) for r in rows])
        return 0
    return _watch(client, args, rows, wide)


def _watch(client: Client, args: argparse.Namespace, rows: list[dict], wide: bool) -> int:
    """``-w``: the table once, then each row again whenever it changed (a job that disappears is printed as
    ``Deleted``), until interrupted; with ``-o json|yaml`` every changed job is printed as a document."""
    header = HEADER + (WIDE if wide else ())
    widths = [max(len(h), 16 if i == 0 else 10) for i, h in enumerate(header)]
    seen: dict[str, tuple[str, ...]] = {}

    def show(row: tuple[str, ...], job: dict) -> None:
        if not emit(args, job):
            print("  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip())
        sys.stdout.flush()

    if not args.output or args.output == "wide":
        show(header, {})
    while True:
        current = {r["name"]: r for r in rows}
        for name, job in current.items():
            row = row_of(job, wide)
            if seen.get(name) != row:
                seen[name] = row
                show(row, job)
        for name in [n for n in seen if n not in current]:
            gone = (name, "-", "Deleted", *["-"] * (len(header) - 3))
            show(gone, {"name": name, "phase": "Deleted"})
            del seen[name]
        time.sleep(args.interval)
        try:
            rows = _rows(client, args, wide)
        except CLIError as exc:
            if args.name and exc.code == EXIT_NOT_FOUND:  # the watched job was deleted
                rows = []
            else:
                raise


def cmd_describe(client: Client, args: argparse.Namespace) -> int:
    data = fetch_job(client, args.name, f"describe job {args.name}")
    if emit(args, data):
        return 0
    st = data.get("status") or {}
    print(f"Name:         {data['name']}")
    print(f"Display name: {data.get('display_name') or '-'}")
    print(f"Owner:        {data.get('owner')}")
    print(f"Phase:        {data.get('phase')}{' (stopped)' if data.get('stopped') else ''}")
    if data.get("message"):
        print(f"Message:      {data['message']}")
    print(f"Attempt:      {data.get('attempt')}")
    print(f"Workers:      {data.get('workers')} in {data.get('roles')} roles")
    print(f"Progress:     {progress_text(data)}")
    print(f"Created:      {data.get('created_at')}")
    tasks = st.get("tasks") or []
    if tasks:
        print("Tasks:")
        for t in tasks:
            line = f"  {t.get('name')}  {t.get('phase')}  {t.get('ready', 0)}/{t.get('replicas', 0)} ready"
            print(line + (f"  {t['message']}" if t.get("message") else ""))
    workers = st.get("workers") or []
    if workers:
        print("Workers:")
        for w in workers:
            phase = w.get("phaseLabel") or w.get("phase")  # the label the Workers tab shows (Completed, not Stopped)
            print(
                f"  {w.get('name')}  rank {w.get('rank')}  {phase}  node {w.get('node') or '-'}"
                f"  ip {w.get('ip') or '-'}  restarts {w.get('restarts') or 0}"
            )
    print("YAML:")
    print("  " + (data.get("yaml") or "").rstrip().replace("\n", "\n  "))
    conditions = st.get("conditions") or []
    if conditions:
        print("Conditions:")
        print_table(
            [("  TYPE", "STATUS", "REASON", "LAST TRANSITION")]
            + [
                (f"  {c.get('type')}", str(c.get("status")), c.get("reason") or "-", _time(c.get("lastTransitionTime")))
                for c in conditions
            ]
        )
    events = recent_events(data)
    print("Events:" + ("" if events else "       <none>"))
    for when, reason, message in events:
        print(f"  {when}  {reason}  {message}")
    return 0


def _time(value: Any) -> str:
    return str(value or "-")[:19].replace("T", " ")


def recent_events(data: dict, limit: int = 10) -> list[tuple[str, str, str]]:
    """``[(time, reason, message)]``: the job's last ``limit`` events, oldest first: its creation, its start and
    end, and each condition's last transition (the reason the sync gave it and its message)."""
    out: list[tuple[str, str, str]] = []
    for key, reason in (("created_at", "Created"), ("started_at", "Started"), ("finished_at", "Finished")):
        if data.get(key):
            out.append((_time(data[key]), reason, data.get("message", "") if key == "finished_at" else ""))
    for c in (data.get("status") or {}).get("conditions") or []:
        if c.get("lastTransitionTime"):
            word = f"{c.get('type')}={c.get('status')}"
            out.append((_time(c["lastTransitionTime"]), c.get("reason") or word, f"{word} {c.get('message') or ''}"))
    out.sort(key=lambda e: e[0])
    return [(when, reason, message.strip()) for when, reason, message in out[-limit:]]


DURATION = re.compile(r"^(\d+(?:\.\d+)?)(ms|s|m|h)?$")


def parse_duration(text: str) -> float:
    """``"60s"``, ``"2m"``, ``"1h"``, ``"500ms"`` or plain seconds -> seconds (at most a week); ValueError
    otherwise."""
    match = DURATION.match(text.strip())
    if not match:
        raise ValueError(f"invalid duration {text!r} (for example 60s, 5m, 1h)")
    value = float(match.group(1)) * {"ms": 0.001, "s": 1, "m": 60, "h": 3600, None: 1}[match.group(2)]
    if value > MAX_WAIT_SECONDS:
        raise ValueError(f"duration {text!r} is longer than a week")
    return value


def cmd_wait(client: Client, args: argparse.Namespace) -> int:
    key, _, wanted = args.condition.partition("=")
    if key != "phase" or wanted not in PHASES:
        raise CLIError(f"--for must be phase=<{'|'.join(PHASES)}>, not {args.condition!r}", code=EXIT_USAGE)
    try:
        timeout = parse_duration(args.timeout)
    except ValueError as exc:
        raise CLIError(str(exc), code=EXIT_USAGE)
    deadline = time.monotonic() + timeout
    while True:
        phase = fetch_job(client, args.name, f"wait job {args.name}").get("phase")
        if phase == wanted:
            print(f"job/{args.name} condition met (phase={wanted})")
            return 0
        if time.monotonic() >= deadline:
            print(
                f"Error: timed out after {args.timeout} waiting for job/{args.name} phase={wanted} (now {phase})",
                file=sys.stderr,
            )
            return EXIT_TIMEOUT
        time.sleep(min(args.interval, max(0.1, deadline - time.monotonic())))


def add_commands(sub: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:
    """Register get, describe and wait on the ``rlark`` parser."""
    p = sub.add_parser("get", parents=[common], help="list jobs, or show one (kubectl get)")
    p.add_argument("resource", choices=["jobs", "job"])
    p.add_argument("name", nargs="?", help="one job's name")
    p.add_argument("--phase")
    p.add_argument("--owner")
    p.add_argument("--search")
    p.add_argument("-w", "--watch", action="store_true", help="keep watching; print a row again when it changes")
    p.add_argument("--interval", type=float, default=WATCH_INTERVAL, help="seconds between two looks (-w)")
    p.set_defaults(func=cmd_get)

    p = sub.add_parser("describe", parents=[common], help="show one job with its Workers, conditions and events")
    p.add_argument("resource", choices=["job", "jobs"])
    p.add_argument("name")
    p.set_defaults(func=cmd_describe)

    p = sub.add_parser("wait", parents=[common], help="wait until a job reaches a phase (kubectl wait)")
    p.add_argument("resource", choices=["job", "jobs"])
    p.add_argument("name")
    p.add_argument("--for", dest="condition", required=True, help="phase=Running (or Succeeded, Failed, ...)")
    p.add_argument("--timeout", default="30s", help="how long to wait: 60s, 5m, 1h (default 30s)")
    p.add_argument("--interval", type=float, default=1.0, help="seconds between two looks")
    p.set_defaults(func=cmd_wait)
