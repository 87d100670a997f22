"""No user input is evaluated with host privileges (docs/security.md): a local Worker's ``env`` reaches its
command only after the switch to the job's subordinate uid, never the root processes that start it (``unshare``,
``nsenter``, podinit.sh, ``mount``) nor the root ``nsenter`` of a WebTerminal or SSH exec.

Each family of shell and loader variables gets its own job whose payload leaves a mark file named for the
variable in a world-writable directory outside ``/tmp`` (so the host and the Worker see it at the same path).
A mark's owner is the host uid that ran the payload: every one must be in the job's subordinate range. Where
the Worker's own command triggers the variable, a mark must exist too (the payload works, it just runs as the
job). Real supervisor, real namespaces, no Ray.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest

from clusters.runtime.local import idmap
from tests.clusters.test_local_runtime_support import SupervisorProcess, manifest, nodes_spec, wait_for

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="id-mapped Workers are what a root supervisor starts")

NODES = nodes_spec(("n1", {}, {"cpu": 64}))

C_PAYLOAD = r"""
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>
static void mark(void) {
    char path[512];
    const char *name = getenv("RLARK_TEST_MARK_NAME");
    snprintf(path, sizeof path, "%s/%s-%d", MARKS, name ? name : "LD", (int)getpid());
    int fd = open(path, O_CREAT | O_WRONLY, 0644);
    if (fd >= 0) close(fd);
}
__attribute__((constructor)) static void init(void) { mark(); }
unsigned int la_version(unsigned int v) { return v; }
"""

# What the Worker runs: each line triggers one family inside the Worker, as the job.
WORKER = r"""
ls / > /dev/null
bash -c true
sh -i -c true < /dev/null > /dev/null 2>&1
bash -i -c true < /dev/null > /dev/null 2>&1
"$RLARK_LOCAL_PYTHON" -c pass
env > /rlark/work/env.txt
echo WORKER-DONE
trap 'exit 0' TERM; sleep 600 & wait
"""


@pytest.fixture
def payload_dir():
    """A world-readable payload directory with a 1777 ``marks/`` below, outside /tmp (which a Worker sees privately)."""
    base = Path("/var/lib/rlark-tests")
    base.mkdir(parents=True, exist_ok=True)
    p = Path(tempfile.mkdtemp(prefix="escape-", dir=base))
    p.chmod(0o755)
    marks = p / "marks"
    marks.mkdir()
    marks.chmod(0o1777)
    (p / "bin").mkdir()
    for tool in ("mount", "hostname", "cat", "mkdir", "ls", "setpriv", "unshare", "env", "python3"):
        real = shutil.which(tool, path="/usr/sbin:/usr/bin:/sbin:/bin") or f"/usr/bin/{tool}"
        script = p / "bin" / tool
        script.write_text(f'#!/bin/sh\n: > "{marks}/PATH-{tool}-$$"\nexec {real} "$@"\n')
        script.chmod(0o755)
    (p / "py").mkdir()
    (p / "py" / "sitecustomize.py").write_text(f"open('{marks}/PYTHONPATH-' + str(__import__('os').getpid()), 'w')\n")
    (p / "startup.py").write_text(f"open('{marks}/PYTHONSTARTUP-' + str(__import__('os').getpid()), 'w')\n")
    for name in ("BASH_ENV", "ENV"):
        (p / f"{name}.sh").write_text(f': > "{marks}/{name}-$$"\n')
    src = p / "payload.c"
    src.write_text(C_PAYLOAD.replace("MARKS", f'"{marks}"'))
    subprocess.run(["gcc", "-shared", "-fPIC", "-o", str(p / "payload.so"), str(src)], check=True, timeout=60)
    (p / "lib").mkdir()
    try:
        yield p
    finally:
        shutil.rmtree(p, ignore_errors=True)


def families(p: Path) -> dict[str, tuple[list[dict], bool]]:
    """``{family: (env entries, the Worker's own command triggers it)}``."""
    marks = p / "marks"
    system = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
    return {
        "BASH_ENV": ([{"name": "BASH_ENV", "value": str(p / "BASH_ENV.sh")}], True),
        "ENV": ([{"name": "ENV", "value": str(p / "ENV.sh")}], True),
        "SHELLOPTS": (
            [{"name": "SHELLOPTS", "value": "xtrace"}, {"name": "PS4", "value": f'$(: > "{marks}/SHELLOPTS-$$")'}],
            False,  # bash ignores an inherited PS4 when its uid is 0, as inside the Worker
        ),
        "PS4": ([{"name": "PS4", "value": f'$(: > "{marks}/PS4-$$")'}], False),
        "BASH_FUNC": ([{"name": "BASH_FUNC_mount%%", "value": f'() {{ : > "{marks}/BASH_FUNC-$$"; }}'}], False),
        "PROMPT_COMMAND": ([{"name": "PROMPT_COMMAND", "value": f': > "{marks}/PROMPT_COMMAND-$$"'}], False),
        "IFS": ([{"name": "IFS", "value": "/"}], False),
        "LD_PRELOAD": ([{"name": "LD_PRELOAD", "value": str(p / "payload.so")}], True),
        "LD_AUDIT": ([{"name": "LD_AUDIT", "value": str(p / "payload.so")}], True),
        "LD_LIBRARY_PATH": ([{"name": "LD_LIBRARY_PATH", "value": str(p / "lib")}], False),
        "PATH": ([{"name": "PATH", "value": f"{p / 'bin'}:{system}"}], True),
        "PYTHONPATH": ([{"name": "PYTHONPATH", "value": str(p / "py")}], True),
        "PYTHONSTARTUP": ([{"name": "PYTHONSTARTUP", "value": str(p / "startup.py")}], False),
    }


@pytest.fixture
def sup(tmp_path):
    s = SupervisorProcess(tmp_path / "root", RLARK_LOCAL_JOB_NETWORKS="1").start()
    yield s
    s.stop()


def test_no_variable_of_the_job_runs_as_a_host_uid_outside_its_range(sup, payload_dir):
    rt = sup.runtime(NODES)
    rt.ping()
    cases = families(payload_dir)
    for i, (family, (env, _)) in enumerate(cases.items()):
        job = f"esc{i}"
        env = [*env, {"name": "RLARK_TEST_MARK_NAME", "value": family}]
        rt.apply_task(manifest(job, "header", head=True, env=env, command=["bash", "-c", WORKER]))

    def done(i: int) -> bool:
        return "WORKER-DONE" in rt.read_log("rlark-system", f"esc{i}-header-0")

    try:
        wait_for(lambda: all(done(i) for i in range(len(cases))), 60, what="every Worker")
    except AssertionError:
        pass  # reported below, after the marks: a payload that ran as root matters more than a Worker that hangs
    start, count = idmap.ensure_range()

    def outside() -> dict[str, int]:
        found = {m.name: m.stat().st_uid for m in (payload_dir / "marks").iterdir()}
        return {name: uid for name, uid in found.items() if not start <= uid < start + count}

    assert not outside(), f"payloads ran as host uids outside the subordinate range {start}+{count}: {outside()}"
    assert [f for i, f in enumerate(cases) if not done(i)] == [], "these Workers never ran their command"
    # The WebTerminal and the bastion enter a Worker through a root nsenter with the Worker's env.
    for i in range(len(cases)):
        stream = rt.exec("rlark-system", f"esc{i}-header-0", ["bash", "-c", "ls / > /dev/null; echo EXEC-OK"])
        out = b""
        while (chunk := stream.read(2.0)) != b"":
            out += chunk or b""
        stream.close()
        assert b"EXEC-OK" in out, (i, out)
    assert not outside(), f"an exec ran payloads as host uids outside {start}+{count}: {outside()}"
    marks = {m.name for m in (payload_dir / "marks").iterdir()}
    for family, (_, triggered) in cases.items():
        if triggered:
            assert any(name.startswith(f"{family}-") for name in marks), f"{family} never ran, even as the job: {marks}"
    for i, family in enumerate(cases):  # the variables still reach the command
        env_txt = (Path(sup.root) / "pods" / "c1" / f"esc{i}-header-0" / "work" / "env.txt").read_text()
        if family not in ("SHELLOPTS", "BASH_FUNC", "IFS"):  # bash re-exports these in its own way
            assert f"{family}=" in env_txt, (family, env_txt[:2000])
    for i in range(len(cases)):
        rt.delete_task("rlark-system", f"esc{i}-header")


def test_the_env_memfd_round_trips_every_value(tmp_path):
    """Values with newlines, '=' and non-ASCII text reach the command unchanged; NUL is refused."""
    from clusters.runtime.local import envexec, launcher

    env = {"A": "x=y\nz", "B": "中文 text", "EMPTY": ""}
    fd = launcher.env_memfd(env)
    assert envexec.read_env(fd) == env
    with pytest.raises(ValueError):
        launcher.env_memfd({"A": "bad\0value"})
