"""``rlark ssh <job> [worker]`` and ``rlark ssh-config``: the ``rlark`` client's way to a Worker through the bastion.

No Django here: the CLI talks to ``GET /api/v1/ssh/`` with the user's API token and runs the system's OpenSSH
client. ``worker`` is a Worker name or its suffix (``rollout-1`` for ``<job>-rollout-1``); without it the Header.

Host keys: both commands first write the host keys the API publishes (the bastion's and each Worker's) into
``--known-hosts`` (default ``~/.ssh/rlark_known_hosts``), and the client checks them strictly on both hops, so a
fresh setup needs no "yes" to a fingerprint and a changed key is refused. Options given with ``ssh -o`` or ``-i``
reach only the last hop of ``ssh -J``, never the jump to the bastion (OpenSSH passes only ``-F`` and a few flags to
the ProxyJump child); so ``rlark ssh`` names the bastion hop with a ``ProxyCommand`` carrying its own options, and
``rlark ssh-config`` writes them into the bastion's ``Host`` entry.
"""

from __future__ import annotations

import argparse
import os
import shlex
import shutil
import sys
from pathlib import Path
from typing import Any

from rlark_cli.client import Client, CLIError, fail

BASTION_ALIAS = "rlark-bastion"
DEFAULT_KNOWN_HOSTS = "~/.ssh/rlark_known_hosts"
ENDED_PHASES = ("Succeeded", "Failed", "Stopped")  # a job in one of them has no Worker to reach


def _targets(client: Client, job: str = "") -> dict[str, Any]:
    status, body = client.request("GET", "ssh/" + (f"?job={job}" if job else ""))
    if status != 200 or not isinstance(body, dict):
        raise fail(status, body, f"job {job}" if job else "ssh targets")
    return body


def pick_worker(workers: list[dict], job: str, worker: str) -> dict | None:
    """The Worker ``worker`` names (full name or suffix after ``<job>-``), else the Header (rank 0)."""
    if worker:
        for w in workers:
            if w["pod"] in (worker, f"{job}-{worker}"):
                return w
        return None
    heads = [w for w in workers if w.get("head")] or sorted(workers, key=lambda w: w.get("rank", 0))
    return heads[0] if heads else None


def write_known_hosts(path: Path, lines: list[str]) -> Path:
    """Merge ``lines`` (OpenSSH ``known_hosts`` lines) into ``path``: a host they name gets exactly their key, other
    lines stay. The file is 0600 in a 0700 directory, replaced in one rename."""
    hosts = {line.split()[0] for line in lines if line.strip()}
    old = path.read_text().splitlines() if path.exists() else []
    kept = [line for line in old if not line.strip() or line.startswith("#") or line.split()[0] not in hosts]
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write("\n".join([*kept, *lines]) + "\n")
    os.replace(tmp, path)
    return path


def _config_value(value: str) -> str:
    """A path as an ssh_config / ``-o`` value (double-quoted when it has a space)."""
    return f'"{value}"' if " " in value else value


def _checked(known_hosts: Path, identity: str) -> list[tuple[str, str]]:
    """The client options for one hop: strict host key checking against ``known_hosts``, the identity if given."""
    options = [("UserKnownHostsFile", _config_value(str(known_hosts))), ("StrictHostKeyChecking", "yes")]
    if identity:
        options += [("IdentityFile", _config_value(str(Path(identity).expanduser()))), ("IdentitiesOnly", "yes")]
    return options


def proxy_command(ssh: str, body: dict, known_hosts: Path, identity: str) -> str:
    """``ProxyCommand`` for the bastion hop: ``ssh -W %h:%p`` with that hop's own options (see module docstring)."""
    hop = [ssh]
    for name, value in _checked(known_hosts, identity):
        hop += ["-o", f"{name}={value}"]
    hop += ["-p", str(body["port"]), f"{body['user']}@{body['host']}"]
    return " ".join(shlex.quote(arg).replace("%", "%%") for arg in hop) + " -W %h:%p"


def cmd_ssh(client: Client, args) -> int:
    body = _targets(client, args.name)
    target = pick_worker(body["workers"], args.name, args.worker or "")
    if target is None:
        phase = body.get("job_phase") or ""
        if phase == "Stopped":  # the API lists no Worker of a job that has ended
            raise CLIError(f"job {args.name} is stopped: start it again (rlark start job {args.name}) to reach it")
        if phase in ENDED_PHASES:
            raise CLIError(f"job {args.name} has finished (phase {phase}): its Workers no longer run")
        names = ", ".join(w["pod"] for w in body["workers"]) or "none yet"
        raise CLIError(f"job {args.name} has no Worker {args.worker or '(Header)'}; its Workers: {names}")
    ssh = shutil.which("ssh")
    if ssh is None:
        raise CLIError("no ssh client found: install OpenSSH (Debian: openssh-client)")
    known = write_known_hosts(Path(args.known_hosts).expanduser(), body.get("known_hosts") or [])
    argv = [ssh, "-o", f"ProxyCommand={proxy_command(ssh, body, known, args.identity or '')}"]
    for name, value in _checked(known, args.identity or ""):
        argv += ["-o", f"{name}={value}"]
    argv += [*args.ssh_args, target["pod"], *args.command]
    sys.stdout.flush()
    os.execv(ssh, argv)
    return 0  # pragma: no cover


def ssh_config_text(body: dict, url: str, known_hosts: Path | None = None, identity: str = "") -> str:
    """``~/.ssh/config`` entries: the bastion, then one Host per Worker with ProxyJump. With ``known_hosts`` (where
    :func:`write_known_hosts` put the published keys) both hops check host keys strictly against it."""
    checked = [f"    {name} {value}" for name, value in _checked(known_hosts, identity)] if known_hosts else []
    lines = [
        f"# RLark Console {url}: generated by `rlark ssh-config` (bastion host key {body['host_key_fingerprint']})",
        f"Host {BASTION_ALIAS}",
        f"    HostName {body['host']}",
        f"    Port {body['port']}",
        f"    User {body['user']}",
        "    ServerAliveInterval 30",
        *checked,
        "",
    ]
    pods = [w["pod"] for w in body["workers"]]
    for pod in pods:
        lines += [f"Host {pod}", f"    ProxyJump {BASTION_ALIAS}", "    User root", *checked, ""]
    if not pods:
        lines.append("# no running Workers (only jobs that are running or starting are listed)")
    return "\n".join(lines)


def cmd_ssh_config(client: Client, args) -> int:
    body = _targets(client, args.job or "")
    known = write_known_hosts(Path(args.known_hosts).expanduser(), body.get("known_hosts") or [])
    print(f"rlark: wrote {len(body.get('known_hosts') or [])} host keys to {known}", file=sys.stderr)
    print(ssh_config_text(body, client.url, known, args.identity or ""))
    return 0


def add_commands(sub: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:
    """Register ``ssh`` and ``ssh-config`` on the ``rlark`` parser."""
    p = sub.add_parser("ssh", parents=[common], help="ssh into a Worker of a job through the console's bastion")
    p.add_argument("name", help="job name")
    p.add_argument("worker", nargs="?", help="Worker name or suffix (rollout-1); default: the Header")
    p.add_argument("command", nargs=argparse.REMAINDER, help="command to run instead of a shell (after --)")
    p.add_argument("--ssh-arg", dest="ssh_args", action="append", default=[], help="extra ssh option (repeat)")
    _host_key_options(p)
    p.set_defaults(func=cmd_ssh)
    p = sub.add_parser(
        "ssh-config",
        parents=[common],
        help="print ~/.ssh/config entries for the Workers of your running jobs",
        description="Print ~/.ssh/config entries: the bastion, then one Host per Worker of each of your jobs that is"
        " running or starting. Workers of finished, failed or stopped jobs are not listed: they cannot be reached.",
    )
    p.add_argument("--job", help="only this job's Workers (none when the job has ended)")
    _host_key_options(p)
    p.set_defaults(func=cmd_ssh_config)


def _host_key_options(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--known-hosts",
        default=DEFAULT_KNOWN_HOSTS,
        help=f"file for the bastion's and Workers' host keys from the console (default {DEFAULT_KNOWN_HOSTS})",
    )
    p.add_argument("-i", "--identity", help="private key for both hops (default: your ssh client's keys)")
