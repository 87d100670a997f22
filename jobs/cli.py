"""``rlark``: command-line client of the RLark Console REST API (stdlib ``urllib`` + PyYAML only).

Connection: ``--url``/``--token`` options, else ``RLARK_URL``/``RLARK_TOKEN``, else ``~/.config/rlark/config.yaml``
(``url: http://127.0.0.1:8000`` and ``token: rlk_...``; tokens are created on the account page or with
``accounts.authentication.issue_token``). Messages follow ``--lang`` / ``RLARK_LANG`` / ``LANG`` (zh or en).

Commands::

    rlark validate -f job.yaml [--rlinf rlinf.yaml]     # exit 1 when invalid
    rlark apply -f job.yaml [--rlinf rlinf.yaml] [--restart]   # create, or update when the job exists
    rlark get jobs [--phase P] [--owner U] [--search S]
    rlark describe job NAME
    rlark stop|start|restart|delete NAME
    rlark plan -f rlinf.yaml
    -o json|yaml on any command prints the API's answer as JSON/YAML.

Exit codes: 0 success, 1 failure (invalid job, HTTP error, unreachable server), 2 usage errors.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Any

import yaml

CONFIG_PATH = Path("~/.config/rlark/config.yaml")
TIMEOUT = 60


class CLIError(Exception):
    """A failure to report (message already readable); ``body`` is the API answer when there is one."""

    def __init__(self, message: str, body: Any = None):
        super().__init__(message)
        self.body = body


class Client:
    def __init__(self, url: str, token: str, lang: str):
        self.url = url.rstrip("/")
        self.token = token
        self.lang = lang

    def request(self, method: str, path: str, body: bytes | None = None, content_type: str = "") -> tuple[int, Any]:
        """-> (status, decoded JSON body or text). Raises CLIError when the server cannot be reached."""
        headers = {"Accept": "application/json", "Accept-Language": self.lang}
        if self.token:
            headers["Authorization"] = f"Token {self.token}"
        if content_type:
            headers["Content-Type"] = content_type
        req = urllib.request.Request(f"{self.url}/api/v1/{path.lstrip('/')}", data=body, method=method, headers=headers)
        try:
            with urllib.request.urlopen(req, timeout=TIMEOUT) as resp:
                status, raw = resp.status, resp.read()
        except urllib.error.HTTPError as exc:
            status, raw = exc.code, exc.read()
        except (urllib.error.URLError, OSError) as exc:
            reason = getattr(exc, "reason", exc)
            raise CLIError(f"cannot reach {self.url}: {reason}")
        text = raw.decode("utf-8", "replace")
        try:
            return status, json.loads(text) if text else None
        except ValueError:
            return status, text


def load_config(args: argparse.Namespace) -> Client:
    url = args.url or os.environ.get("RLARK_URL", "")
    token = args.token or os.environ.get("RLARK_TOKEN", "")
    path = Path(os.environ.get("RLARK_CONFIG", str(CONFIG_PATH))).expanduser()
    if (not url or not token) and path.exists():
        try:
            data = yaml.safe_load(path.read_text()) or {}
        except (OSError, yaml.YAMLError) as exc:
            raise CLIError(f"cannot read {path}: {exc}")
        if isinstance(data, dict):
            url = url or str(data.get("url") or "")
            token = token or str(data.get("token") or "")
    if not url:
        raise CLIError(f"no server: set RLARK_URL or url in {path}")
    if not token:
        raise CLIError(f"no token: set RLARK_TOKEN or token in {path}")
    lang = args.lang or os.environ.get("RLARK_LANG") or os.environ.get("LANG", "")
    return Client(url, token, "zh-hans" if lang.lower().startswith("zh") else "en")


def read_file(name: str) -> str:
    if name == "-":
        return sys.stdin.read()
    try:
        return Path(name).read_text(encoding="utf-8")
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


def emit(args: argparse.Namespace, body: Any) -> bool:
    """Print ``body`` as JSON/YAML when ``-o`` asks for it; True when printed."""
    if args.output == "json":
        print(json.dumps(body, ensure_ascii=False, indent=2))
        return True
    if args.output == "yaml":
        print(yaml.safe_dump(body, allow_unicode=True, sort_keys=False), end="")
        return True
    return False


def problems_text(body: Any) -> str:
    lines = []
    if isinstance(body, dict):
        for key, label in (("errors", "error"), ("warnings", "warning"), ("problems", "problem")):
            for p in body.get(key) or []:
                path = f" {p.get('path')}:" if p.get("path") else ""
                lines.append(f"  {label} [{p.get('code')}]{path} {p.get('message')}")
        if not lines and body.get("detail"):
            lines.append(f"  {body['detail']}")
    elif body:
        lines.append(f"  {str(body)[:500]}")
    return "\n".join(lines)


def fail(status: int, body: Any, what: str) -> CLIError:
    return CLIError(f"{what} failed: HTTP {status}\n{problems_text(body)}".rstrip(), body)


# --- commands --------------------------------------------------------------------------------------------------------


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
    header = ("NAME", "DISPLAY NAME", "PHASE", "WORKERS", "ROLES", "OWNER", "CREATED")
    table = [header] + [
        (
            r["name"],
            r.get("display_name") or "-",
            r["phase"] + (" (stopped)" if r.get("stopped") and r["phase"] != "Stopped" else ""),
            str(r.get("workers", "")),
            str(r.get("roles", "")),
            r.get("owner", ""),
            str(r.get("created_at", ""))[:19].replace("T", " "),
        )
        for r in rows
    ]
    widths = [max(len(row[i]) for row in table) for i in range(len(header))]
    for row in table:
        print("  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip())
    return 0


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


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="rlark", description="RLark Console command-line client")
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--url", help="console URL (default: RLARK_URL or the config file)")
    common.add_argument("--token", help="API token (default: RLARK_TOKEN or the config file)")
    common.add_argument("--lang", help="zh or en (message language)")
    common.add_argument("-o", "--output", choices=["json", "yaml"], help="print the API answer as JSON or YAML")
    sub = parser.add_subparsers(dest="command", required=True)

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

    p = sub.add_parser("plan", parents=[common], help="propose roles for an RLinf config")
    p.add_argument("-f", "--file", required=True)
    p.set_defaults(func=cmd_plan)

    from sshgate.cli import add_commands as add_ssh_commands  # rlark ssh, rlark ssh-config (issue 12)

    add_ssh_commands(sub, common)
    return parser


def parse_args(argv: list[str]) -> argparse.Namespace:
    """The parsed command line. ``rlark ssh JOB -- CMD``: what follows ``--`` is the command, never the Worker
    (argparse alone would fill the optional Worker with CMD's first word)."""
    after: list[str] | None = None
    if argv[:1] == ["ssh"] and "--" in argv:
        cut = argv.index("--")
        argv, after = argv[:cut], argv[cut + 1 :]
    args = build_parser().parse_args(argv)
    if after is not None:
        args.command = [*(args.command or []), *after]
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(list(sys.argv[1:] if argv is None else argv))
    try:
        client = load_config(args)
        return args.func(client, args)
    except CLIError as exc:
        if args.output and exc.body is not None:
            emit(args, exc.body)
        print(f"Error: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:  # pragma: no cover
        return 130


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
