"""Many replicas, no double work.

Two web processes (daphne) and two Celery worker processes, plus one beat, run against one PostgreSQL database and
one Redis, as in production. 50 concurrent start / stop / edit actions hit one Kubernetes job (on the fake API
server, which here only has to be one shared data plane for all processes). When everything has settled:

- every action was answered 200 and bumped the generation exactly once (final generation = initial + 50);
- the reconciles applied the final desired state: observed generation = generation; running, exactly one
  StatefulSet per Task of the final document with its replicas; stopped, no StatefulSet of a removed Task and
  every one left at 0 replicas (a Task added while stopped has none yet);
- no lost update: every annotation that a successful edit added is in the stored document (edits of different
  fields, merged concurrently), and ``spec.stopped`` agrees with the job's state.

Needs ``DATABASE_URL=postgres://...`` and ``REDIS_URL``; skipped otherwise (SQLite serves one process only).
"""

from __future__ import annotations

import json
import os
import random
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from urllib.parse import unquote, urlparse

import pytest
import yaml

from tests.fake_k8s.server import FakeKubernetes
from tests.fake_runtime import job_document

ROOT = Path(__file__).resolve().parents[2]
DB_URL = os.environ.get("DATABASE_URL", "")
REDIS_URL = os.environ.get("REDIS_URL", "")
pytestmark = pytest.mark.skipif(
    not DB_URL.startswith("postgres") or not REDIS_URL,
    reason="needs DATABASE_URL=postgres://... and REDIS_URL (several processes share one database and broker)",
)
NS = "rlark-system"
ROLE_SETS = (
    [("header", True, 1, "k8s"), ("rollout", False, 2, "k8s")],
    [("header", True, 1, "k8s"), ("rollout", False, 3, "k8s"), ("extra", False, 1, "k8s")],
    [("header", True, 1, "k8s"), ("rollout", False, 1, "k8s"), ("extra", False, 2, "k8s")],
    [("header", True, 1, "k8s"), ("rollout", False, 4, "k8s")],
)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def psql(sql: str) -> None:
    url = urlparse(DB_URL)
    subprocess.run(
        ["psql", "-h", url.hostname or "127.0.0.1", "-p", str(url.port or 5432), "-U", url.username or "postgres"]
        + ["-d", "postgres", "-v", "ON_ERROR_STOP=1", "-qc", sql],
        check=True,
        timeout=60,
        capture_output=True,
        env={**os.environ, "PGPASSWORD": unquote(url.password or "")},
    )


@pytest.fixture
def stack(tmp_path):
    """The fake data plane, a fresh database, 2 web + 2 workers + 1 beat; yields (urls, token, run_python)."""
    fake = FakeKubernetes(token="mp-token").start()
    for size in range(1, 5):  # pool pN has N nodes: a role of N Workers selects it (replicas = matched nodes)
        for n in range(size):
            fake.add_node(f"p{size}-{n}", {"rlark.io/pool": f"p{size}"}, {"cpu": 64, "memory": "256Gi"})
    db = f"rlark_mp_{uuid.uuid4().hex[:8]}"
    psql(f"CREATE DATABASE {db}")
    url = urlparse(DB_URL)
    env = {
        **os.environ,
        "DATABASE_URL": url._replace(path=f"/{db}").geturl(),
        "REDIS_URL": REDIS_URL,
        "RLARK_VAR_DIR": str(tmp_path / "var"),
        "RLARK_SECRET_KEY": "mp-secret-" + uuid.uuid4().hex,
        "RLARK_SYNC_INTERVAL": "2",
        "CELERY_TASK_ALWAYS_EAGER": "0",
        "PYTHONUNBUFFERED": "1",
    }
    env.pop("RLARK_ENCRYPTION_KEY", None)  # var/encryption.key, made by the setup below, shared by all processes
    (tmp_path / "var").mkdir()
    bin_dir = Path(sys.executable).parent
    manage = [sys.executable, str(ROOT / "manage.py")]

    def run_python(code: str) -> str:
        out = subprocess.run(
            [*manage, "shell", "-c", code], env=env, cwd=ROOT, capture_output=True, text=True, timeout=120
        )
        assert out.returncode == 0, out.stderr[-3000:]
        return out.stdout

    subprocess.run([*manage, "migrate", "-v", "0"], env=env, cwd=ROOT, check=True, timeout=300)
    kubeconfig = yaml.safe_dump(fake.kubeconfig())
    token = (
        run_python(
            "from django.contrib.auth import get_user_model; from accounts.authentication import issue_token;"
            "from clusters.models import Cluster;"
            f"Cluster.objects.create(name='k8s', runtime='kubernetes', kubeconfig={kubeconfig!r});"
            "from clusters.services.node_sync import sync_all_clusters; sync_all_clusters(force=True);"
            "u = get_user_model().objects.create_user('alice', password='alice-pass-1');"
            "print(issue_token(u, 'mp')[1])"
        )
        .strip()
        .splitlines()[-1]
    )
    logs = tmp_path / "logs"
    logs.mkdir()
    ports = [free_port(), free_port()]
    specs = {
        f"web{i}": [str(bin_dir / "daphne"), "-b", "127.0.0.1", "-p", str(p), "launcher.asgi:application"]
        for i, p in enumerate(ports)
    }
    for i in range(2):
        specs[f"worker{i}"] = [str(bin_dir / "celery"), "-A", "rlark_console", "worker", "--loglevel=INFO",
                               "--pool=threads", "--concurrency=4", "-n", f"w{i}@%h", "--without-mingle",
                               "--without-gossip"]  # fmt: skip
    specs["beat"] = [str(bin_dir / "celery"), "-A", "rlark_console", "beat", "-s", str(tmp_path / "beat")]
    procs = {}
    for name, cmd in specs.items():
        with open(logs / f"{name}.log", "wb") as out:
            procs[name] = subprocess.Popen(cmd, env=env, cwd=ROOT, stdout=out, stderr=subprocess.STDOUT,
                                           start_new_session=True)  # fmt: skip
    urls = [f"http://127.0.0.1:{p}" for p in ports]
    try:
        deadline = time.monotonic() + 60
        for base in urls:
            while True:
                try:
                    urllib.request.urlopen(f"{base}/api/v1/jobs/", timeout=2)
                except urllib.error.HTTPError:
                    break  # answering (401/403 without a token)
                except OSError:
                    assert time.monotonic() < deadline, (logs / "web0.log").read_text()[-2000:]
                    time.sleep(0.3)
        yield urls, token, run_python, fake, logs
    finally:
        for proc in procs.values():
            try:
                os.killpg(proc.pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
        for proc in procs.values():
            try:
                proc.wait(15)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
        fake.stop()
        psql(f"DROP DATABASE IF EXISTS {db} WITH (FORCE)")


def document(roles) -> dict:
    doc = job_document("mp", roles=roles, cluster="k8s")
    for task in doc["spec"]["tasks"]:
        task["nodeSelector"] = {"rlark.io/pool": f"p{task['kubernetes']['workload']['replicas']}"}
    return doc


def call(base: str, token: str, method: str, path: str, body: dict | None = None, ctype: str = "application/json"):
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(f"{base}{path}", data=data, method=method)
    req.add_header("Authorization", f"Token {token}")
    if data is not None:
        req.add_header("Content-Type", ctype)
    try:
        with urllib.request.urlopen(req, timeout=60) as resp:
            return resp.status, json.loads(resp.read() or b"{}")
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode(errors="replace")[:500]


STATE = (
    "import json; from jobs.models import Job; j = Job.objects.get(name='mp');"
    "print(json.dumps({'generation': j.generation, 'observed': j.observed_generation, 'stopped': j.stopped,"
    " 'spec': j.spec, 'tasks': {t.name: [t.replicas, t.applied_replicas] for t in j.tasks.all()}}))"
)


def test_50_concurrent_actions_on_one_job_across_two_web_and_two_workers(stack):
    urls, token, run_python, fake, logs = stack
    status, detail = call(urls[0], token, "POST", "/api/v1/jobs/", document(ROLE_SETS[0]))
    assert status == 201, detail
    start = json.loads(run_python(STATE).strip().splitlines()[-1])["generation"]

    rng = random.Random(16)
    plan = []
    for i in range(50):
        kind = ("stop", "start", "replicas", "annotate", "replicas")[i % 5]
        plan.append((i, kind, rng.choice(ROLE_SETS)))
    rng.shuffle(plan)

    def act(item):
        i, kind, roles = item
        base = urls[i % 2]
        if kind in ("stop", "start"):
            return item, call(base, token, "POST", f"/api/v1/jobs/mp/{kind}/")
        if kind == "annotate":
            patch = {"metadata": {"annotations": {f"test.rlark.io/edit-{i}": str(i)}}}
        else:
            patch = {"spec": {"tasks": document(roles)["spec"]["tasks"]}}
        return item, call(base, token, "PATCH", "/api/v1/jobs/mp/", patch, "application/merge-patch+json")

    with ThreadPoolExecutor(max_workers=16) as pool:
        answers = list(pool.map(act, plan))
    failed = [(item, answer) for item, answer in answers if answer[0] != 200]
    assert not failed, failed[:3]

    deadline = time.monotonic() + 120
    while True:
        state = json.loads(run_python(STATE).strip().splitlines()[-1])
        settled = state["observed"] == state["generation"] and all(
            applied == (0 if state["stopped"] else replicas) for replicas, applied in state["tasks"].values()
        )
        if settled:
            break
        assert time.monotonic() < deadline, (state, (logs / "worker0.log").read_text()[-3000:])
        time.sleep(1)

    assert state["generation"] == start + 50  # every action counted once: no generation bump lost
    spec = state["spec"]
    assert (spec["spec"].get("stopped") is True) == state["stopped"]
    annotations = spec["metadata"].get("annotations") or {}
    for i, kind, _roles in plan:
        if kind == "annotate":
            assert annotations.get(f"test.rlark.io/edit-{i}") == str(i), f"edit {i} was lost"
    wanted = {f"mp-{t['name']}": t["kubernetes"]["workload"]["replicas"] for t in spec["spec"]["tasks"]}
    assert set(state["tasks"]) == set(wanted)
    time.sleep(1)  # let the last scale reach the fake
    sets = {s["metadata"]["name"]: s["spec"]["replicas"] for s in fake.list("statefulsets", NS, "rlinf.io/job=mp")}
    if state["stopped"]:
        # stopped: every StatefulSet left is scaled to 0, none of a removed Task; a Task added while the job was
        # stopped has none (nothing to scale down; the next start creates it)
        assert set(sets) <= set(wanted), (sets, wanted)
        assert all(replicas == 0 for replicas in sets.values()), sets
    else:
        assert sets == wanted, (sets, wanted)  # exactly one StatefulSet per Task, none left over
