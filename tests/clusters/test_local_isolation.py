"""Unprivileged Workers on the local runtime (real supervisor, real namespaces, no Ray): a Worker started by a
root supervisor runs as an unprivileged host uid of its job's subordinate range, and cannot read the
console's keys, database or source, nor another job's working directory; nor can a WebTerminal shell
in it. The venv's Python still runs inside (at its own path, read-only). ``var/`` is 0700 with 0600 files.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest
from django.conf import settings

from clusters.runtime.local import idmap
from tests.clusters.test_local_runtime_support import ROOT, SupervisorProcess, manifest, nodes_spec, wait_for

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="id-mapped Workers are what a root supervisor starts")

NODES = nodes_spec(("n1", {}, {"cpu": 8}))


def host_ids(pid: int) -> tuple[int, int, list[int]]:
    """(real uid, real gid, supplementary groups) of ``pid`` as the host sees them."""
    status = Path(f"/proc/{pid}/status").read_text()
    uid = int(re.search(r"^Uid:\s+(\d+)", status, re.M).group(1))
    gid = int(re.search(r"^Gid:\s+(\d+)", status, re.M).group(1))
    groups = [int(g) for g in re.search(r"^Groups:(.*)$", status, re.M).group(1).split()]
    return uid, gid, groups


def probe_script(targets: dict[str, str]) -> str:
    lines = [
        'probe() { if out=$(cat -- "$2" 2>&1); then echo "PROBE $1 READ"; else echo "PROBE $1 DENIED $out"; fi; }',
        'echo "ID $(id)"',
        "echo \"UIDMAP $(awk '{print $1, $2, $3}' /proc/self/uid_map)\"",
        *(f"probe {name} '{path}'" for name, path in targets.items()),
        '"$RLARK_LOCAL_PYTHON" -c "import ray, sys; print(\'PYTHON-OK\', sys.prefix)"',
        'for d in /dev/shm /var/tmp; do echo "PRIVATE $d $(ls -A $d | wc -l) $(stat -c %a $d)"; done',
        "touch /dev/shm/from-a-worker /var/tmp/from-a-worker",
        "echo PROBES-DONE",
        "trap 'exit 0' TERM; sleep 600 & wait",
    ]
    return "\n".join(lines)


@pytest.fixture
def sup(tmp_path):
    s = SupervisorProcess(tmp_path / "root").start()
    yield s
    s.stop()


def test_worker_runs_unprivileged_and_sees_none_of_the_console(sup):
    rt = sup.runtime(NODES)
    rt.ping()
    victim_cmd = ["bash", "-c", "echo top-secret > /rlark/work/secret.txt; trap 'exit 0' TERM; sleep 600 & wait"]
    rt.apply_task(manifest("victim", "header", head=True, command=victim_cmd))
    victim_secret = Path(sup.root) / "pods" / "c1" / "victim-header-0" / "work" / "secret.txt"
    wait_for(victim_secret.exists, 20, what="the other job's file")

    targets = {
        "encryption-key": str(Path(settings.VAR_DIR) / "encryption.key"),
        "secret-key": str(Path(settings.VAR_DIR) / "secret.key"),
        # the default SQLite database (pytest-django's test database may be in memory)
        "database": str(Path(settings.VAR_DIR) / "db.sqlite3"),
        "broker": str(Path(settings.VAR_DIR) / "celery-broker.sqlite3"),
        "other-job-work": str(victim_secret),
        "source-manage": str(ROOT / "manage.py"),
        "source-settings": str(ROOT / "rlark_console" / "settings.py"),
        "supervisor-state": str(Path(sup.root) / "state.json"),
    }
    rt.apply_task(manifest("probe", "header", head=True, command=["bash", "-c", probe_script(targets)]))
    log = wait_for(
        lambda: "PROBES-DONE" in (t := rt.read_log("rlark-system", "probe-header-0")) and t, 60, what="probes"
    )
    for name in targets:
        line = next((x for x in log.splitlines() if x.startswith(f"PROBE {name} ")), "")
        assert "DENIED" in line and "Permission denied" in line, f"{name}: {line!r}\n{log}"
    assert "PYTHON-OK" in log, log  # the venv's python and ray still run, from a read-only bind
    assert "PRIVATE /dev/shm 0 1777" in log and "PRIVATE /var/tmp 0 1777" in log, log  # not the host's
    assert not Path("/dev/shm/from-a-worker").exists() and not Path("/var/tmp/from-a-worker").exists()
    assert re.search(r"^ID uid=0\(root\) gid=0\(root\)", log, re.M), log  # root inside ...

    # ... an unprivileged uid of the job's subordinate slot outside, another one for the other job
    start, _count = idmap.ensure_range()
    uids = {}
    for job in ("probe", "victim"):
        ns_pid = rt.pod_info(f"{job}-header-0")["ns_pid"]
        uid, gid, groups = host_ids(ns_pid)
        assert uid >= start and uid == gid and groups in ([], [uid]), (job, uid, gid, groups)
        uids[job] = uid
    assert f"UIDMAP 0 {uids['probe']} {idmap.SLOT}" in log, log
    assert uids["probe"] != uids["victim"]
    assert (uids["probe"] - start) % idmap.SLOT == 0

    # The WebTerminal enters the same namespaces as the same unprivileged user.
    stream = rt.exec("rlark-system", "probe-header-0")
    shell = wait_for(lambda: _shell(stream._proc.pid), 10, what="the shell inside the Worker")
    assert host_ids(shell)[0] == uids["probe"] and host_ids(shell)[1] == uids["probe"]
    key = targets["encryption-key"]
    commands = f"id -u; cat {key}; cat {ROOT / 'manage.py'} | head -1; touch ok && echo WROTE; exit\n"
    stream.write(commands.encode())
    out = b""
    while (chunk := stream.read(2.0)) != b"":
        out += chunk or b""
    stream.close()
    text = out.decode(errors="replace")
    assert f"cat: {key}: Permission denied" in text, text
    assert f"cat: {ROOT / 'manage.py'}: Permission denied" in text, text
    assert "WROTE" in text  # it starts in its own work directory (inside the Worker), which is writable
    assert (Path(sup.root) / "pods" / "c1" / "probe-header-0" / "work" / "ok").exists()
    for job in ("probe", "victim"):
        rt.delete_task("rlark-system", f"{job}-header")


def _shell(nsenter_pid: int) -> int | None:
    """PID of the shell nsenter started in the Worker's namespaces (once exec'd: named bash)."""
    import psutil

    try:
        procs = [psutil.Process(nsenter_pid), *psutil.Process(nsenter_pid).children(recursive=True)]
    except psutil.Error:
        return None
    for proc in procs:
        try:
            other_ns = os.readlink(f"/proc/{proc.pid}/ns/user") != os.readlink("/proc/self/ns/user")
            if other_ns and proc.name() == "bash":
                return proc.pid
        except (OSError, psutil.Error):
            continue
    return None


def test_var_dir_files_are_private(tmp_path):
    from rlark_console.settings import secure_var_dir

    var = tmp_path / "var"
    var.mkdir(mode=0o755)
    (var / "encryption.key").write_text("k")
    (var / "logs").mkdir(mode=0o755)
    secure_var_dir(var, ("db.sqlite3",))
    assert var.stat().st_mode & 0o777 == 0o700
    assert (var / "db.sqlite3").stat().st_mode & 0o777 == 0o600
    assert (var / "encryption.key").stat().st_mode & 0o777 == 0o600
    assert (var / "logs").stat().st_mode & 0o777 == 0o700
    # the running console's own var/
    assert Path(settings.VAR_DIR).stat().st_mode & 0o777 == 0o700
    for entry in Path(settings.VAR_DIR).iterdir():
        if entry.is_file():
            assert entry.stat().st_mode & 0o077 == 0, entry


SERVICE_PROBE = r"""
import socket, sys
def ask(port, data):
    with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
        s.sendall(data)
        return s.recv(200)
if sys.argv[1] == "redis":
    print("REDIS", ask(int(sys.argv[2]), b"PING\r\n").decode(errors="replace").strip())
else:
    import psycopg
    try:
        psycopg.connect(host="127.0.0.1", port=int(sys.argv[2]), user=sys.argv[3], dbname="postgres",
                        connect_timeout=5).close()
        print("POSTGRES CONNECTED")
    except psycopg.OperationalError as exc:
        print("POSTGRES REFUSED", str(exc).strip().splitlines()[-1])
"""


@pytest.mark.skipif(
    not (os.environ.get("DATABASE_URL", "").startswith("postgres") and os.environ.get("REDIS_URL")),
    reason="the console's PostgreSQL and Redis are what CI runs (DATABASE_URL, REDIS_URL)",
)
def test_a_worker_on_the_hosts_loopback_cannot_use_the_consoles_postgres_or_redis(tmp_path):
    """With job networks off (``RLARK_LOCAL_JOB_NETWORKS=0``, what an unprivileged console runs), local Workers
    share the host's loopback, where the console's PostgreSQL and Redis listen: without the console's credentials
    (which no Worker gets: its environment is built from scratch) both refuse it. (With job networks, the default,
    they are not even reachable: tests/clusters/test_local_job_networks.py.)"""
    from urllib.parse import urlparse

    db, redis = urlparse(os.environ["DATABASE_URL"]), urlparse(os.environ["REDIS_URL"])
    assert db.hostname in ("127.0.0.1", "localhost") and redis.hostname in ("127.0.0.1", "localhost")
    sup = SupervisorProcess(tmp_path / "shared-loopback", RLARK_LOCAL_JOB_NETWORKS="0").start()
    rt = sup.runtime(NODES)
    rt.ping()
    probe = f"\"$RLARK_LOCAL_PYTHON\" - {{}} <<'PY'\n{SERVICE_PROBE}\nPY\n"
    command = [
        "bash",
        "-c",
        'env | grep -ciE "DATABASE_URL|REDIS_URL|PASSWORD" | sed "s/^/LEAKED-VARS /"\n'
        + probe.format(f"postgres {db.port or 5432} {db.username or 'postgres'}")
        + probe.format(f"redis {redis.port or 6379}")
        + "echo SERVICES-DONE; trap 'exit 0' TERM; sleep 600 & wait",
    ]
    rt.apply_task(manifest("svc", "header", head=True, command=command))
    log = wait_for(
        lambda: "SERVICES-DONE" in (t := rt.read_log("rlark-system", "svc-header-0")) and t, 60, what="service probes"
    )
    rt.delete_task("rlark-system", "svc-header")
    sup.stop()
    assert "LEAKED-VARS 0" in log, log
    assert "POSTGRES REFUSED" in log and "password" in log.lower(), log
    assert "REDIS -NOAUTH" in log, log


def test_exec_right_after_the_worker_starts_enters_its_namespaces(sup):
    """A WebTerminal or SSH session opened the moment a Worker starts used to fail with "nsenter: reassociate to
    namespace 'ns/user' failed" (its PID 1 had not entered the id-mapped user namespace yet): exec now waits for it."""
    rt = sup.runtime(NODES)
    rt.ping()
    for i in range(4):
        rt.apply_task(manifest(f"early{i}", "header", head=True, command=["bash", "-c", "sleep 600"]))
        stream = rt.exec("rlark-system", f"early{i}-header-0", ["bash", "-c", "echo IN-$(id -u)-$(hostname)"])
        out = b""
        while (chunk := stream.read(5.0)) != b"":
            out += chunk or b""
        stream.close()
        assert f"IN-0-early{i}-header-0" in out.decode(errors="replace"), out
        rt.delete_task("rlark-system", f"early{i}-header")
