"""Submit -> all Workers Running -> Ray formed, on REAL nodes: the console against ``kubectl apply`` of the same
manifests. Not a test.

Starts the control plane of ``tools/k8s`` with two real nodes (``tools/k8s/nodes.py``: kubelet + containerd,
images from ``tools/k8s/images.py``), then runs the demo's shape (Header x1, rollout x2, image ``rlark-worker``)
``--rounds`` times each way and prints the medians:

1. ``kubectl apply --server-side`` of the console's own objects (``jobs.jobspec.manifests.build_task_manifests``)
   into namespace ``bench-raw``; Running = the three Pods Running (polled with ``kubectl get``); Ray formed = the
   Header's log (``kubectl logs``) shows ``Ray cluster is ready``;
2. the console: ``POST /api/v1/jobs/`` in-process (DRF's APIClient, Celery eager), then forced sync cycles until
   the console's own status shows the three Workers Running, and until the job is Running (the console declares
   it when the Header's log says Ray is ready).

Each run's objects are deleted and the bench waits until no container of them runs on the nodes. A
first, unmeasured kubectl round unpacks the image on both nodes (about 20 s on the first Pods otherwise).
Prints ``ratio console/kubectl`` for both points; then, on a running Header that printed 1000 lines, the Logs tab's
time to the first line (its websocket, in-process, warm and with the handshake) against ``kubectl logs --tail=1000``,
and the WebTerminal's keystroke echo p50/p95 against ``kubectl exec -it`` on a pseudo-terminal; and the kubelet's
and containerd's peak RSS (VmHWM).
Needs root and what ``tests/k8s_nodes`` needs; without it, it prints ``skipped: <why>`` and exits 0.

    .venv/bin/python bench/k8s_nodes.py [--rounds 3] [--quick]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import pty
import select
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from types import SimpleNamespace

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
VAR = Path(tempfile.mkdtemp(prefix="rlark-bench-nodes-"))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "rlark_console.settings")
os.environ["RLARK_VAR_DIR"] = str(VAR)
os.environ["CELERY_TASK_ALWAYS_EAGER"] = "1"
os.environ.setdefault("LOG_LEVEL", "ERROR")

import django  # noqa: E402

django.setup()

import logging  # noqa: E402

import yaml  # noqa: E402
from django.db import connection  # noqa: E402
from django.test.utils import setup_test_environment  # noqa: E402

from bench.quick import pct, quick_defaults, wait_for  # noqa: E402
from tools.k8s.controlplane import ControlPlane, missing_binaries  # noqa: E402
from tools.k8s.fleet import console_kubeconfig  # noqa: E402

CLUSTER = "real-a"
NAMESPACE = "rlark-bench"
RAW_NAMESPACE = "bench-raw"
READY_LINE = "Ray cluster is ready"
TIMEOUT = 300


def log(msg: str) -> None:
    print(f"[k8s_nodes] {msg}", file=sys.stderr, flush=True)


def job_document(name: str, image: str) -> dict:
    """Header x1 on real-0 (run script: idle), rollout x2 on the ``type=real`` nodes."""

    def role(task: str, head: bool, replicas: int, selector: dict[str, str]) -> dict:
        out = {
            "name": task,
            "head": head,
            "agentType": "Kubernetes",
            "role": "Actor" if head else "Rollout",
            "cluster": CLUSTER,
            "nodeSelector": selector,
            "kubernetes": {
                "workload": {
                    "kind": "StatefulSet",
                    "replicas": replicas,
                    "template": {"spec": {"containers": [{"name": "main", "image": image}]}},
                }
            },
        }
        if head:
            out["runScript"] = "exec sleep infinity"
        return out

    return {
        "apiVersion": "rlinf.io/v1alpha1",
        "kind": "Job",
        "metadata": {"name": name},
        "spec": {
            "tasks": [
                role("header", True, 1, {"kubernetes.io/hostname": "real-0"}),
                role("rollout", False, 2, {"type": "real"}),
            ]
        },
    }


def pods_running(cp: ControlPlane, namespace: str, count: int) -> bool:
    out = cp.kubectl("-n", namespace, "get", "pods", "-o", "jsonpath={.items[*].status.phase}", timeout=20).split()
    return len(out) == count and all(p == "Running" for p in out)


def head_ready(cp: ControlPlane, namespace: str, pod: str) -> bool:
    try:
        return READY_LINE in cp.kubectl("-n", namespace, "logs", pod, "-c", "main", timeout=20)
    except Exception:  # noqa: BLE001 - not started yet
        return False


def no_containers(rn, namespace: str) -> bool:
    """No container of ``namespace`` runs on the nodes (the kubelet removes the stopped ones' records up to a
    minute later; they take no CPU from the next round)."""
    label = "labels.io.kubernetes.pod.namespace==" + namespace
    for node in rn.nodes:
        ids = set(node.ctr("containers", "ls", "-q", label, timeout=30).split())
        if ids & set(node.running_tasks()):
            return False
    return True


def raw_round(cp: ControlPlane, rn, image: str, i: int) -> tuple[float, float]:
    from jobs.jobspec.manifests import build_task_manifests

    name = f"raw-{i}"
    clusters = {CLUSTER: SimpleNamespace(name=CLUSTER, namespace=RAW_NAMESPACE)}
    docs: list[dict] = []
    for m in build_task_manifests(name, job_document(name, image), clusters=clusters, registries=[]):
        docs += [*m.extra_objects, m.workload]
    t0 = time.monotonic()
    cp.kubectl("apply", "--server-side", "-f", "-", input=yaml.safe_dump_all(docs), timeout=60)
    wait_for(lambda: pods_running(cp, RAW_NAMESPACE, 3), TIMEOUT, "raw Pods Running", interval=0.2)
    running = time.monotonic() - t0
    wait_for(lambda: head_ready(cp, RAW_NAMESPACE, f"{name}-header-0"), TIMEOUT, "raw Ray ready", interval=0.5)
    formed = time.monotonic() - t0
    cp.kubectl("-n", RAW_NAMESPACE, "delete", "statefulsets,services,configmaps,secrets", "--all", "--wait=false")
    cp.kubectl("-n", RAW_NAMESPACE, "delete", "pods", "--all", "--force", "--grace-period=0", "--wait=false")
    wait_for(lambda: no_containers(rn, RAW_NAMESPACE), TIMEOUT, "raw containers gone", interval=1)
    return running, formed


def console_round(api, cp: ControlPlane, rn, image: str, i: int) -> tuple[float, float]:
    from jobs.models import Job
    from jobs.observe.sync import sync_all_clusters

    name = f"console-{i}"
    t0 = time.monotonic()
    resp = api.post("/api/v1/jobs/", job_document(name, image), format="json")
    assert resp.status_code == 201, resp.content

    def workers_running() -> bool:
        sync_all_clusters(force=True)
        workers = api.get(f"/api/v1/jobs/{name}/").json()["status"]["workers"]
        return len(workers) == 3 and all(w["phase"] == "Running" for w in workers)

    wait_for(workers_running, TIMEOUT, "console Workers Running", interval=0.2)
    running = time.monotonic() - t0

    def job_running() -> bool:
        sync_all_clusters(force=True)
        return Job.objects.get(name=name).phase == "Running"

    wait_for(job_running, TIMEOUT, "console job Running (Ray ready)", interval=0.5)
    formed = time.monotonic() - t0
    assert api.delete(f"/api/v1/jobs/{name}/").status_code in (200, 202, 204)
    wait_for(lambda: no_containers(rn, NAMESPACE), TIMEOUT, "console containers gone", interval=1)
    return running, formed


LIVE = "bench-live"
LIVE_POD = f"{LIVE}-header-0"
KEYS = 60


def live_job(api, cp: ControlPlane, image: str) -> None:
    """A Header on real-0 that printed 1000 lines and keeps running (the Logs tab's and the terminal's Worker)."""
    doc = job_document(LIVE, image)
    doc["spec"]["tasks"] = doc["spec"]["tasks"][:1]
    doc["spec"]["tasks"][0]["runScript"] = 'for i in $(seq 1 1000); do echo "line $i"; done; exec sleep infinity'
    assert api.post("/api/v1/jobs/", doc, format="json").status_code == 201
    wait_for(lambda: pods_running(cp, NAMESPACE, 1), TIMEOUT, "live Pod Running", interval=0.5)
    wait_for(
        lambda: "line 1000" in cp.kubectl("-n", NAMESPACE, "logs", LIVE_POD, "-c", "main", timeout=20),
        TIMEOUT,
        "the live Pod's 1000 lines",
    )


def kubectl(cp: ControlPlane) -> list[str]:
    """The control plane's kubectl as the admin, in the bench's namespace."""
    return [str(cp.bins / "kubectl"), f"--kubeconfig={cp.admin_kubeconfig}", "-n", NAMESPACE]


def kubectl_logs_first_line(cp: ControlPlane) -> float:
    """Seconds from starting ``kubectl logs --tail=1000`` to its first line."""
    argv = [*kubectl(cp), "logs", LIVE_POD, "-c", "main", "--tail=1000"]
    t0 = time.perf_counter()
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    try:
        assert proc.stdout.readline(), "kubectl logs gave nothing"
        return time.perf_counter() - t0
    finally:
        proc.kill()
        proc.wait(timeout=10)


async def console_logs_first_line(cookie: str, cold: bool, comm=None) -> tuple[float, object]:
    """Seconds from the Logs tab's subscribe (``cold``: from opening its websocket) to the first ``lines`` frame."""
    from tests.terminal_support import ws_communicator

    t0 = time.perf_counter()
    if comm is None:
        comm = ws_communicator(f"/ws/terminal/jobs/{LIVE}/logs/", cookie)
        assert (await comm.connect(timeout=30))[0]
        json.loads(await comm.receive_from(timeout=30))  # the targets
    if not cold:
        t0 = time.perf_counter()
    await comm.send_to(text_data=json.dumps({"type": "subscribe", "pods": [LIVE_POD]}))
    while True:
        msg = json.loads(await comm.receive_from(timeout=60))
        if msg["type"] == "lines" and msg["lines"]:
            return time.perf_counter() - t0, comm


async def console_echo(cookie: str) -> list[float]:
    """Keystroke echo round trips over the WebTerminal's websocket into the real container (``KEYS`` keys)."""
    from tests.terminal_support import ws_communicator

    comm = ws_communicator(f"/ws/terminal/jobs/{LIVE}/pods/{LIVE_POD}/", cookie)
    assert (await comm.connect(timeout=30))[0]
    buf = bytearray()

    async def until(needle: bytes) -> None:
        while needle not in buf:
            msg = await asyncio.wait_for(comm.output_queue.get(), 30)
            if msg.get("bytes"):
                buf.extend(msg["bytes"])
        buf.clear()

    await comm.send_to(bytes_data=b"echo ready-$((6*7))\r")
    await until(b"ready-42")
    times = []
    for i in range(KEYS):
        ch = "abcdefghij"[i % 10].encode()
        t0 = time.perf_counter()
        await comm.send_to(bytes_data=ch)
        await until(ch)
        times.append(time.perf_counter() - t0)
    await comm.send_to(bytes_data=b"\x15exit\r")
    await comm.disconnect()
    return times


def kubectl_exec_echo(cp: ControlPlane) -> list[float]:
    """The same round trips through ``kubectl exec -it`` on a pseudo-terminal of this process."""
    argv = [*kubectl(cp), "exec", "-it", LIVE_POD, "-c", "main"]
    pid, fd = pty.fork()
    if pid == 0:  # the child: kubectl on the pseudo-terminal
        os.execv(argv[0], [*argv, "--", "bash", "--noprofile", "--norc", "-i"])
    buf = bytearray()

    def until(needle: bytes, timeout: float = 30) -> None:
        deadline = time.monotonic() + timeout
        while needle not in buf:
            ready, _, _ = select.select([fd], [], [], max(0.0, deadline - time.monotonic()))
            if not ready:
                raise TimeoutError(f"no {needle!r} from kubectl exec")
            buf.extend(os.read(fd, 65536))
        buf.clear()

    try:
        os.write(fd, b"echo ready-$((6*7))\r")
        until(b"ready-42")
        times = []
        for i in range(KEYS):
            ch = "abcdefghij"[i % 10].encode()
            t0 = time.perf_counter()
            os.write(fd, ch)
            until(ch)
            times.append(time.perf_counter() - t0)
        os.write(fd, b"\x15exit\r")
        return times
    finally:
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
        os.close(fd)


def logs_and_terminal(api, admin, cp: ControlPlane, image: str, rounds: int) -> None:
    """Print the Logs tab's time to first line and the terminal's echo p95 against kubectl, on a real container."""
    from asgiref.sync import async_to_sync
    from django.conf import settings

    from terminal.services.runtimes import use_runtime_factory
    from tests.terminal_support import session_cookie

    settings.CHANNEL_LAYERS = {"default": {"BACKEND": "channels.layers.InMemoryChannelLayer"}}
    use_runtime_factory(None)
    live_job(api, cp, image)
    cookie = session_cookie(admin)
    kubectl_first = [kubectl_logs_first_line(cp) for _ in range(rounds * 3)]

    async def console_first() -> tuple[list[float], list[float]]:
        warm, cold = [], []
        for _ in range(rounds * 3):
            t, comm = await console_logs_first_line(cookie, cold=True)
            cold.append(t)
            t, _ = await console_logs_first_line(cookie, cold=False, comm=comm)
            warm.append(t)
            await comm.disconnect()
        return warm, cold

    warm, cold = async_to_sync(console_first)()
    k = statistics.median(kubectl_first)
    print(
        f"Logs tab, time to the first of 1000 lines: kubectl logs {k * 1000:.0f} ms, console warm "
        f"{statistics.median(warm) * 1000:.0f} ms ({statistics.median(warm) / k:.2f}x), cold (with the websocket's "
        f"handshake) {statistics.median(cold) * 1000:.0f} ms ({statistics.median(cold) / k:.2f}x)"
    )
    ws = async_to_sync(console_echo)(cookie)
    kx = kubectl_exec_echo(cp)
    print(
        f"Terminal echo ({KEYS} keys): kubectl exec p50 {pct(kx, 50) * 1000:.1f} ms p95 {pct(kx, 95) * 1000:.1f} ms; "
        f"console p50 {pct(ws, 50) * 1000:.1f} ms p95 {pct(ws, 95) * 1000:.1f} ms "
        f"({pct(ws, 95) / pct(kx, 95):.2f}x at p95)"
    )
    assert api.delete(f"/api/v1/jobs/{LIVE}/").status_code in (200, 202, 204)


def vm_hwm_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return 0.0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    quick_defaults(parser, rounds=1)
    args = parser.parse_args()
    logging.disable(logging.WARNING)
    from tools.k8s import images, nodes

    missing = missing_binaries() + nodes.missing_node_prerequisites()
    if missing:
        print(f"skipped: real nodes need {', '.join(missing)}")
        return
    built = images.build_all()
    image = built["rlark-worker"].ref
    setup_test_environment()
    old_name = connection.creation.create_test_db(verbosity=0, keepdb=False)
    cp = ControlPlane.start()
    rn = None
    try:
        rn = nodes.RealNodes.start(cp, images.node_images(built), count=2, timeout=180)
        log("2 real nodes Ready")
        from django.contrib.auth import get_user_model
        from rest_framework.test import APIClient

        users = get_user_model()
        admin = users.objects.create_superuser("root", "", "root-pass-1")
        api = APIClient()
        api.force_authenticate(admin)
        kubeconfig = console_kubeconfig(cp, NAMESPACE)
        resp = api.post(
            "/api/v1/clusters/",
            {
                "name": CLUSTER,
                "runtime": "kubernetes",
                "namespace": NAMESPACE,
                "kubeconfig": yaml.safe_dump(kubeconfig),
            },
            format="json",
        )
        assert resp.status_code == 201, resp.content
        cp.kubectl("create", "namespace", RAW_NAMESPACE)
        # warm-up, not measured: the first Pods of an image on a node unpack its layers into the snapshotter
        log("warm-up round (first use of the image on both nodes)")
        raw_round(cp, rn, image, 99)
        raw, console = [], []
        for i in range(args.rounds):
            raw.append(raw_round(cp, rn, image, i))
            log(f"kubectl round {i}: Running {raw[-1][0]:.1f} s, Ray formed {raw[-1][1]:.1f} s")
            console.append(console_round(api, cp, rn, image, i))
            log(f"console round {i}: Running {console[-1][0]:.1f} s, Ray formed {console[-1][1]:.1f} s")
        for k, what in ((0, "submit -> all Workers Running"), (1, "submit -> Ray formed")):
            r = statistics.median(x[k] for x in raw)
            c = statistics.median(x[k] for x in console)
            print(f"{what}: kubectl {r:.1f} s, console {c:.1f} s, ratio console/kubectl {c / r:.2f}")
        logs_and_terminal(api, admin, cp, image, args.rounds)
        for node in rn.nodes:
            print(
                f"{node.name}: kubelet VmHWM {vm_hwm_mib(node.pids['kubelet']):.0f} MiB, "
                f"containerd VmHWM {vm_hwm_mib(node.pids['containerd']):.0f} MiB"
            )
    finally:
        if rn is not None:
            left = rn.stop()
            if left:
                print(f"left on the host: {left}")
        cp.stop()
        connection.creation.destroy_test_db(old_name, verbosity=0)


if __name__ == "__main__":
    main()
