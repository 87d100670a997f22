"""The job commands of ``rlark``: validate, apply, get, describe, stop/start/restart/delete, approve, checkpoints,
resume and plan."""

from __future__ import annotations

import argparse
import json
import sys
import urllib.parse
from pathlib import Path

import yaml

from rlark_cli.client import Client, CLIError, emit, fail, print_table, problems_text

MAX_DOCUMENT_BYTES = 1 << 20  # the console's limit of a Job document or an RLinf config (1 MiB)


def read_file(name: str) -> str:
    """The text of a job file or an RLinf config (``-``: standard input).

    Its size is checked before it is read whole or parsed: a file over ``MAX_DOCUMENT_BYTES`` is refused at once
    (CLIError "... is larger than 1 MiB"), as the console would refuse it, instead of spending seconds parsing it.
    Raises CLIError when the file cannot be read or is not UTF-8."""
    try:
        if name == "-":
            stream = getattr(sys.stdin, "buffer", None)  # a text-only stdin (a test's StringIO) has no buffer
            data = stream.read(MAX_DOCUMENT_BYTES + 1) if stream else sys.stdin.read(MAX_DOCUMENT_BYTES + 1).encode()
        else:
            path = Path(name)
            if path.stat().st_size > MAX_DOCUMENT_BYTES:
                raise CLIError(f"{name} is larger than 1 MiB: the console refuses a job document over 1 MiB")
            with path.open("rb") as f:
                data = f.read(MAX_DOCUMENT_BYTES + 1)
        if len(data) > MAX_DOCUMENT_BYTES:
            raise CLIError(f"{name} is larger than 1 MiB: the console refuses a job document over 1 MiB")
        return data.decode("utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise CLIError(f"cannot read {name}: {exc}")


def job_body(args: argparse.Namespace) -> tuple[bytes, str, str]:
    """(request body, content type, file text) for a job file (YAML or JSON); wrapped with the RLinf config when
    ``--rlinf`` is given."""
    text = read_file(args.file)
    if getattr(args, "rlinf", None):
        wrapper = {"yaml": text, "rlinf_config": read_file(args.rlinf)}
        return json.dumps(wrapper).encode(), "application/json", text
    return text.encode("utf-8"), "application/yaml", text


def job_name_of(text: str) -> str:
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError:
        return ""
    if isinstance(data, dict) and isinstance(data.get("metadata"), dict):
        return str(data["metadata"].get("name") or "")
    return ""


def cmd_validate(client: Client, args) -> int:
    body, ctype, _ = job_body(args)
    status, data = client.request("POST", "jobs/validate/", body, ctype)
    if status not in (200, 400) or not isinstance(data, dict):
        raise fail(status, data, "validate")
    if not emit(args, data):
        print("valid" if data.get("valid") else "invalid", f"({data.get('workers', 0)} workers)")
        text = problems_text(data)
        if text:
            print(text)
    return 0 if data.get("valid") else 1


def cmd_apply(client: Client, args) -> int:
    body, ctype, text = job_body(args)
    name = job_name_of(text)
    exists = False
    if name:
        status, _ = client.request("GET", f"jobs/{urllib.parse.quote(name)}/")
        exists = status == 200
    if exists:
        query = "?restart=1" if args.restart else ""
        status, data = client.request("PUT", f"jobs/{urllib.parse.quote(name)}/{query}", body, ctype)
        verb = "configured"
    else:
        status, data = client.request("POST", "jobs/", body, ctype)
        verb = "created"
    if status not in (200, 201):
        raise fail(status, data, "apply")
    if not emit(args, data):
        print(f"job/{data['name']} {verb}")
        text = problems_text({"warnings": data.get("warnings") or []})
        if text:
            print(text)
        if data.get("safety_hold"):
            print(data["safety_hold"])
    return 0


SAFETY_ITEMS = ("compatibility", "site", "stop", "limits", "data")  # jobs.control.safety.ITEMS, in order


def _ask(question: str) -> bool:
    return input(f"{question} [y/N] ").strip().lower() in ("y", "yes")


def cmd_approve(client: Client, args) -> int:
    """``rlark approve NAME``: the safety approval of a robot job (``POST .../approve/``). Each of the five items is
    confirmed by its flag (or ``--all``); without flags, on a terminal, each item is asked with the console's text
    (``GET .../approve/``), then the stop plan unless ``--stop-plan`` / ``--stop-plan-file`` gives it. The server
    says what is missing (not a safety approver, the submitter, an item not confirmed, no stop plan)."""
    path = f"jobs/{urllib.parse.quote(args.name)}/approve/"
    items = [key for key in SAFETY_ITEMS if args.all or getattr(args, f"confirm_{key}")]
    plan = read_file(args.stop_plan_file) if args.stop_plan_file else (args.stop_plan or "")
    interactive = sys.stdin.isatty() and not args.all and not items
    if interactive:
        status, gate = client.request("GET", path)
        if status != 200 or not isinstance(gate, dict):
            raise fail(status, gate, f"approve {args.name}")
        for reason in gate.get("reasons") or []:
            print(f"  {reason.get('message')}")
        items = [i["key"] for i in gate.get("items") or [] if _ask(i.get("text", i["key"]))]
    if not plan and sys.stdin.isatty():
        plan = input("stop plan: ")
    payload = json.dumps({"items": items, "stopPlan": plan}).encode("utf-8")
    status, data = client.request("POST", path, payload, "application/json")
    if status != 200:
        raise fail(status, data, f"approve {args.name}")
    if not emit(args, data):
        approval = (data or {}).get("approval") or {}
        print(f"job/{args.name} approved by {approval.get('approver')} at {approval.get('approvedAt')}")
    return 0


def cmd_get(client: Client, args) -> int:
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
    if emit(args, rows):
        return 0
    header = ("NAME", "DISPLAY NAME", "PHASE", "PROGRESS", "WORKERS", "ROLES", "OWNER", "CREATED")
    table = [header] + [
        (
            r["name"],
            r.get("display_name") or "-",
            r["phase"] + (" (stopped)" if r.get("stopped") and r["phase"] != "Stopped" else ""),
            progress_text(r),
            str(r.get("workers", "")),
            str(r.get("roles", "")),
            r.get("owner", ""),
            str(r.get("created_at", ""))[:19].replace("T", " "),
        )
        for r in rows
    ]
    print_table(table)
    return 0


def progress_text(job: dict) -> str:
    """The ``progress`` line the API gave for ``job`` (in the client's language), ``-`` before the first step."""
    progress = job.get("progress")
    return str(progress.get("text") or "-") if isinstance(progress, dict) else "-"


def cmd_describe(client: Client, args) -> int:
    status, data = client.request("GET", f"jobs/{urllib.parse.quote(args.name)}/")
    if status != 200 or not isinstance(data, dict):
        raise fail(status, data, f"describe job {args.name}")
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
            print(f"  {w.get('name')}  rank {w.get('rank')}  {phase}  node {w.get('node') or '-'}")
    print("YAML:")
    print("  " + (data.get("yaml") or "").rstrip().replace("\n", "\n  "))
    return 0


def cmd_action(client: Client, args) -> int:
    name = urllib.parse.quote(args.name)
    if args.command == "delete":
        status, data = client.request("DELETE", f"jobs/{name}/")
    else:
        status, data = client.request("POST", f"jobs/{name}/{args.command}/")
    if status != 200:
        raise fail(status, data, f"{args.command} {args.name}")
    if not emit(args, data):
        past = {"stop": "stopped", "start": "started", "restart": "restarted", "delete": "deleted"}[args.command]
        print(f"job/{args.name} {past}")
    return 0


def cmd_checkpoints(client: Client, args) -> int:
    """``rlark checkpoints NAME``: the job's checkpoints, one line each (``GET .../checkpoints/``)."""
    status, data = client.request("GET", f"jobs/{urllib.parse.quote(args.name)}/checkpoints/")
    if status != 200 or not isinstance(data, dict):
        raise fail(status, data, f"checkpoints {args.name}")
    if emit(args, data):
        return 0
    if data.get("reasonText"):
        print(data["reasonText"])
    for c in data.get("checkpoints") or []:
        run = "this run" if c.get("current") else f"attempt {c.get('attempt')}"
        latest = "  (latest complete)" if c.get("path") == data.get("latestComplete") else ""
        print(f"  step {c.get('step')}  {c.get('stateLabel')}  {c.get('sizeBytes')} B  {run}  {c.get('path')}{latest}")
        for reason in c.get("reasons") or []:
            print(f"      {reason}")
    return 0


def cmd_resume(client: Client, args) -> int:
    """``rlark resume NAME [--checkpoint PATH|latest] [--run-script FILE]`` (``POST .../resume/``)."""
    body: dict = {"checkpoint": args.checkpoint}
    if args.run_script:
        body["runScript"] = read_file(args.run_script)
    payload = json.dumps(body).encode("utf-8")
    status, data = client.request("POST", f"jobs/{urllib.parse.quote(args.name)}/resume/", payload, "application/json")
    if status != 200:
        raise fail(status, data, f"resume {args.name}")
    if not emit(args, data):
        resume = (data or {}).get("resume") or {}
        print(f"job/{args.name} resuming from {resume.get('dir')} (step {resume.get('step')}) in a new run")
    return 0


def cmd_plan(client: Client, args) -> int:
    status, data = client.request("POST", "rlinf/plan/", read_file(args.file).encode("utf-8"), "application/yaml")
    if status not in (200, 400) or not isinstance(data, dict):
        raise fail(status, data, "plan")
    if emit(args, data):
        return 0 if status == 200 and data.get("valid") else 1
    print(f"num_nodes: {data.get('num_nodes')}  workers: {data.get('workers')}")
    for r in data.get("roles") or []:
        head = " (header)" if r.get("head") else ""
        gpus = "" if r.get("gpus") is None else f"  gpus/worker {r['gpus']}"
        print(f"  {r['name']}{head}: {r['replicas']} worker(s), ranks {r['node_ranks']}, role {r['role']}{gpus}")
    text = problems_text({"problems": data.get("problems") or [], "warnings": data.get("warnings") or []})
    if text:
        print(text)
    return 0 if status == 200 and data.get("valid") else 1


def add_commands(sub: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:
    """Register the job commands on the ``rlark`` parser."""
    p = sub.add_parser("validate", parents=[common], help="validate a job file")
    p.add_argument("-f", "--file", required=True, help="job YAML/JSON file, - for stdin")
    p.add_argument("--rlinf", help="RLinf config the run script uses (checks num_nodes and node ranks)")
    p.set_defaults(func=cmd_validate)

    p = sub.add_parser("apply", parents=[common], help="create a job, or update it when it exists")
    p.add_argument("-f", "--file", required=True)
    p.add_argument("--rlinf")
    p.add_argument("--restart", action="store_true", help="restart every Worker after updating")
    p.set_defaults(func=cmd_apply)

    p = sub.add_parser("get", parents=[common], help="list jobs")
    p.add_argument("resource", choices=["jobs", "job"])
    p.add_argument("--phase")
    p.add_argument("--owner")
    p.add_argument("--search")
    p.set_defaults(func=cmd_get)

    p = sub.add_parser("describe", parents=[common], help="show one job")
    p.add_argument("resource", choices=["job", "jobs"])
    p.add_argument("name")
    p.set_defaults(func=cmd_describe)

    for action in ("stop", "start", "restart", "delete"):
        p = sub.add_parser(action, parents=[common], help=f"{action} a job")
        p.add_argument("name")
        p.set_defaults(func=cmd_action)

    p = sub.add_parser("approve", parents=[common], help="give the safety approval of a robot job")
    p.add_argument("name")
    p.add_argument("--all", action="store_true", help="confirm all five safety items")
    for key, text in (
        ("compatibility", "device, firmware, driver, SDK, control mode and image compatibility"),
        ("site", "on-site operator, isolated area, access control and a named safety owner"),
        ("stop", "e-stop, power-off, reset and communication-loss handling, tested"),
        ("limits", "speed, force, travel and workspace limits and the stop conditions for abnormal motion"),
        ("data", "approval, audit and recovery plan for data and control commands"),
    ):
        p.add_argument(f"--{key}", dest=f"confirm_{key}", action="store_true", help=f"confirm: {text}")
    p.add_argument("--stop-plan", help="the stop plan (at most 4000 characters)")
    p.add_argument("--stop-plan-file", help="file with the stop plan, - for stdin")
    p.set_defaults(func=cmd_approve)

    p = sub.add_parser("checkpoints", parents=[common], help="list a job's checkpoints and their state")
    p.add_argument("name")
    p.set_defaults(func=cmd_checkpoints)

    p = sub.add_parser("resume", parents=[common], help="start a new run of a job from a complete checkpoint")
    p.add_argument("name")
    p.add_argument("--checkpoint", default="latest", help="checkpoint path (container path) or latest (default)")
    p.add_argument("--run-script", help="file with the run script to use instead of the proposed one")
    p.set_defaults(func=cmd_resume)

    p = sub.add_parser("plan", parents=[common], help="propose roles for an RLinf config")
    p.add_argument("-f", "--file", required=True)
    p.set_defaults(func=cmd_plan)
