"""Scale benchmark on the REAL control plane with kwok. Not a test.

Starts ``--clusters`` control planes of ``tools/k8s`` (etcd, kube-apiserver, kube-controller-manager,
kube-scheduler, kwok on 127.0.0.1; one per console cluster, because the console's validator matches a
nodeSelector against the nodes of ALL clusters, and namespaces of one control plane would all see the same
Nodes), ``--nodes`` kwok GPU nodes in all (8 GPUs each), registers one console cluster per control plane through
``POST /api/v1/clusters/`` with the ``rlark-console`` ServiceAccount of ``deploy/rbac.yaml``, and prints:

1. submit -> all Workers Running for ``--jobs`` jobs x ``--workers`` Workers (a Header + ``workers-1``
   Rollout Workers, 4 GPUs each): the console (``POST /api/v1/jobs/`` in-process through DRF's APIClient with
   Celery eager, so each POST applies its manifests at once; then forced sync cycles until the console's own
   status shows every Worker Running) against a plain ``kubectl apply --server-side`` of the same objects (the
   console's own ``jobs.jobspec.manifests.build_task_manifests``) into namespace ``bench-raw``, polled with list
   calls; both as seen by the caller and from the Pods' own Ready transition times;
2. one periodic sync cycle of all clusters (``jobs.observe.sync.sync_all_clusters()``, nothing changed)
   against the raw list calls of the same objects through the official client, JSON decoded (per cluster:
   nodes, Pods and StatefulSets of the console's namespace), as a ratio; at ``--jobs`` active jobs and again
   at ``--big`` active jobs (the extra jobs are single-Worker Header-only jobs pinned to one node each by
   ``kubernetes.io/hostname``, so 1,000 jobs means 1,900 Pods with the defaults). ``--big-mode seed`` (default)
   creates them without POSTs, to fit the budget: the Job/Task rows as create_job + reconcile leave them and the
   console's own manifests server-side applied; ``--big-mode post`` POSTs them (~0.8 s each on 2 cores today);
3. DB queries per sync cycle (``CaptureQueriesContext``) at both sizes;
4. peak RSS (VmHWM) of this console process and of every control-plane process.

Node labels: every node carries ``pool=<cluster>-<i % 4>`` and ``rlark.io/bench-slot=<job>-header`` or
``<job>-rollout``, so a job's Header selector matches exactly one node and its Rollout selector exactly
``workers-1`` nodes (the validator's ``header_match_not_one`` / ``replicas_mismatch`` rules).

Database: ``DATABASE_URL`` (PostgreSQL or SQLite; a throwaway ``test_`` database is created and dropped), else
a SQLite file under a temporary ``RLARK_VAR_DIR``. Every wait has a timeout; ``--budget`` seconds (default 840)
bounds the whole run: the ``--big`` point is shrunk to what fits and says so. Every control plane is stopped.

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/bench_k8s .venv/bin/python bench/k8s_scale.py
    .venv/bin/python bench/k8s_scale.py --clusters 3 --nodes 1000 --jobs 100 --workers 10 --big 1000
"""

from __future__ import annotations

import argparse
import collections
import datetime as dt
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from types import SimpleNamespace

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
VAR = Path(tempfile.mkdtemp(prefix="rlark-bench-k8s-"))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "rlark_console.settings")
os.environ["RLARK_VAR_DIR"] = str(VAR)
os.environ["CELERY_TASK_ALWAYS_EAGER"] = "1"
os.environ.setdefault("LOG_LEVEL", "ERROR")
os.environ.setdefault("RLARK_CLUSTER_SYNC_DEADLINE", "60")  # measure slow cycles on a loaded machine, do not cut them

import django  # noqa: E402

django.setup()

import logging  # noqa: E402

import yaml  # noqa: E402
from django.db import connection  # noqa: E402
from django.test.utils import CaptureQueriesContext, setup_test_environment  # noqa: E402
from django.utils import timezone  # noqa: E402

from bench.quick import quick_defaults, wait_for  # noqa: E402
from tools.k8s.controlplane import ControlPlane, missing_binaries  # noqa: E402
from tools.k8s.fleet import NodeSpec, add_nodes, console_kubeconfig  # noqa: E402

NAMESPACE = "rlark-bench"
RAW_NAMESPACE = "bench-raw"
GPUS = 4  # per Worker, on 8-GPU nodes: a 10-Worker job's Pod and a single-Worker job's Pod share a node
IMAGE = "registry.example.com/rlinf/rlinf:0.2.1"
T0 = time.monotonic()


class Budget:
    def __init__(self, seconds: float) -> None:
        self.deadline = time.monotonic() + seconds

    def left(self) -> float:
        return self.deadline - time.monotonic()

    def cap(self, timeout: float) -> float:
        return max(1.0, min(timeout, self.left()))


def log(msg: str) -> None:
    print(f"[{time.monotonic() - T0:6.1f}s] {msg}", file=sys.stderr, flush=True)


# --- documents and nodes ---------------------------------------------------------------------------------------


def role(name: str, *, head: bool, replicas: int, selector: dict[str, str], cluster: str) -> dict:
    container = {
        "name": "main",
        "image": IMAGE,
        "resources": {"requests": {"nvidia.com/gpu": str(GPUS)}, "limits": {"nvidia.com/gpu": str(GPUS)}},
    }
    out = {
        "name": name,
        "head": head,
        "agentType": "Kubernetes",
        "role": "Actor" if head else "Rollout",
        "cluster": cluster,
        "nodeSelector": selector,
        "kubernetes": {
            "workload": {"kind": "StatefulSet", "replicas": replicas, "template": {"spec": {"containers": [container]}}}
        },
    }
    if head:
        out["runScript"] = "python train.py"
    return out


def job_document(name: str, cluster: str, workers: int) -> dict:
    tasks = [role("header", head=True, replicas=1, selector={"rlark.io/bench-slot": f"{name}-header"}, cluster=cluster)]
    if workers > 1:
        tasks.append(
            role(
                "rollout",
                head=False,
                replicas=workers - 1,
                selector={"rlark.io/bench-slot": f"{name}-rollout"},
                cluster=cluster,
            )
        )
    return {"apiVersion": "rlinf.io/v1alpha1", "kind": "Job", "metadata": {"name": name}, "spec": {"tasks": tasks}}


def solo_document(name: str, cluster: str, node: str) -> dict:
    head = role("header", head=True, replicas=1, selector={"kubernetes.io/hostname": node}, cluster=cluster)
    return {"apiVersion": "rlinf.io/v1alpha1", "kind": "Job", "metadata": {"name": name}, "spec": {"tasks": [head]}}


def plan(clusters: int, jobs: int, workers: int, nodes: int) -> tuple[list[list[NodeSpec]], list[tuple[str, int]]]:
    """Nodes per cluster and (job name, cluster index) of the ``jobs`` multi-Worker jobs (round robin)."""
    placed = [(f"bench-{k:03d}", k % clusters) for k in range(jobs)]
    per = [sum(1 for _, c in placed if c == i) * workers for i in range(clusters)]
    spare = max(0, nodes - sum(per))
    for i in range(clusters):
        per[i] += spare // clusters + (1 if i < spare % clusters else 0)
    fleet: list[list[NodeSpec]] = []
    for i in range(clusters):
        slots: list[str] = []
        for name, c in placed:
            if c == i:
                slots += [f"{name}-header"] + [f"{name}-rollout"] * (workers - 1)
        specs = []
        for j in range(per[i]):
            labels = {"rlark.io/node-category": "cloud", "rlark.io/gpu-model": "A800", "pool": f"bench-{i}-{j % 4}"}
            if j < len(slots):
                labels["rlark.io/bench-slot"] = slots[j]
            specs.append(NodeSpec(name=f"c{i}-n{j:04d}", labels=labels, gpus=8))
        fleet.append(specs)
    return fleet, placed


# --- Kubernetes clients -----------------------------------------------------------------------------------------


def client_for(kubeconfig: dict):
    import kubernetes

    return kubernetes.config.new_client_from_config_dict(kubeconfig)


def raw_json(fn, *args, **kwargs) -> dict:
    resp = fn(*args, _preload_content=False, **kwargs)
    try:
        return json.loads(resp.data)
    finally:
        resp.release_conn()


def pods_state(core, namespace: str) -> tuple[int, int, float | None]:
    """(Pods, Running Pods, latest Ready transition as epoch seconds or None) of ``namespace``."""
    items = raw_json(core.list_namespaced_pod, namespace)["items"]
    running = 0
    latest = None
    for p in items:
        if (p.get("status") or {}).get("phase") == "Running":
            running += 1
        for cond in (p.get("status") or {}).get("conditions") or []:
            if cond.get("type") == "Ready" and cond.get("status") == "True" and cond.get("lastTransitionTime"):
                ts = dt.datetime.fromisoformat(cond["lastTransitionTime"].replace("Z", "+00:00")).timestamp()
                latest = ts if latest is None else max(latest, ts)
    return len(items), running, latest


def ready_nodes(core) -> int:
    n = 0
    for node in raw_json(core.list_node)["items"]:
        for cond in (node.get("status") or {}).get("conditions") or []:
            if cond["type"] == "Ready" and cond["status"] == "True":
                n += 1
    return n


def apply_logs(cp: ControlPlane, pods: list[str], logfile: Path) -> None:
    """kwok ``Logs`` objects so the Headers' ``pods/log`` shows a ready Ray cluster with a running script."""
    docs = [
        {
            "apiVersion": "kwok.x-k8s.io/v1alpha1",
            "kind": "Logs",
            "metadata": {"name": pod, "namespace": NAMESPACE},
            "spec": {"logs": [{"containers": ["main"], "logsFile": str(logfile), "follow": True}]},
        }
        for pod in pods
    ]
    if docs:
        cp.kubectl("apply", "--server-side", "-f", "-", input=yaml.safe_dump_all(docs), timeout=120)


def vm_hwm_kib(pid: int) -> int:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
    except OSError:
        pass
    return 0


def seed_jobs(owner, solos: list[tuple[str, int, str]], clusters: int) -> None:
    """Create single-Worker jobs without the REST round trip, the validator and the per-job sync: the Job and
    Task rows exactly as ``create_job`` + ``controller.reconcile`` leave them (generation observed, Tasks
    applied), and the console's own manifests (``controller._manifests``) server-side applied like the runtime's
    ``apply_task`` does."""
    import kubernetes

    from clusters.models import Cluster
    from jobs.control import controller
    from jobs.jobspec.document import clean, display_name, normalize
    from jobs.models import Job, Task

    by_name = {c.name: c for c in Cluster.objects.all()}
    manifests: dict[str, list] = {name: [] for name in by_name}
    now = timezone.now()
    for name, c, node in solos:
        doc = clean(normalize(solo_document(name, f"bench-{c}", node)))
        job = Job.objects.create(
            name=name,
            display_name=display_name(doc),
            owner=owner,
            spec=doc,
            generation=2,
            observed_generation=2,
            started_at=now,
        )
        cluster = by_name[f"bench-{c}"]
        for p in controller.task_plan(job):
            Task.objects.create(
                job=job,
                template_name=p["template"],
                name=p["name"],
                cluster=cluster,
                namespace=cluster.namespace,
                role=p["role"],
                display_role=p["display_role"],
                head=p["head"],
                order=p["order"],
                replicas=p["replicas"],
                rank_start=p["rank_start"],
                applied_replicas=p["replicas"],
                applied_attempt=job.attempt,
            )
        manifests[cluster.name] += list(controller._manifests(job, {cluster.name: cluster}).values())
    # The same server-side apply as KubernetesRuntime._apply (field manager, force, apply-patch content type), but
    # reading each response: _apply releases its connection unread, and back-to-back applies then read the previous
    # body as the next status line (http.client BadStatusLine -> "connection failed"), see the report.
    from clusters.runtime.kubernetes.client import api_client_for
    from clusters.runtime.kubernetes.runtime import APPLY, FIELD_MANAGER

    for name, cluster in by_name.items():
        api = api_client_for(cluster)
        core, apps = kubernetes.client.CoreV1Api(api), kubernetes.client.AppsV1Api(api)
        fns = {
            "StatefulSet": apps.patch_namespaced_stateful_set,
            "Service": core.patch_namespaced_service,
            "ConfigMap": core.patch_namespaced_config_map,
        }
        for m in manifests[name]:
            for obj in [*m.extra_objects, m.workload]:
                meta = obj["metadata"]
                raw_json(
                    fns[obj["kind"]],
                    meta["name"],
                    meta["namespace"],
                    obj,
                    field_manager=FIELD_MANAGER,
                    force=True,
                    _content_type=APPLY,
                    _request_timeout=60,
                )


# --- the benchmark ----------------------------------------------------------------------------------------------


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clusters", type=int, default=3)
    parser.add_argument("--nodes", type=int, default=1000, help="kwok nodes in all")
    parser.add_argument("--jobs", type=int, default=100)
    parser.add_argument("--workers", type=int, default=10, help="Workers per job (Header + workers-1 Rollout)")
    parser.add_argument("--big", type=int, default=1000, help="active jobs at the second point (0: skip)")
    parser.add_argument(
        "--big-mode",
        choices=("seed", "post"),
        default="seed",
        help="create the extra single-Worker jobs of --big through POST /api/v1/jobs/ (slow: ~1 s each today) or "
        "seed them: Job/Task rows as reconcile writes them, the console's manifests server-side applied",
    )
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--budget", type=float, default=840, help="seconds for the whole run")
    quick_defaults(parser, clusters=1, nodes=4, jobs=2, workers=2, big=0, rounds=1, budget=80)
    args = parser.parse_args()
    if args.jobs * args.workers > args.nodes:
        parser.error("--jobs x --workers must not exceed --nodes (one Worker of a job per node)")
    logging.disable(logging.WARNING)
    budget = Budget(args.budget)
    missing = missing_binaries()
    if missing:
        sys.exit(f"control plane binaries missing: {', '.join(missing)} (run `make k8s-build`)")

    setup_test_environment()
    old_name = connection.creation.create_test_db(verbosity=0, keepdb=False)
    cps: list[ControlPlane] = []
    try:
        fleet, placed = plan(args.clusters, args.jobs, args.workers, args.nodes)
        log(f"starting {args.clusters} control planes")
        with ThreadPoolExecutor(args.clusters) as pool:
            futures = [pool.submit(ControlPlane.start) for _ in range(args.clusters)]
            errors = []
            for f in futures:
                try:
                    cps.append(f.result())
                except Exception as exc:  # noqa: BLE001 - stop the ones that did start, then fail
                    errors.append(exc)
            if errors:
                raise errors[0]
        log(f"{len(cps)} control planes up")
        admins = [client_for(json.loads(cp.admin_kubeconfig.read_text())) for cp in cps]
        import kubernetes

        admin_core = [kubernetes.client.CoreV1Api(a) for a in admins]

        def add_fleet(cp: ControlPlane, specs: list[NodeSpec]) -> None:
            for k in range(0, len(specs), 50):  # fleet.add_nodes runs one kubectl with a 60 s timeout
                add_nodes(cp, specs[k : k + 50])

        with ThreadPoolExecutor(args.clusters) as pool:
            list(pool.map(add_fleet, cps, fleet))
        log("nodes created")
        wait_for(
            lambda: all(ready_nodes(c) >= len(s) for c, s in zip(admin_core, fleet, strict=True)),
            budget.cap(120),
            "kwok nodes Ready",
            interval=1,
        )
        log(f"{sum(len(s) for s in fleet)} nodes Ready")

        # --- (1a) plain kubectl apply of the console's own manifests -------------------------------------------
        from jobs.jobspec.manifests import build_task_manifests

        raw_clusters = {
            f"bench-{i}": SimpleNamespace(name=f"bench-{i}", namespace=RAW_NAMESPACE) for i in range(args.clusters)
        }
        docs_by_cp: list[list[dict]] = [[] for _ in cps]
        for name, c in placed:
            for m in build_task_manifests(
                name, job_document(name, f"bench-{c}", args.workers), clusters=raw_clusters, registries=[]
            ):
                docs_by_cp[c] += [*m.extra_objects, m.workload]
        for cp in cps:
            cp.kubectl("create", "namespace", RAW_NAMESPACE)
        pods_total = args.jobs * args.workers
        t_raw0 = time.time()
        procs = [
            subprocess.Popen(
                [str(cp.bins / "kubectl"), f"--kubeconfig={cp.admin_kubeconfig}", "apply", "--server-side", "-f", "-"],
                stdin=subprocess.PIPE,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.PIPE,
                text=True,
            )
            for cp in cps
        ]
        for proc, docs in zip(procs, docs_by_cp, strict=True):
            proc.stdin.write(yaml.safe_dump_all(docs))
            proc.stdin.close()
        for proc in procs:
            if proc.wait(timeout=budget.cap(180)) != 0:
                raise RuntimeError(f"kubectl apply failed: {proc.stderr.read()}")
        raw_applied = time.time() - t_raw0

        def raw_all_running():
            states = [pods_state(c, RAW_NAMESPACE) for c in admin_core]
            return states if sum(s[1] for s in states) >= pods_total else None

        states = wait_for(raw_all_running, budget.cap(300), f"{pods_total} bench-raw Pods Running")
        raw_seen = time.time() - t_raw0
        raw_ready = max(s[2] for s in states if s[2]) - t_raw0
        log(f"kubectl: applied in {raw_applied:.1f} s, all Running seen at {raw_seen:.1f} s")

        # StatefulSets orphan their Pods (nothing re-creates them), then one DELETE collection with grace 0
        def wipe(i: int) -> None:
            kubernetes.client.AppsV1Api(admins[i]).delete_collection_namespaced_stateful_set(
                RAW_NAMESPACE, propagation_policy="Orphan", _request_timeout=120
            )
            admin_core[i].delete_collection_namespaced_pod(RAW_NAMESPACE, grace_period_seconds=0, _request_timeout=120)

        with ThreadPoolExecutor(args.clusters) as pool:
            list(pool.map(wipe, range(len(cps))))
        for cp in cps:
            cp.kubectl("delete", "namespace", RAW_NAMESPACE, "--wait=false")
        wait_for(
            lambda: all(pods_state(c, RAW_NAMESPACE)[0] == 0 for c in admin_core),
            budget.cap(240),
            "bench-raw Pods deleted",
            interval=1,
        )
        log("bench-raw deleted")

        # --- console: users, clusters ----------------------------------------------------------------------------
        from django.conf import settings
        from django.contrib.auth import get_user_model
        from rest_framework.test import APIClient

        from clusters.models import Cluster, Node
        from jobs.models import Job, Pod
        from jobs.observe.sync import sync_all_clusters

        def cluster_states() -> str:
            return "; ".join(f"{c.name}: {c.status} {c.status_message}" for c in Cluster.objects.order_by("name"))

        user_model = get_user_model()
        admin = user_model.objects.create_superuser("root", "", "root-pass-1")
        alice = user_model.objects.create_user("alice", "", "alice-pass-1")
        api_admin = APIClient()
        api_admin.force_authenticate(admin)
        api = APIClient()
        api.force_authenticate(alice)
        sa_configs = []
        for i, cp in enumerate(cps):
            kc = console_kubeconfig(cp, NAMESPACE)
            sa_configs.append(kc)
            resp = api_admin.post(
                "/api/v1/clusters/",
                {
                    "name": f"bench-{i}",
                    "runtime": "kubernetes",
                    "namespace": NAMESPACE,
                    "kubeconfig": yaml.safe_dump(kc),
                },
                format="json",
            )
            if resp.status_code != 201:
                raise RuntimeError(f"cluster registration failed: {resp.status_code} {resp.content[:500]!r}")
        log(f"{args.clusters} clusters registered, {Node.objects.count()} Node rows")
        logfile = VAR / "header.log"
        stamp = time.strftime("%Y-%m-%dT%H:%M:%S.000000000Z", time.gmtime())
        logfile.write_text(
            "".join(
                f"{stamp} stdout F {line}\n"
                for line in (
                    "RLINF_NODE_RANK: 0",
                    "Starting Ray head",
                    "Ray cluster is ready",
                    "Executing run script...",
                )
            )
        )
        for i, cp in enumerate(cps):
            apply_logs(cp, [f"{name}-header-0" for name, c in placed if c == i], logfile)

        # --- (1b) console: submit -> all Workers Running ---------------------------------------------------------
        post_times = []
        t_con0 = time.time()
        for name, c in placed:
            t = time.perf_counter()
            resp = api.post("/api/v1/jobs/", job_document(name, f"bench-{c}", args.workers), format="json")
            post_times.append(time.perf_counter() - t)
            if resp.status_code != 201:
                raise RuntimeError(f"POST {name}: {resp.status_code} {resp.content[:800]!r}; {cluster_states()}")
        con_submitted = time.time() - t_con0
        log(f"console: {args.jobs} jobs submitted in {con_submitted:.1f} s")

        def console_all_running():
            sync_all_clusters(force=True)
            return Pod.objects.filter(phase="Running").count() >= pods_total

        wait_for(console_all_running, budget.cap(400), f"console shows {pods_total} Workers Running", interval=0)
        con_seen = time.time() - t_con0
        states = [pods_state(c, NAMESPACE) for c in admin_core]
        con_ready = max(s[2] for s in states if s[2]) - t_con0
        jobs_running = Job.objects.filter(phase="Running").count()
        log(f"console: all Workers Running seen at {con_seen:.1f} s ({jobs_running} jobs Running)")

        # --- (2)+(3) sync cycle vs raw list calls ----------------------------------------------------------------
        raw_clients = [client_for(kc) for kc in sa_configs]
        raw_core = [kubernetes.client.CoreV1Api(c) for c in raw_clients]
        raw_apps = [kubernetes.client.AppsV1Api(c) for c in raw_clients]

        def raw_cycle() -> None:
            for core, apps in zip(raw_core, raw_apps, strict=True):
                raw_json(core.list_node)
                raw_json(core.list_namespaced_pod, NAMESPACE)
                raw_json(apps.list_namespaced_stateful_set, NAMESPACE)

        def sync_cycle(force: bool = False) -> tuple[float, int]:
            """One periodic cycle (what beat runs every RLARK_SYNC_INTERVAL; ``force``: a forced one, which also
            reads every running Header's new log lines)."""
            # CaptureQueriesContext reads connection.queries_log, a deque of 9,000: make room for a big cycle
            connection.queries_log = collections.deque(maxlen=2_000_000)
            settings.RLARK_SYNC_INTERVAL = 0  # back to back: no cycle is skipped as too soon after the last
            with CaptureQueriesContext(connection) as ctx:
                t = time.perf_counter()
                out = sync_all_clusters(force=force)
                elapsed = time.perf_counter() - t
            queries = len(ctx.captured_queries)
            connection.queries_log.clear()
            bad = {k: v for k, v in out.get("clusters", {}).items() if v != "online"}
            if bad:
                raise RuntimeError(f"sync reported clusters not online: {bad}")
            return elapsed, queries

        def measure(label: str, rounds: int) -> tuple[float, float, int, int, int, int, int]:
            sync_cycle(force=True)  # settle: nothing changes after this one
            raw_cycle()  # warm connections
            raws, syncs = [], []
            for _ in range(rounds):
                if budget.left() < 30 and syncs:
                    break
                t = time.perf_counter()
                raw_cycle()
                raws.append(time.perf_counter() - t)
                syncs.append(sync_cycle())
            raw = statistics.median(raws)
            sync = statistics.median(s for s, _ in syncs)
            queries = [q for _, q in syncs]
            pods = Pod.objects.count()
            jobs = Job.objects.count()
            log(f"{label}: sync {sync * 1000:.0f} ms raw {raw * 1000:.0f} ms queries {queries}")
            return sync, raw, min(queries), max(queries), pods, jobs, len(syncs)

        small = measure("small", args.rounds)
        big = None
        big_note = ""
        solo_target = max(0, min(args.big - args.jobs, sum(len(s) for s in fleet)))
        if solo_target:
            per_job = statistics.median(post_times) if args.big_mode == "post" else 0.25  # seed: measured ~0.2 s
            # cost: creating the jobs, their Pods (~60 s), then ~(rounds + 2) cycles at a size ~linear in jobs
            solo = solo_target
            while solo > 0:
                cycles = small[0] * (args.jobs + solo) / args.jobs
                if 60 + solo * per_job + cycles * (max(1, args.rounds - 1) + 2) < budget.left() - 20:
                    break
                solo = int(solo * 0.8)
            if solo < solo_target:
                big_note = f", shrunk from {args.big} jobs to fit --budget"
            if solo > 0:
                solos: list[tuple[str, int, str]] = []
                for k in range(solo):
                    c = k % args.clusters
                    node = fleet[c][(k // args.clusters) % len(fleet[c])].name
                    solos.append((f"solo-{k:04d}", c, node))
                for i, cp in enumerate(cps):
                    apply_logs(cp, [f"{n}-header-0" for n, c, _ in solos if c == i], logfile)
                t = time.perf_counter()
                if args.big_mode == "post":
                    for name, c, node in solos:
                        resp = api.post("/api/v1/jobs/", solo_document(name, f"bench-{c}", node), format="json")
                        if resp.status_code != 201:
                            raise RuntimeError(
                                f"POST {name}: {resp.status_code} {resp.content[:800]!r}; {cluster_states()}"
                            )
                else:
                    seed_jobs(alice, solos, args.clusters)
                    big_note += ", single-Worker jobs seeded (rows + SSA), not POSTed"
                solo_created = time.perf_counter() - t
                want = pods_total + len(solos)
                log(f"{Job.objects.count()} jobs ({args.big_mode}: {solo_created:.0f} s for the single-Worker ones)")
                wait_for(
                    lambda: sum(pods_state(c, NAMESPACE)[1] for c in admin_core) >= want,
                    budget.cap(240),
                    f"{want} Pods Running",
                    interval=2,
                )
                log(f"{want} Pods Running")
                wait_for(
                    lambda: (sync_all_clusters(force=True), Pod.objects.filter(phase="Running").count() >= want)[1],
                    budget.cap(max(60.0, budget.left() - 40)),
                    f"console shows {want} Workers Running",
                    interval=0,
                )
                big = measure("big", max(1, args.rounds - 1))

        rss_console = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # KiB on Linux
        per_component: dict[str, int] = {}
        for cp in cps:
            for comp, pid in cp.pids.items():
                per_component[comp] = per_component.get(comp, 0) + vm_hwm_kib(pid)

        # --- report ------------------------------------------------------------------------------------------------
        mib = 1024
        lines = [
            f"control planes: {args.clusters} (one per console cluster), kwok nodes: {sum(len(s) for s in fleet)}, "
            f"database: {connection.vendor}",
            f"(1) {args.jobs} jobs x {args.workers} Workers = {pods_total} Pods, submit -> all Workers Running:",
            f"    kubectl apply --server-side of the same manifests: applied {raw_applied:.1f} s, last Pod Ready "
            f"{raw_ready:.1f} s, all Running seen by polling {raw_seen:.1f} s",
            f"    console (POST /api/v1/jobs/ x {args.jobs}, Celery eager; then forced sync cycles): all POSTs "
            f"{con_submitted:.1f} s (median POST {statistics.median(post_times) * 1000:.0f} ms, max "
            f"{max(post_times) * 1000:.0f} ms), last Pod Ready {con_ready:.1f} s, all Workers Running in the "
            f"console {con_seen:.1f} s ({jobs_running}/{args.jobs} jobs Running)",
            f"    ratio console/kubectl: {con_seen / raw_seen:.2f} (as seen by each), "
            f"{con_ready / raw_ready:.2f} (last Pod Ready)",
        ]

        def sync_lines(tag: str, m) -> list[str]:
            sync, raw, qmin, qmax, pods, jobs, n = m
            q = f"{qmin}" if qmin == qmax else f"{qmin}-{qmax}"
            return [
                f"(2) {tag}: {jobs} active jobs, {pods} Pods, median of {n}: one sync cycle of all clusters "
                f"{sync * 1000:.0f} ms; raw list calls (nodes + pods + statefulsets per cluster) {raw * 1000:.0f} ms; "
                f"ratio sync/raw {sync / raw:.1f} (goal <= 2)",
                f"(3) {tag}: DB queries per sync cycle, nothing changed: {q}",
            ]

        lines += sync_lines("small", small)
        if big is not None:
            lines += sync_lines(f"big [{big_note.lstrip(', ')}]" if big_note else "big", big)
        elif solo_target:
            lines.append(f"(2)/(3) big: not measured{big_note or ' (no time left)'}")
        lines.append(
            f"(4) peak RSS: console process {rss_console / mib:.0f} MiB; control planes (sum of {args.clusters}): "
            + ", ".join(f"{k} {v / mib:.0f} MiB" for k, v in sorted(per_component.items()))
            + f"; total control plane {sum(per_component.values()) / mib:.0f} MiB"
        )
        lines.append(f"wall time {time.monotonic() - T0:.0f} s")
        print("\n".join(lines), flush=True)
    finally:
        for cp in cps:
            cp.stop()
        connection.creation.destroy_test_db(old_name, verbosity=0)
        subprocess.run(["rm", "-rf", str(VAR)], check=False, timeout=60)


if __name__ == "__main__":
    main()
