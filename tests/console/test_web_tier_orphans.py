"""Processes that die with their parent, and a web tier that takes its port back only from processes it can prove
its own (rlark_console/lifecycle.py, rlark_console/webserver.py ``bind_when_free``). Every process here is
started by the test and stopped by its PID; every wait has a timeout."""

from __future__ import annotations

import contextlib
import errno
import os
import signal
import socket
import subprocess
import sys
import threading
import time

import psutil
import pytest

from rlark_console.lifecycle import Record, reap_with_group, same_process
from rlark_console.webserver import bind_when_free
from tests.conftest import free_port

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="parent-death signal is Linux-only")

# A parent that starts `sleep 60` (with or without the parent-death signal), prints its PID, then waits.
PARENT = """
import subprocess, sys, time
from rlark_console.lifecycle import die_with_parent
pre = die_with_parent() if sys.argv[1] == "1" else None
child = subprocess.Popen(["sleep", "60"], preexec_fn=pre)
print(child.pid, flush=True)
time.sleep(60)
"""

# A parent whose child (with the parent-death signal) starts a grandchild; prints "<child> <grandchild>".
GRANDPARENT = """
import subprocess, time
from rlark_console.lifecycle import die_with_parent
child = subprocess.Popen(["sh", "-c", "sleep 60 & echo $!; wait"], stdout=subprocess.PIPE, text=True,
                         preexec_fn=die_with_parent())
print(child.pid, child.stdout.readline().strip(), flush=True)
time.sleep(60)
"""

# A process listening on 127.0.0.1:<argv[1]> until killed, printing "ready" once it listens.
LISTENER = """
import socket, sys, time
s = socket.socket()
s.bind(("127.0.0.1", int(sys.argv[1])))
s.listen()
print("ready", flush=True)
time.sleep(60)
"""


def wait_gone(pid: int, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if psutil.Process(pid).status() == psutil.STATUS_ZOMBIE:
                return True
        except psutil.NoSuchProcess:
            return True
        time.sleep(0.1)
    return False


def start_parent(pdeathsig: bool) -> tuple[subprocess.Popen, int]:
    parent = subprocess.Popen(
        [sys.executable, "-c", PARENT, "1" if pdeathsig else "0"], stdout=subprocess.PIPE, text=True
    )
    return parent, int(parent.stdout.readline())


def start_listener(port: int) -> subprocess.Popen:
    proc = subprocess.Popen([sys.executable, "-c", LISTENER, str(port)], stdout=subprocess.PIPE, text=True)
    assert proc.stdout.readline().strip() == "ready"
    return proc


def kill(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        proc.kill()
    proc.wait(timeout=10)


def test_a_child_with_the_parent_death_signal_dies_with_a_killed_parent():
    parent, child = start_parent(pdeathsig=True)
    try:
        parent.send_signal(signal.SIGKILL)
        parent.wait(timeout=10)
        assert wait_gone(child, 30)  # a loaded machine delivers the signal late
    finally:
        kill(parent)
        if not wait_gone(child, 0):
            os.kill(child, signal.SIGKILL)


def test_without_it_the_child_is_orphaned():  # what the web tier's daphne workers did
    parent, child = start_parent(pdeathsig=False)
    try:
        parent.send_signal(signal.SIGKILL)
        parent.wait(timeout=10)
        assert not wait_gone(child, 1)
    finally:
        os.kill(child, signal.SIGKILL)
        kill(parent)


def test_the_signal_is_not_inherited_by_grandchildren():
    # Linux clears it on fork: the child's own children (e.g. the local supervisor's Workers) are not signalled.
    middle = subprocess.Popen([sys.executable, "-c", GRANDPARENT], stdout=subprocess.PIPE, text=True)
    child, grandchild = (int(x) for x in middle.stdout.readline().split())
    try:
        middle.send_signal(signal.SIGKILL)
        middle.wait(timeout=10)
        assert wait_gone(child, 30)  # a loaded machine delivers the signal late
        assert not wait_gone(grandchild, 1)
    finally:
        kill(middle)
        for pid in (child, grandchild):
            if not wait_gone(pid, 0):
                with contextlib.suppress(ProcessLookupError):  # it may end between the check and the kill
                    os.kill(pid, signal.SIGKILL)


def test_an_exited_child_has_its_group_killed_before_it_is_reaped():
    # what runconsole does when a service exits: its leftovers (the web tier's daphne workers) die with it
    proc = subprocess.Popen(
        ["sh", "-c", "sleep 60 & echo $!; wait"], stdout=subprocess.PIPE, text=True, start_new_session=True
    )
    left = int(proc.stdout.readline())
    try:
        assert reap_with_group(proc) is None  # running: nothing signalled
        assert not wait_gone(left, 0.3)
        os.kill(proc.pid, signal.SIGKILL)  # the leader only, as kill -9 would
        deadline = time.monotonic() + 5
        while (code := reap_with_group(proc)) is None and time.monotonic() < deadline:
            time.sleep(0.05)
        assert code == -signal.SIGKILL
        assert wait_gone(left, 5)
        assert reap_with_group(proc) == -signal.SIGKILL  # reaped: the group is not signalled again
    finally:
        kill(proc)
        if not wait_gone(left, 0):
            os.kill(left, signal.SIGKILL)


def test_record_names_orphans_only_when_their_leader_is_dead(tmp_path):
    record = Record(tmp_path / "web.json")
    leader = subprocess.Popen(["sleep", "60"])
    orphan = subprocess.Popen(["sleep", "60"])
    try:
        record.write(leader.pid, [orphan.pid, 999_999_999])  # an unknown PID is left out
        assert record.orphans() == []  # the leader runs: its workers are not orphans
        kill(leader)
        assert [p.pid for p in record.orphans()] == [orphan.pid]
        assert record.stop_orphans(grace=5) == [orphan.pid]
        orphan.wait(timeout=5)
        assert same_process(orphan.pid, 0) is None
    finally:
        kill(leader)
        kill(orphan)


def test_a_recorded_pid_that_started_at_another_time_is_not_ours(tmp_path):
    other = subprocess.Popen(["sleep", "60"])
    try:
        path = tmp_path / "web.json"
        started = psutil.Process(other.pid).create_time()
        path.write_text(f'{{"leader": [999999999, 1.0], "children": [[{other.pid}, {started - 100}]]}}')
        assert Record(path).orphans() == []  # same PID, another process (reused PID): never signalled
        assert Record(tmp_path / "missing.json").orphans() == []
    finally:
        kill(other)


def test_bind_takes_the_port_back_from_a_dead_tiers_recorded_worker(tmp_path):
    port = free_port()
    record = Record(tmp_path / f"web-{port}.json")
    leader = subprocess.Popen(["sleep", "60"])
    holder = start_listener(port)  # a worker of a tier killed with SIGKILL, still on the port
    try:
        record.write(leader.pid, [holder.pid])
        kill(leader)
        messages: list[str] = []
        t0 = time.monotonic()
        sock = bind_when_free("127.0.0.1", port, record, wait=10, log=messages.append)
        sock.close()
        assert time.monotonic() - t0 < 10
        assert holder.wait(timeout=5) is not None
        assert str(holder.pid) in messages[0]
    finally:
        kill(leader)
        kill(holder)


def test_bind_never_signals_a_holder_it_cannot_prove_its_own(tmp_path):
    port = free_port()
    holder = start_listener(port)  # e.g. a worker orphaned by a tier that kept no record
    try:
        record = Record(tmp_path / f"web-{port}.json")  # no file
        with pytest.raises(OSError) as err:
            bind_when_free("127.0.0.1", port, record, wait=1)
        assert err.value.errno == errno.EADDRINUSE
        assert str(holder.pid) in str(err.value)  # the message names who holds the port
        assert holder.poll() is None  # and it was left alone
    finally:
        kill(holder)


def test_bind_waits_for_a_port_that_frees_up():
    port = free_port()
    holder = start_listener(port)
    try:
        t0 = time.monotonic()
        timer = threading.Timer(1.0, holder.kill)
        timer.start()
        sock = bind_when_free("127.0.0.1", port, None, wait=10)
        sock.close()
        assert 0.9 < time.monotonic() - t0 < 10
        timer.join(timeout=5)
    finally:
        kill(holder)
    with socket.socket() as probe:  # released by the close above
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        probe.bind(("127.0.0.1", port))
