"""The ``rlark`` executable, as a kubectl user types it, against the whole running console (``console_server``:
daphne, Celery, the local runtime with real Ray):

1. a job that finishes: ``apply``, ``wait --for=phase=Succeeded``, ``get job NAME -o wide``, ``describe`` (Pod IP,
   node, restarts, conditions, events), ``apply`` of the unchanged finished job does nothing and points to
   ``rlark restart``, ``exec`` into it is refused (exit 4), a missing job is exit 3, an invalid one exit 5,
   ``delete -f FILE``; ``--help`` has examples and the exit codes; a closed stdout ends without a traceback;
2. a running 3-Worker job: ``get job NAME -w`` prints the row again when the phase changes, ``wait
   --for=phase=Running``, ``logs`` (tail, a named Worker, ``--all-workers``, ``-f`` bringing new lines), ``exec``
   in a named Worker with the command's exit code, another user gets "not found" for both, ``stop job NAME``
   and the bare-name shortcut ``delete NAME``.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from tests.conftest import ROOT
from tests.e2e.test_e2e_local import LOAD, single_header_job

pytestmark = [pytest.mark.ray, pytest.mark.timeout(900)]

RLARK = Path(sys.executable).parent / "rlark"


def _token(server, username: str, admin: bool) -> str:
    out = server.manage(
        "shell",
        "-c",
        "from django.contrib.auth import get_user_model\n"
        "from accounts.authentication import issue_token\n"
        f"u, _ = get_user_model().objects.get_or_create(username='{username}')\n"
        f"u.is_staff = u.is_superuser = {admin}\n"
        "u.save()\n"
        f"print('KEY=' + issue_token(u, 'cli-kubectl')[1])\n",
    )
    return next(line[4:] for line in out.stdout.splitlines() if line.startswith("KEY="))


class Rlark:
    """The installed ``rlark`` console script with this checkout's code, one user's token."""

    def __init__(self, server, token: str, tmp: Path) -> None:
        self.env = {
            **os.environ,
            "PYTHONPATH": str(ROOT),  # this checkout's rlark_cli, whatever the venv's editable install points at
            "RLARK_URL": server.url,
            "RLARK_TOKEN": token,
            "RLARK_LANG": "en",
            "RLARK_CONFIG": str(tmp / "none.yaml"),
        }
        self.tmp = tmp

    def __call__(self, *args: str, timeout: float = 120) -> subprocess.CompletedProcess:
        return subprocess.run(
            [str(RLARK), *args], env=self.env, capture_output=True, text=True, timeout=timeout, cwd=self.tmp
        )

    def popen(self, *args: str, **kwargs) -> subprocess.Popen:
        return subprocess.Popen(
            [str(RLARK), *args], env=self.env, text=True, cwd=self.tmp, start_new_session=True, **kwargs
        )

    def write(self, name: str, doc: dict | str) -> str:
        path = self.tmp / name
        path.write_text(doc if isinstance(doc, str) else yaml.safe_dump(doc, allow_unicode=True))
        return str(path)


def _stop(proc: subprocess.Popen) -> None:
    """End a process this test started (its own session), by its PID."""
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=10)


class Lines:
    """The stdout lines of a process, read by a thread (``next_until`` waits for one that matches)."""

    def __init__(self, proc: subprocess.Popen) -> None:
        import queue
        import threading

        self.queue: queue.Queue[str | None] = queue.Queue()
        self.seen: list[str] = []

        def pump() -> None:
            for line in proc.stdout:
                self.queue.put(line.rstrip("\n"))
            self.queue.put(None)

        threading.Thread(target=pump, daemon=True).start()

    def next_until(self, predicate, timeout: float) -> list[str]:
        """Lines up to the first that satisfies ``predicate``; AssertionError after ``timeout`` s or at EOF."""
        import queue

        lines: list[str] = []
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                line = self.queue.get(timeout=0.5)
            except queue.Empty:
                continue
            if line is None:
                break
            lines.append(line)
            self.seen.append(line)
            if predicate(line):
                return lines
        raise AssertionError(f"no such line within {timeout:.0f}s: {self.seen}")


@pytest.fixture(scope="module")
def rlark(console_server, tmp_path_factory) -> Rlark:
    return Rlark(console_server, _token(console_server, "admin", True), tmp_path_factory.mktemp("rlark-cli"))


def test_help_has_examples_and_exit_codes_and_a_closed_pipe_ends_quietly(rlark):
    out = rlark("--help")
    assert out.returncode == 0
    assert "examples:\n  rlark apply -f job.yaml" in out.stdout
    assert "rlark exec my-job rollout-1 -- nvidia-smi" in out.stdout
    for line in ("3  not found", "4  refused", "5  invalid", "6  timed out"):
        assert line in out.stdout
    assert "register-python-argcomplete rlark" in out.stdout
    # the reader of stdout is gone before rlark writes (as `rlark get jobs | head` once head has exited)
    proc = rlark.popen("--help", stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    proc.stdout.close()
    err = proc.stderr.read()
    proc.wait(timeout=60)
    assert "Traceback" not in err and "BrokenPipeError" not in err, err
    # argcomplete answers the shell's completion request from the parser itself (what the shell hook asks)
    answer = rlark.tmp / "completion.txt"
    for line, word in (("rlark wa", "wait"), ("rlark logs --all", "--all-workers"), ("rlark get j", "job")):
        env = {**rlark.env, "_ARGCOMPLETE": "1", "COMP_LINE": line, "COMP_POINT": str(len(line))}
        env["_ARGCOMPLETE_STDOUT_FILENAME"] = str(answer)
        done = subprocess.run([str(RLARK)], env=env, capture_output=True, text=True, timeout=60, cwd=rlark.tmp)
        assert done.returncode == 0, done.stderr
        assert word in answer.read_text().split(), answer.read_text()


def test_a_finished_job_the_kubectl_way(rlark):
    name = "cli-finished"
    path = rlark.write("finished.yaml", single_header_job(name, "echo 'Global Step: 1/1'; exit 0"))
    out = rlark("apply", "-f", path)
    assert (out.returncode, out.stdout.strip()) == (0, f"job/{name} created"), out.stderr
    out = rlark("wait", "job", name, "--for=phase=Succeeded", f"--timeout={180 * LOAD:.0f}s", timeout=200 * LOAD)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == f"job/{name} condition met (phase=Succeeded)"

    out = rlark("get", "job", name, "-o", "wide")
    assert out.returncode == 0, out.stderr
    header, row = out.stdout.splitlines()
    assert header.split()[-3:] == ["NODES", "RESTARTS", "MESSAGE"]
    assert row.split()[0] == name and "Succeeded" in row and "code 0" in row

    out = rlark("describe", "job", name)
    assert out.returncode == 0, out.stderr
    worker = re.search(rf"^  {name}-header-0  rank 0  (\S+)  node (\S+)  ip (\S+)  restarts (\d+)$", out.stdout, re.M)
    assert worker, out.stdout
    assert worker.group(2) != "-" and worker.group(4) == "0"
    conditions = out.stdout.split("Conditions:\n", 1)[1].split("Events:", 1)[0]
    assert re.search(r"^  Succeeded +True +\S+", conditions, re.M), conditions
    events = out.stdout.split("Events:\n", 1)[1].split("YAML:", 1)[0].splitlines()
    assert events[0].split()[2] == "Created" and any(" Finished " in e for e in events), events

    # the same file again: a finished job is left as it is, and the way to run it again is named
    before = rlark("get", "job", name, "-o", "json").stdout
    out = rlark("apply", "-f", path)
    assert out.returncode == 0, out.stderr
    assert f"job/{name} unchanged: it has finished (Succeeded), so nothing was done." in out.stdout
    assert f"rlark restart job {name}" in out.stdout
    assert "configured" not in out.stdout
    assert rlark("get", "job", name, "-o", "json").stdout == before

    # distinct exit codes: refused (no running Worker), not found, invalid, usage
    out = rlark("exec", name, "--", "true")
    assert out.returncode == 4 and "HTTP 409" in out.stderr and "Succeeded" in out.stderr, out
    out = rlark("get", "job", "no-such-job")
    assert out.returncode == 3 and "HTTP 404" in out.stderr, out
    out = rlark("describe", "job", "no-such-job")
    assert out.returncode == 3, out
    bad = single_header_job("cli-invalid", "true")
    bad["spec"]["tasks"][0]["kubernetes"]["workload"]["replicas"] = 2
    out = rlark("apply", "-f", rlark.write("bad.yaml", bad))
    assert out.returncode == 5 and "[header_replicas_not_one]" in out.stderr, out
    assert rlark("validate", "-f", str(rlark.tmp / "bad.yaml")).returncode == 5
    assert rlark("wait", "job", name, "--for=ready").returncode == 2

    out = rlark("delete", "-f", path)
    assert (out.returncode, out.stdout.strip()) == (0, f"job/{name} deleted"), out.stderr
    assert rlark("get", "job", name).returncode == 3


def _running_document(name: str) -> dict:
    document = yaml.safe_load((ROOT / "examples/demo/job.yaml").read_text())
    document["metadata"] = {"name": name}
    header = document["spec"]["tasks"][0]
    header["runScript"] = 'i=0; while true; do i=$((i+1)); echo "Global Step: $i"; sleep 1; done'
    header.pop("tensorBoardDir", None)
    header.pop("checkpointDir", None)
    spec = header["kubernetes"]["workload"]["template"]["spec"]
    spec.pop("volumes", None)
    spec["containers"][0].pop("volumeMounts", None)
    spec["containers"][0].pop("resources", None)  # no GPU: schedules even while another job holds the head GPU
    return document


def test_a_running_job_logs_exec_watch_and_wait(rlark, console_server):
    name = "cli-running"
    path = rlark.write("running.yaml", _running_document(name))
    out = rlark("apply", "-f", path)
    assert out.returncode == 0, out.stderr
    watch = rlark.popen("get", "job", name, "-w", "--interval", "1", stdout=subprocess.PIPE)
    try:
        out = rlark("wait", "job", name, "--for=phase=Running", f"--timeout={240 * LOAD:.0f}s", timeout=260 * LOAD)
        assert out.returncode == 0, out.stderr
        lines = Lines(watch).next_until(lambda line: " Running " in line, 30)
        assert lines[0].split()[:3] == ["NAME", "DISPLAY", "NAME"]
        # the row as it was when the watch began (Pending), then again once Running: one line per change
        assert [line.split()[0] for line in lines[1:]] == [name] * (len(lines) - 1), lines
        assert len(lines) == 2 or " Pending " in lines[1], lines
    finally:
        _stop(watch)
    out = rlark("wait", "job", name, "--for=phase=Succeeded", "--timeout=2s")
    assert out.returncode == 6 and "timed out after 2s" in out.stderr and "(now Running)" in out.stderr, out

    def header_steps() -> list[int]:
        got = rlark("logs", name, "--tail", "5")
        return [int(m) for m in re.findall(r"^Global Step: (\d+)$", got.stdout, re.M)] if got.returncode == 0 else []

    deadline = time.monotonic() + 120 * LOAD
    while not header_steps() and time.monotonic() < deadline:
        time.sleep(1)
    assert 1 <= len(header_steps()) <= 5

    follow = rlark.popen("logs", name, "header-0", "-f", "--tail", "1", "--interval", "1", stdout=subprocess.PIPE)
    try:
        lines = Lines(follow)
        first = lines.next_until(lambda line: line.startswith("Global Step"), 30)
        start = int(first[-1].split(": ")[1])
        more = lines.next_until(lambda line: line.startswith(f"Global Step: {start + 3}"), 60)
        steps = [int(line.split(": ")[1]) for line in more if line.startswith("Global Step")]
        assert steps == list(range(start + 1, start + 4)), more  # each new line once, none repeated
    finally:
        _stop(follow)

    out = rlark("logs", name, "--all-workers", "--tail", "2")
    assert out.returncode == 0, out.stderr
    pods = {line.split("]", 1)[0][1:] for line in out.stdout.splitlines()}
    assert {f"{name}-header-0", f"{name}-rollout-0", f"{name}-rollout-1"} <= pods, out.stdout

    out = rlark("exec", name, "rollout-1", "--", "sh", "-c", "echo rank=$RLINF_NODE_RANK; exit 7")
    assert out.returncode == 7, out
    assert "rank=2" in out.stdout
    out = rlark("exec", name, "--", "hostname")
    assert out.returncode == 0 and out.stdout.strip(), out
    assert rlark("exec", name, "rollout-9", "--", "true").returncode == 3

    out = rlark("describe", "job", name)
    ips = re.findall(r"  ip (\S+)  restarts \d+$", out.stdout, re.M)
    assert len(ips) == 3 and "-" not in ips, out.stdout

    other = Rlark(console_server, _token(console_server, "cli-other", False), rlark.tmp)
    assert other("exec", name, "--", "true").returncode == 3
    assert other("logs", name).returncode == 3
    assert other("stop", "job", name).returncode == 3

    out = rlark("stop", "job", name)
    assert (out.returncode, out.stdout.strip()) == (0, f"job/{name} stopped"), out.stderr
    out = rlark("delete", name)  # the bare name: the shortcut stays
    assert (out.returncode, out.stdout.strip()) == (0, f"job/{name} deleted"), out.stderr
