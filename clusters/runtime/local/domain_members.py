"""Network-domain members on the local runtime: the network agent beside each member Worker.

The console pushes each cluster's members (``op_set_domain_members``; shape below) once it has allocated their
domain IPs. A member Worker of an isolated cluster starts like a Pod with a native sidecar on Kubernetes: first its
network agent (``python -m domains.netagent <dir>``, run by the supervisor as root inside the Worker's network
namespace only; it creates ``tun0`` with the domain IP and carries its packets over an SSH TUN channel to the
console's relay), then, once the agent has brought ``tun0`` up, the ``main`` container. Until then the Pod waits
with reason ``PodInitializing`` ("waiting for its network domain address").

Membership (one per Pod name)::

    {"domain": "d1", "ip": "10.100.0.1", "prefix": 16, "hosts": {"<pod>": "<ip>", ...},
     "relay": {"host": "100.127.255.1", "port": 2223, "host_key": "<OpenSSH public key>"},
     "username": "<certificate principal>", "key": "<OpenSSH private key>", "cert": "<OpenSSH certificate>"}

Files (``<pod dir>/agent/``, 0700, root's; not mounted into the Worker): ``config.json``, ``id``, ``id-cert.pub``
(0600), ``status.json`` (written by the agent: ``state`` connecting|connected, ``since``, ``error``). The Worker's
``/etc/hosts`` is ``<pod dir>/hosts``, bound read-only; its ``# BEGIN rlark sidecar`` … ``# END rlark sidecar``
block lists ``<pod>.rlark-domain`` for every member (upstream-rlark 12.1).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

from clusters.runtime.local import launcher, netns
from domains.netagent import hosts_block

ROOT = Path(__file__).resolve().parents[3]
DOMAIN_SUFFIX = ".rlark-domain"
WAITING_MESSAGE = "waiting for its network domain address"


def is_member(t: dict[str, Any]) -> bool:
    """A Task of a Job with ``spec.domain``: the head gets ``RLARK_DOMAIN``, workers a ``.rlark-domain`` head."""
    spec = ((t.get("workload") or {}).get("spec") or {}).get("template", {}).get("spec") or {}
    for c in spec.get("containers") or []:
        for e in c.get("env") or []:
            if e.get("name") == "RLARK_DOMAIN" and e.get("value"):
                return True
            if e.get("name") == "RLARK_HEAD_ADDRESS" and str(e.get("value") or "").endswith(DOMAIN_SUFFIX):
                return True
    return False


def write_hosts(
    path: Path, pod: str, address: str, hosts: dict[str, str], services: dict[str, str] | None = None
) -> None:
    """The Worker's /etc/hosts, rewritten in place (it is bind-mounted: a rename would not be seen): itself,
    ``services`` (``{name: ip}``, the cluster's names the Worker may resolve), then the managed domain block."""
    extra = "".join(f"{ip}\t{name}\n" for name, ip in sorted((services or {}).items()))
    text = f"127.0.0.1\tlocalhost\n{address}\t{pod}\n{extra}" + hosts_block(hosts)
    if path.is_symlink():
        path.unlink()
    with open(path, "a+") as f:
        f.seek(0)
        if f.read() == text:
            return
        f.seek(0)
        f.truncate()
        f.write(text)
    path.chmod(0o644)


def agent_dir(pdir: Path) -> Path:
    return pdir / "agent"


def status(pdir: Path) -> dict[str, Any]:
    try:
        return json.loads((agent_dir(pdir) / "status.json").read_text())
    except (OSError, ValueError):
        return {"state": "stopped"}


def _write_private(path: Path, text: str) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(text)


def write_config(pdir: Path, member: dict[str, Any]) -> None:
    d = agent_dir(pdir)
    d.mkdir(mode=0o700, parents=True, exist_ok=True)
    _write_private(d / "id", member["key"])
    _write_private(d / "id-cert.pub", member["cert"])
    relay = member.get("relay") or {}
    config = {
        "ip": member["ip"],
        "prefix": int(member["prefix"]),
        "relay_host": relay.get("host") or netns.CONSOLE_ADDRESS,
        "relay_port": int(relay.get("port") or 0),
        "host_key": relay.get("host_key") or "",
        "username": member["username"],
        "key": str(d / "id"),
        "cert": str(d / "id-cert.pub"),
        "status": str(d / "status.json"),
    }
    _write_private(d / "config.json", json.dumps(config, sort_keys=True))


def _alive(pid: int | None) -> bool:
    if not pid:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(") ", 1)[1][0] != "Z"
    except OSError:
        return False


def start_agent(pdir: Path, ns: str) -> int:
    """Start the agent in the Worker's network namespace (own process group); returns its PID."""
    log = open(agent_dir(pdir) / "agent.log", "ab", buffering=0)  # noqa: SIM115 - handed to the child
    try:
        proc = subprocess.Popen(
            [
                *launcher.netns_prefix(netns.netns_path(ns)),
                sys.executable,
                "-m",
                "domains.netagent",
                str(agent_dir(pdir) / "config.json"),
            ],
            cwd=ROOT,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            close_fds=True,
            env={"PATH": os.environ.get("PATH", "/usr/sbin:/usr/bin:/sbin:/bin"), "PYTHONUNBUFFERED": "1"},
        )
    finally:
        log.close()
    return proc.pid


def stop_agent(pod: dict[str, Any]) -> None:
    pid = pod.pop("agent_pid", None)
    if _alive(pid):
        try:
            os.killpg(pid, signal.SIGTERM)
        except ProcessLookupError:
            pass


def hold(sup: Any, pkey: str, pod: dict[str, Any], pdir: Path) -> str:
    """Why the member Pod ``pkey`` cannot start its ``main`` container yet ("" when it can). Starts its agent."""
    member = sup.state.setdefault("domains", {}).get(pkey)
    if not member:
        return WAITING_MESSAGE
    ns = netns.pod_netns(pod.get("net") or pod["cluster"], pod["name"])
    if not netns.exists(ns):
        return WAITING_MESSAGE  # created by the supervisor's _start before the agent runs
    if not _alive(pod.get("agent_pid")):
        pod["agent_pid"] = start_agent(pdir, ns)
        sup._dirty = True
    if status(pdir).get("tun") != member["ip"]:
        return WAITING_MESSAGE
    return ""


def set_members(sup: Any, cluster: str, members: dict[str, Any], pod_dir: Any) -> dict[str, Any]:
    """Store ``members`` (``{pod: membership}``) for ``cluster``; rewrite agents' configs and hosts files.
    ``pod_dir(root, cluster, pod)`` is the supervisor's Pod directory function."""
    domains = sup.state.setdefault("domains", {})
    for key in [k for k in domains if k.startswith(cluster + "/") and k.split("/", 1)[1] not in members]:
        domains.pop(key)
        pod = sup.state["pods"].get(key)
        if pod is not None:
            stop_agent(pod)
    out = {}
    for name, member in members.items():
        key = f"{cluster}/{name}"
        pdir = pod_dir(sup.root, cluster, name)
        if domains.get(key) != member:
            domains[key] = member
            sup._dirty = True
            if pdir.exists():
                write_config(pdir, member)
        pod = sup.state["pods"].get(key)
        if pod is not None and pod.get("ip") and pdir.exists():
            write_hosts(pdir / "hosts", name, pod["ip"], member.get("hosts") or {}, pod.get("hosts_services"))
        out[name] = status(pdir) if pod is not None else {"state": "stopped"}
    sup.wake.set()
    return out
