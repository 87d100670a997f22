"""Web tier throughput: 8 connections vs 1 against ``manage.py serve_web``, as a ratio, with p99.

Seeds ``--jobs`` jobs (``tests/fleet_seed.py``) into a database of the bench's own, starts the web tier on
loopback with ``--workers`` daphne processes (default: 2 per core, as ``make run``) and, for comparison, with one
(the single daphne of before), then for each runs keep-alive clients that GET ``/api/v1/jobs/?limit=20`` (an API
token of a staff user, who sees every job) for ``--seconds`` at 1 and at 8 connections. Prints requests per
second, p50/p99/max latency, and the ratio 8-connection / 1-connection throughput. Goals: ratio >= 1.7,
p99 <= 500 ms, no stall (max <= 5 s).

Usage::

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/bench_web .venv/bin/python bench/web.py [--jobs 10000]

(the named PostgreSQL database is dropped and re-created; without ``DATABASE_URL``, SQLite in a temp dir).
``--quick`` / ``RLARK_BENCH_QUICK=1``: 50 jobs, 1 s per point, no single-worker comparison. The client
shares the machine's cores with the server, as ``wrk`` would.
"""

from __future__ import annotations

import argparse
import collections
import http.client
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.quick import quick_defaults  # noqa: E402
from tests.processes import stop_group  # noqa: E402

URL = "/api/v1/jobs/?limit=20"
SEED = """
from django.contrib.auth import get_user_model
from accounts.authentication import issue_token
from clusters.models import Cluster
from tests.fleet_seed import seed_jobs
users = get_user_model()
owners = users.objects.bulk_create([users(username=f"user{i:03d}", password="!") for i in range(100)])
staff = users.objects.create(username="bench-ops", password="!", is_staff=True, is_superuser=True)
cluster = Cluster.objects.create(name="alpha", runtime="local", namespace="rlark", status="online")
seed_jobs(JOBS, owners, cluster)
print("TOKEN", issue_token(staff, "bench")[1])
"""


def database_url(tmp: Path) -> str:
    url = os.environ.get("DATABASE_URL", "")
    if not url.startswith(("postgres://", "postgresql://")):
        return f"sqlite:///{tmp / 'web.sqlite3'}"
    import psycopg

    base, _, name = url.rpartition("/")
    with psycopg.connect(f"{base}/postgres", autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        conn.execute(f'CREATE DATABASE "{name}"')
    return url


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_tier(env: dict, workers: int, log: Path) -> tuple[subprocess.Popen, int]:
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, str(ROOT / "manage.py"), "serve_web", "--port", str(port), "--workers", str(workers)],
        env=env,
        cwd=ROOT,
        stdout=log.open("a"),
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        try:
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
            conn.request("GET", "/login/")
            conn.getresponse().read()
            conn.close()
            return proc, port
        except OSError:
            time.sleep(0.3)
    proc.kill()
    raise RuntimeError(f"web tier did not start: {log.read_text()[-2000:]}")


def stop_tier(proc: subprocess.Popen) -> None:
    stop_group(proc)


def load(port: int, token: str, connections: int, seconds: float) -> dict:
    """``connections`` keep-alive clients for ``seconds``: requests per second and latency percentiles (ms)."""
    latencies: list[float] = []
    errors: collections.Counter[str] = collections.Counter()  # what failed: HTTP status or exception name
    lock = threading.Lock()
    stop_at = time.monotonic() + seconds

    def client() -> None:
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
        mine = []
        while time.monotonic() < stop_at:
            t0 = time.perf_counter()
            try:
                conn.request("GET", URL, headers={"Authorization": f"Token {token}"})
                response = conn.getresponse()
                response.read()
                ok = response.status == 200
                failure = str(response.status)
            except OSError as exc:
                ok = False
                failure = type(exc).__name__
                conn.close()
                conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
            mine.append((time.perf_counter() - t0) * 1000)
            if not ok:
                with lock:
                    errors[failure] += 1
        conn.close()
        with lock:
            latencies.extend(mine)

    threads = [threading.Thread(target=client) for _ in range(connections)]
    t0 = time.monotonic()
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=seconds + 60)
    elapsed = time.monotonic() - t0
    ordered = sorted(latencies) or [0.0]
    return {
        "rps": len(latencies) / elapsed,
        "p50": statistics.median(ordered),
        "p99": ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))],
        "max": ordered[-1],
        "errors": sum(errors.values()),
        "failures": ", ".join(f"{k} x{v}" for k, v in errors.most_common()),
        "requests": len(latencies),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=10_000)
    parser.add_argument("--seconds", type=float, default=15)
    parser.add_argument("--workers", type=int, default=0, help="web workers (default: serve_web's, 2 per core)")
    quick_defaults(parser, jobs=50, seconds=1)
    args = parser.parse_args()
    from rlark_console.webserver import default_workers

    workers = args.workers or default_workers()
    tmp = Path(tempfile.mkdtemp(prefix="rlark-bench-web-"))
    env = {
        **os.environ,
        "RLARK_VAR_DIR": str(tmp / "var"),
        "DATABASE_URL": database_url(tmp),
        "DEBUG": "0",
        "ALLOWED_HOSTS": "127.0.0.1",
        "PYTHONUNBUFFERED": "1",
        "LOG_LEVEL": "WARNING",
    }
    env.pop("DJANGO_SETTINGS_MODULE", None)
    manage = [sys.executable, str(ROOT / "manage.py")]
    subprocess.run([*manage, "migrate", "--noinput", "-v0"], env=env, cwd=ROOT, check=True, timeout=600)
    t0 = time.monotonic()
    out = subprocess.run(
        [*manage, "shell", "-c", SEED.replace("JOBS", str(args.jobs))],
        env=env,
        cwd=ROOT,
        check=True,
        timeout=1800,
        capture_output=True,
        text=True,
    ).stdout
    token = out.split("TOKEN", 1)[1].split()[0]
    print(f"seeded {args.jobs} jobs in {time.monotonic() - t0:.0f} s; database {env['DATABASE_URL'].split(':')[0]}")
    results = {}
    for count in dict.fromkeys((workers,) if args.quick else (workers, 1)):  # quick: no single-worker comparison
        proc, port = start_tier(env, count, tmp / "web.log")
        try:
            load(port, token, 2, min(2.0, args.seconds))  # warm every worker's connections and caches
            results[count] = {c: load(port, token, c, args.seconds) for c in (1, 8)}
        finally:
            stop_tier(proc)
    print(f"GET {URL} for {args.seconds:.0f} s per point, {os.cpu_count()} cores (client and server share them)")
    for count, points in results.items():
        for c, r in points.items():
            print(
                f"  {count} worker(s), {c} connection(s): {r['rps']:6.1f} rps  p50 {r['p50']:6.1f} ms  "
                f"p99 {r['p99']:7.1f} ms  max {r['max']:7.1f} ms  errors {r['errors']}"
                + (f" ({r['failures']})" if r["errors"] else "")
            )
        ratio = points[8]["rps"] / points[1]["rps"]
        p99 = points[8]["p99"]
        print(f"  {count} worker(s): ratio 8/1 connections {ratio:.2f} (goal >= 1.7), p99 at 8 {p99:.0f} ms")
    if 1 in results and workers != 1:
        gain = results[workers][8]["rps"] / results[1][8]["rps"]
        print(f"throughput at 8 connections, {workers} workers vs 1: {gain:.2f}x")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
