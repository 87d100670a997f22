"""The job commands of ``rlark``: validate, apply, stop/start/restart/delete, approve, checkpoints, resume and plan
(get, describe and wait: :mod:`rlark_cli.get`)."""

from __future__ import annotations

import argparse
import json
import sys
import urllib.parse
from pathlib import Path

import yaml

from rlark_cli.apply_check import unchanged_finished
from rlark_cli.client import EXIT_INVALID, EXIT_USAGE, Client, CLIError, emit, fail, problems_text

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
    return 0 if data.get("valid") else EXIT_INVALID


def cmd_apply(client: Client, args) -> int:
    body, ctype, text = job_body(args)
    name = job_name_of(text)
    current = None
    if name:
        status, found = client.request("GET", f"jobs/{urllib.parse.quote(name, safe='')}/")
        current = found if status == 200 and isinstance(found, dict) else None
    if current is not None and not args.restart and unchanged_finished(client, current, body, ctype, args):
        print(f"job/{name} unchanged: it has finished ({current.get('phase')}), so nothing was done.")
        print(f"To run it again: rlark restart job {name}")
        return 0
    if current is not None:
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


def action_target(args: argparse.Namespace) -> str:
    """The job an action names: ``rlark stop job NAME`` (kubectl's grammar) or ``rlark stop NAME`` (the shortcut);
    for ``rlark delete -f FILE`` the ``metadata.name`` of the file."""
    words = list(args.target or [])
    if words[:1] in (["job"], ["jobs"]) and len(words) == 2:
        words = words[1:]
    if getattr(args, "file", None):
        if words:
            raise CLIError("give either -f FILE or a job name, not both", code=EXIT_USAGE)
        name = job_name_of(read_file(args.file))
        if not name:
            raise CLIError(f"{args.file} names no job (metadata.name)", code=EXIT_INVALID)
        return name
    if len(words) != 1:
        raise CLIError(f"usage: rlark {args.command} job NAME (or rlark {args.command} NAME)", code=EXIT_USAGE)
    return words[0]


def cmd_action(client: Client, args) -> int:
    args.name = action_target(args)
    name = urllib.parse.quote(args.name, safe="")
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
        return 0 if status == 200 and data.get("valid") else EXIT_INVALID
    print(f"num_nodes: {data.get('num_nodes')}  workers: {data.get('workers')}")
    for r in data.get("roles") or []:
        head = " (header)" if r.get("head") else ""
        gpus = "" if r.get("gpus") is None else f"  gpus/worker {r['gpus']}"
        print(f"  {r['name']}{head}: {r['replicas']} worker(s), ranks {r['node_ranks']}, role {r['role']}{gpus}")
    text = problems_text({"problems": data.get("problems") or [], "warnings": data.get("warnings") or []})
    if text:
        print(text)
    return 0 if status == 200 and data.get("valid") else EXIT_INVALID


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

    for action in ("stop", "start", "restart", "delete"):
        p = sub.add_parser(action, parents=[common], help=f"{action} a job: {action} job NAME (or {action} NAME)")
        p.add_argument("target", nargs="*", metavar="job NAME", help="the job: job NAME, or only NAME")
        if action == "delete":
            p.add_argument("-f", "--file", help="delete the job this job file names (its metadata.name)")
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
