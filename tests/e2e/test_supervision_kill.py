"""Supervision that survives ``kill -9``: each service ``runconsole`` supervises is killed with SIGKILL (its PID
only, not its process group, as the OOM killer or an operator would), then

- every process it had started is gone within the budget (no orphan daphne holding the port), and
- the service is back within the budget: a new PID, and it works (the web tier answers ``/login/`` 200, the
  bastion and the relay accept TCP connections, the Celery worker runs the beat's ``sync_all`` again, beat sends
  it again, the cluster watcher runs again, the local supervisor answers ``ping`` and adopts the Worker the
  killed one had started).

Killing ``runconsole`` itself takes its children (and their daphne workers) with it, and a new ``runconsole`` on
the same port starts (no 'Address already in use'); the local supervisor outlives it by design.

The budget is 10 s on an idle machine, scaled by the load per core (at most 4x) as the other e2e tests do; the
measured times are written to ``test-artifacts/supervision-kill-timings.json``.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path

import psutil
import pytest

from tests.clusters.test_local_runtime_support import manifest, nodes_spec
from tests.conftest import ARTIFACTS, ConsoleServer
from tests.processes import alive

pytestmark = [pytest.mark.e2e]

LOAD = min(4.0, max(1.0, os.getloadavg()[0] / (os.cpu_count() or 1)))
BUDGET = 10.0 * LOAD
CLUSTER = "supervision-kill"  # not a cluster of the console's database: sync_all never touches its tasks
NODES = nodes_spec(("n-1", {}, {"cpu": 4}))
TIMINGS: dict[str, float] = {}


@pytest.fixture(scope="module")
def console(tmp_path_factory):
    """A console of its own (its own ports, var dir and local supervisor): these tests kill its services."""
    server = ConsoleServer(tmp_path_factory.mktemp("supervision"))
    server.start()
    yield server
    server.stop()
    ARTIFACTS.mkdir(exist_ok=True)
    (ARTIFACTS / "supervision-kill-console.log").write_text(server.log_path.read_text(errors="replace"))
    (ARTIFACTS / "supervision-kill-timings.json").write_text(json.dumps({"load": LOAD, **TIMINGS}, indent=1))


def wait_for(predicate: Callable[[], object], timeout: float, what: str, interval: float = 0.2) -> object:
    """The first truthy value of ``predicate()`` polled every ``interval`` s; AssertionError after ``timeout`` s."""
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        last = predicate()
        if last:
            return last
        time.sleep(interval)
    raise AssertionError(f"timed out after {timeout:.1f}s waiting for {what}; last={last!r}")


def service(server: ConsoleServer, needle: str) -> psutil.Process | None:
    """The child of the ``runconsole`` we started with ``needle`` as an argument (None when none is)."""
    try:
        children = psutil.Process(server.proc.pid).children()
    except psutil.Error:
        return None
    for proc in children:
        try:
            if needle in proc.cmdline():
                return proc
        except psutil.Error:
            continue
    return None


def tree(proc: psutil.Process) -> set[tuple[int, float]]:
    """``proc``'s descendants as (PID, start time): immune to PID reuse."""
    out = set()
    for child in proc.children(recursive=True):
        try:
            out.add((child.pid, child.create_time()))
        except psutil.Error:
            pass
    return out


def log_size(server: ConsoleServer) -> int:
    return server.log_path.stat().st_size


def log_since(server: ConsoleServer, offset: int) -> str:
    with open(server.log_path, "rb") as f:
        f.seek(offset)
        return f.read().decode(errors="replace")


def http_ok(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=2) as resp:
            return resp.status == 200
    except OSError:
        return False


def tcp_ok(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=2):
            return True
    except OSError:
        return False


def supervisor_ping(root: Path) -> dict | None:
    """The local supervisor's answer to ``ping`` on its unix socket, or None when it does not answer."""
    from clusters.runtime.local.statedir import socket_path

    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
            sock.settimeout(2)
            sock.connect(str(socket_path(root)))
            sock.sendall(b'{"op": "ping"}\n')
            answer = json.loads(sock.makefile("rb").readline())
    except (OSError, ValueError):
        return None
    return answer if answer.get("ok") else None


def kill_and_recover(server: ConsoleServer, name: str, needle: str, works: Callable[[int], bool]) -> None:
    """SIGKILL the service's PID only; assert its processes are gone and a new instance works, within BUDGET.
    ``works(log_offset)`` says whether the service works (``log_offset``: the console log's size at the kill)."""
    old = wait_for(lambda: service(server, needle), BUDGET, f"{name} running")
    descendants = tree(old)
    offset = log_size(server)
    t0 = time.monotonic()
    os.kill(old.pid, signal.SIGKILL)
    wait_for(lambda: not alive(descendants), BUDGET, f"the processes {name} started gone (no orphans)")
    TIMINGS[f"{name}_children_gone"] = time.monotonic() - t0
    new = wait_for(lambda: (p := service(server, needle)) and p.pid != old.pid and p, BUDGET, f"a new {name}")
    wait_for(lambda: works(offset), max(0.5, BUDGET - (time.monotonic() - t0)), f"{name} working again")
    TIMINGS[f"{name}_back"] = time.monotonic() - t0
    assert new.is_running() and server.proc.poll() is None


def test_web_tier_comes_back_without_orphans(console):
    web = service(console, "serve_web")
    assert web is not None and len(tree(web)) >= 2  # RLARK_WEB_WORKERS=2 daphne workers
    kill_and_recover(console, "web", "serve_web", lambda _o: http_ok(console.url + "/login/"))
    # twice in a row: a second restart is not held back by the first one's port either
    kill_and_recover(console, "web-again", "serve_web", lambda _o: http_ok(console.url + "/login/"))


def test_celery_worker_comes_back(console):
    def ran(offset: int) -> bool:
        text = log_since(console, offset)
        return "Task jobs.tasks.sync_all[" in text and "succeeded" in text

    kill_and_recover(console, "worker", "worker", ran)


def test_celery_beat_comes_back(console):
    kill_and_recover(console, "beat", "beat", lambda o: "Sending due task sync-all" in log_since(console, o))


def test_cluster_watcher_comes_back(console):
    kill_and_recover(console, "watcher", "watch_clusters", lambda _o: True)  # a new PID (it serves no port)


def test_ssh_bastion_comes_back(console):
    kill_and_recover(console, "ssh", "sshgate", lambda _o: tcp_ok(console.ssh_port))


def test_domain_relay_comes_back(console):
    kill_and_recover(console, "relay", "domain_relay", lambda _o: tcp_ok(console.relay_port))


def test_local_supervisor_comes_back_and_adopts_its_workers(console):
    from clusters.runtime.local import LocalRuntime

    root = Path(console.env["RLARK_VAR_DIR"]) / "local"
    old_pid = int((root / "supervisor.pid").read_text())
    runtime = LocalRuntime(_cluster(), root=root, nodes=NODES)
    sleeper = ["bash", "-c", "trap 'exit 0' TERM; sleep 600 & wait"]
    runtime.apply_task(manifest("sk", "header", head=True, command=sleeper))
    try:
        pod = wait_for(lambda: (p := runtime._call("list_pods", job="sk")) and p[0]["pid"] and p[0], BUDGET, "Worker")
        t0 = time.monotonic()
        os.kill(old_pid, signal.SIGKILL)
        answer = wait_for(lambda: supervisor_ping(root), BUDGET, "a new local supervisor answering ping")
        new_pid = int((root / "supervisor.pid").read_text())
        TIMINGS["supervisor_back"] = time.monotonic() - t0
        assert new_pid != old_pid and psutil.pid_exists(new_pid), answer
        again = wait_for(lambda: (p := runtime._call("list_pods", job="sk")) and p[0]["pid"] and p[0], BUDGET, "pod")
        assert again["pid"] == pod["pid"] and again["uid"] == pod["uid"]  # adopted, not an untracked orphan
    finally:
        runtime.delete_task("rlark-system", "sk-header")
    wait_for(lambda: not runtime._call("list_pods", job="sk"), BUDGET, "the Worker deleted by the new supervisor")
    assert not psutil.pid_exists(pod["pid"]) or psutil.Process(pod["pid"]).status() == psutil.STATUS_ZOMBIE


def test_runconsole_killed_takes_its_children_and_restarts_on_the_same_port(console):
    root = Path(console.env["RLARK_VAR_DIR"]) / "local"
    supervisor = int((root / "supervisor.pid").read_text())
    descendants = {ident for ident in tree(psutil.Process(console.proc.pid)) if ident[0] != supervisor}
    assert len(descendants) >= 8  # web, 2 daphne, worker, beat, watcher, bastion, relay
    t0 = time.monotonic()
    os.kill(console.proc.pid, signal.SIGKILL)
    console.proc.wait(timeout=10)
    wait_for(lambda: not alive(descendants), BUDGET, "every process runconsole started gone")
    TIMINGS["runconsole_children_gone"] = time.monotonic() - t0
    assert supervisor_ping(root) is not None  # the local supervisor outlives runconsole by design
    console.start()  # the same port; start() raises when /login/ does not answer within its budget
    assert http_ok(console.url + "/login/")


def _cluster():
    import types

    return types.SimpleNamespace(name=CLUSTER, namespace="rlark-system")
