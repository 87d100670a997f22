"""A dropped WebTerminal reattaches whichever web worker takes the reconnect.

``manage.py serve_web`` runs 4 daphne workers on one socket, so each fresh connection may land on another worker
than the one holding the kept shell. The test opens a terminal, sets a variable, then 10 times drops the TCP
connection (no ``bye``, no close frame: a network blip) and reconnects with ``?resume=<id>`` on a fresh connection;
every reconnect must say ``resumed: true`` and reach the same shell. Which worker took each connection is read
from the kernel's socket table, so the test also proves the reconnects really were spread over several workers.

- Local runtime: a real Worker under ``manage.py local_supervisor``; the same shell means the same ``$$`` and the
  variable set before the first drop.
- Kubernetes runtime: the fake API server (its ``pods/exec`` is a scripted shell without ``$$``): the same shell
  means one exec session for the whole test, which received every line typed after every reconnect.

Needs Redis (``REDIS_URL``): the workers reach each other through the Redis channel layer.
"""

from __future__ import annotations

import http.cookiejar
import json
import os
import re
import subprocess
import sys
import time
import urllib.parse
import urllib.request
from pathlib import Path

import psutil
import pytest
import websocket
import yaml

from tests.clusters.test_local_runtime_support import SupervisorProcess, manifest, nodes_spec, wait_for
from tests.fake_k8s.server import FakeKubernetes
from tests.processes import start_web_tier, stop_group

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(300)]
ROOT = Path(__file__).resolve().parents[2]
WORKERS = 4
DROPS = 10
PASSWORD = "reattach-pw-1"
JOB = "reattach"
NODES = nodes_spec(("n1", {"pool": "any"}, {"cpu": 8}))
if not os.environ.get("REDIS_URL"):
    pytest.skip("needs Redis (REDIS_URL): the web workers share the channel layer", allow_module_level=True)

SETUP_USER = f"""
from django.contrib.auth import get_user_model
user = get_user_model().objects.create(username="alice")
user.set_password({PASSWORD!r})
user.save()
"""

SETUP_LOCAL = f"""
from clusters.models import Cluster, Node
from django.contrib.auth import get_user_model
from jobs.models import Job, Task
cluster = Cluster.objects.create(name="c1", runtime="local", status="online", namespace="rlark-system")
Node.objects.create(cluster=cluster, name="n1", labels={{"pool": "any", "kubernetes.io/hostname": "n1"}},
                    capacity={{"cpu": 8}}, allocatable={{"cpu": 8}})
job = Job.objects.create(name={JOB!r}, owner=get_user_model().objects.get(username="alice"), spec={{}}, phase="Running")
Task.objects.create(job=job, template_name="header", name="{JOB}-header", cluster=cluster,
                    namespace="rlark-system", head=True)
"""

SETUP_K8S = f"""
import os, yaml
from pathlib import Path
from types import SimpleNamespace
from clusters.models import Cluster
from clusters.runtime.kubernetes import KubernetesRuntime
from django.contrib.auth import get_user_model
from jobs.models import Job, Task
from jobs.jobspec.manifests import build_task_manifests
doc = yaml.safe_load(Path("tests/fake_k8s/golden/job_3role.yaml").read_text())
cluster = Cluster.objects.create(name="gpu-a", runtime="kubernetes", namespace="rlark-system",
                                 kubeconfig=os.environ["REATTACH_KUBECONFIG"], status="online",
                                 allow_host_path=True, host_path_roots="/data")
registry = SimpleNamespace(name="corp", registry="registry.example.com", username="robot", password="pw", public=False)
manifests = build_task_manifests({JOB!r}, doc, clusters={{"gpu-a": cluster}}, registries=[registry], ssh_keys=[])
job = Job.objects.create(name={JOB!r}, owner=get_user_model().objects.get(username="alice"), spec=doc, phase="Running")
runtime = KubernetesRuntime(cluster)
for order, m in enumerate(manifests):
    Task.objects.create(job=job, template_name=m.task.removeprefix("{JOB}-"), name=m.task, cluster=cluster,
                        namespace=m.namespace, order=order, replicas=m.replicas, rank_start=m.rank_start,
                        head=order == 0)
    runtime.apply_task(m)
"""


class Tier:
    """The web tier of one test: its URL, a logged-in session cookie and the daphne workers' PIDs."""

    def __init__(self, base: str, proc: subprocess.Popen, log: Path) -> None:
        self.base = base
        self.proc = proc
        self.log = log
        self.cookie = login(base)

    def workers(self) -> set[int]:
        return daphne_workers(self.proc)

    def open(self, pod: str, resume: str = "") -> websocket.WebSocket:
        url = self.base.replace("http", "ws", 1) + f"/ws/terminal/jobs/{JOB}/pods/{pod}/"
        if resume:
            url += "?" + urllib.parse.urlencode({"resume": resume})
        return websocket.create_connection(url, header=[f"Cookie: {self.cookie}"], origin=self.base, timeout=20)

    def served_by(self, ws: websocket.WebSocket) -> int | None:
        """The PID of the daphne worker holding the server side of ``ws`` (None if not found)."""
        port = ws.sock.getsockname()[1]
        for pid in self.workers():
            try:
                conns = psutil.Process(pid).net_connections(kind="tcp")
            except psutil.Error:
                continue
            if any(c.raddr and c.raddr.port == port for c in conns):
                return pid
        return None


def daphne_workers(proc: subprocess.Popen) -> set[int]:
    """PIDs of the live daphne processes under ``serve_web`` (a worker just killed, a zombie until reaped, is none)."""
    pids = set()
    for child in psutil.Process(proc.pid).children(recursive=True):
        try:
            if "daphne" in " ".join(child.cmdline()) and child.status() != psutil.STATUS_ZOMBIE:
                pids.add(child.pid)
        except psutil.Error:  # gone, or a zombie whose cmdline can no longer be read
            continue
    return pids


def login(base: str) -> str:
    """Log alice in through the login form; the ``Cookie`` header value for the websockets."""
    jar = http.cookiejar.CookieJar()
    opener = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(jar))
    page = opener.open(base + "/login/", timeout=30).read().decode()
    token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page).group(1)
    data = urllib.parse.urlencode({"username": "alice", "password": PASSWORD, "csrfmiddlewaretoken": token})
    opener.open(urllib.request.Request(base + "/login/", data=data.encode(), headers={"Referer": base + "/login/"}))
    cookies = {c.name: c.value for c in jar}
    assert "sessionid" in cookies, "login failed"
    return "; ".join(f"{k}={v}" for k, v in cookies.items())


def session_frame(ws: websocket.WebSocket) -> dict:
    """The first text frame (``session``); fails with the close reason when the socket is refused."""
    while True:
        opcode, data = ws.recv_data()
        if opcode == websocket.ABNF.OPCODE_TEXT:
            msg = json.loads(data)
            assert msg["type"] != "closing", msg
            if msg["type"] == "session":
                return msg
        elif opcode == websocket.ABNF.OPCODE_CLOSE:
            raise AssertionError("closed before the session frame")


def read_until(ws: websocket.WebSocket, pattern: str, timeout: float = 20) -> re.Match:
    """Terminal output until ``pattern`` matches it; text frames are skipped."""
    out = b""
    deadline = time.monotonic() + timeout
    while True:
        ws.settimeout(max(0.1, deadline - time.monotonic()))
        try:
            opcode, data = ws.recv_data()
        except websocket.WebSocketTimeoutException:
            raise AssertionError(f"{pattern!r} not in {out[-300:]!r}") from None
        if opcode == websocket.ABNF.OPCODE_BINARY:
            out += data
        elif opcode == websocket.ABNF.OPCODE_CLOSE:
            raise AssertionError(f"closed while waiting for {pattern!r}: {out[-300:]!r}")
        if m := re.search(pattern, out.decode("utf-8", "replace")):
            return m
        assert time.monotonic() < deadline, f"{pattern!r} not in {out[-300:]!r}"


def drop(ws: websocket.WebSocket) -> None:
    """A network blip: the TCP connection goes away without ``bye`` and without a close frame."""
    ws.shutdown()


def start_tier(tmp_path: Path, env: dict, setup: str) -> tuple[Tier, subprocess.Popen, object]:
    manage = [sys.executable, str(ROOT / "manage.py")]
    subprocess.run([*manage, "migrate", "--noinput", "-v0"], env=env, cwd=ROOT, check=True, timeout=300)
    for script in (SETUP_USER, setup):
        subprocess.run([*manage, "shell", "-c", script], env=env, cwd=ROOT, check=True, timeout=120)
    proc, base, log = start_web_tier(manage, env, ROOT, tmp_path / "web.log", WORKERS)
    wait_for(lambda: len(daphne_workers(proc)) == WORKERS, 60, what="4 daphne workers")
    return Tier(base, proc, tmp_path / "web.log"), proc, log


def tier_env(tmp_path: Path, **extra: str) -> dict:
    env = {
        **os.environ,
        "RLARK_VAR_DIR": str(tmp_path / "var"),
        "DATABASE_URL": f"sqlite:///{tmp_path / 'web.sqlite3'}",
        "DEBUG": "0",
        "ALLOWED_HOSTS": "127.0.0.1",
        "RLARK_TERMINAL_GRACE_PERIOD": "60",
        "RLARK_K8S_CONNECT_TIMEOUT": "3",
        "RLARK_K8S_READ_TIMEOUT": "15",
        "PYTHONUNBUFFERED": "1",
        **extra,
    }
    env.pop("RLARK_WEB_WORKERS", None)
    return env


def drops_and_reconnects(tier: Tier, pod: str, check) -> tuple[int, set[int]]:
    """Open, then ``DROPS`` times drop and reconnect; ``check(ws, i)`` runs on the first socket (i=0) and after
    every reconnect. Returns (reattached count, the workers that served the connections)."""
    ws = tier.open(pod)
    first = session_frame(ws)
    assert first["resumed"] is False
    token = first["id"]
    served = {tier.served_by(ws)}
    check(ws, 0)
    reattached = 0
    failures = []
    for i in range(1, DROPS + 1):
        drop(ws)
        time.sleep(0.3)  # the server notices the drop and keeps the shell
        ws = tier.open(pod, resume=token)
        frame = session_frame(ws)
        served.add(tier.served_by(ws))
        if frame["resumed"] is not True or frame["id"] != token:
            failures.append((i, frame))
            token = frame["id"]
            continue
        check(ws, i)
        reattached += 1
    ws.send(json.dumps({"type": "bye"}))
    ws.close()
    print(f"reattached {reattached} of {DROPS}; connections served by {len(served - {None})} workers")
    assert not failures, f"reattached {reattached} of {DROPS}; new shells: {failures}"
    return reattached, served


@pytest.fixture
def local_tier(tmp_path):
    env = tier_env(tmp_path)
    (tmp_path / "var").mkdir()
    sup = SupervisorProcess(tmp_path / "var" / "local").start()
    try:
        rt = sup.runtime(NODES)
        command = ["bash", "-c", "trap 'exit 0' TERM; sleep 600 & wait"]
        rt.apply_task(manifest(JOB, "header", head=True, command=command))
        wait_for(
            lambda: any(p.phase == "Running" for p in rt.list_pods("rlark-system", JOB)), 60, what="Worker running"
        )
        tier, proc, log = start_tier(tmp_path, env, SETUP_LOCAL)
        try:
            yield tier
        finally:
            stop_group(proc)
            log.close()
        rt.delete_task("rlark-system", f"{JOB}-header")
    finally:
        sup.stop()


def test_local_worker_reattaches_whichever_worker_takes_the_reconnect(local_tier):
    seen: dict[str, str] = {}

    def check(ws: websocket.WebSocket, i: int) -> None:
        if i == 0:
            ws.send_binary(b"export RLARK_MARK=kept-$RANDOM; echo pid=$$ mark=$RLARK_MARK.\r")
        else:
            ws.send_binary(b"echo pid=$$ mark=$RLARK_MARK.\r")
        m = read_until(ws, r"pid=(\d+) mark=(kept-\d+)\.")
        seen.setdefault("pid", m.group(1))
        seen.setdefault("mark", m.group(2))
        assert (m.group(1), m.group(2)) == (seen["pid"], seen["mark"]), f"reconnect {i}: another shell"

    reattached, served = drops_and_reconnects(local_tier, f"{JOB}-header-0", check)
    assert reattached == DROPS
    assert len(served - {None}) >= 2, f"every connection landed on one worker: {served}"


@pytest.fixture
def k8s_tier(tmp_path):
    fake = FakeKubernetes(token="reattach-token").start()
    try:
        env = tier_env(tmp_path, REATTACH_KUBECONFIG=yaml.safe_dump(fake.kubeconfig()))
        tier, proc, log = start_tier(tmp_path, env, SETUP_K8S)
        fake.set_pod("rlark-system", f"{JOB}-actor-0", "Running", node="gpu-a-0", ip="10.244.0.5")
        try:
            yield tier, fake
        finally:
            stop_group(proc)
            log.close()
    finally:
        fake.stop()


def test_kubernetes_pod_reattaches_whichever_worker_takes_the_reconnect(k8s_tier):
    tier, fake = k8s_tier

    def check(ws: websocket.WebSocket, i: int) -> None:
        ws.send_binary(f"echo line-{i}-done\r".encode())
        read_until(ws, rf"\nline-{i}-done")

    reattached, served = drops_and_reconnects(tier, f"{JOB}-actor-0", check)
    assert reattached == DROPS
    assert len(fake.exec_sessions) == 1, [s["input"] for s in fake.exec_sessions]  # one shell for the whole test
    typed = fake.exec_sessions[0]["input"].decode()
    assert all(f"line-{i}-done" in typed for i in range(DROPS + 1)), typed
    assert len(served - {None}) >= 2, f"every connection landed on one worker: {served}"
