"""The Logs tab and WebTerminal consumers on the Kubernetes runtime, against the fake API server
(pods/log over HTTP, pods/exec over a websocket with the channel protocol)."""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path
from types import SimpleNamespace

import pytest
import yaml
from asgiref.sync import sync_to_async

from clusters.runtime.kubernetes.runtime import shell_argv
from terminal.services.runtimes import use_runtime_factory
from tests.fake_k8s.fixtures import fake_k8s, fake_kubeconfig  # noqa: F401
from tests.terminal_support import session_cookie, ws_communicator

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.timeout(90), pytest.mark.asyncio]
NS = "rlark-system"
JOB = "robot-policy-training"
DOC = yaml.safe_load((Path(__file__).parents[1] / "fake_k8s" / "golden" / "job_3role.yaml").read_text())
REGISTRY = SimpleNamespace(name="corp", registry="registry.example.com", username="robot", password="pw", public=False)


@pytest.fixture
def k8s_job(fake_k8s, fake_kubeconfig, alice, settings):  # noqa: F811
    from clusters.models import Cluster
    from clusters.runtime.kubernetes import KubernetesRuntime
    from jobs.jobspec.manifests import build_task_manifests
    from jobs.models import Job, Task

    settings.RLARK_K8S_CONNECT_TIMEOUT = 2
    settings.RLARK_K8S_READ_TIMEOUT = 5
    use_runtime_factory(None)  # the real registry: KubernetesRuntime for this cluster
    cluster = Cluster.objects.create(
        name="gpu-a",
        runtime="kubernetes",
        namespace=NS,
        kubeconfig=yaml.safe_dump(fake_kubeconfig),
        status="online",
        allow_host_path=True,  # the golden job mounts /data/datasets from the node
        host_path_roots="/data",
    )
    manifests = build_task_manifests(JOB, DOC, clusters={"gpu-a": cluster}, registries=[REGISTRY], ssh_keys=[])
    job = Job.objects.create(name=JOB, owner=alice, spec=DOC, phase="Running")
    runtime = KubernetesRuntime(cluster)
    for order, m in enumerate(manifests):
        Task.objects.create(
            job=job,
            template_name=m.task.removeprefix(f"{JOB}-"),
            name=m.task,
            cluster=cluster,
            namespace=m.namespace,
            order=order,
            replicas=m.replicas,
            rank_start=m.rank_start,
            head=order == 0,
        )
        runtime.apply_task(m)
    fake_k8s.set_pod(NS, f"{JOB}-actor-0", "Running", node="gpu-a-0", ip="10.244.0.5")
    fake_k8s.set_log(NS, f"{JOB}-actor-0", "Ray cluster is ready\n\x1b[32mGlobal Step 1\x1b[0m <b>x</b>\n")
    return job


async def test_k8s_terminal_echo_resize_exit(k8s_job, fake_k8s, alice):  # noqa: F811
    pod = f"{JOB}-actor-0"
    comm = ws_communicator(f"/ws/terminal/jobs/{JOB}/pods/{pod}/", await sync_to_async(session_cookie)(alice))
    connected, _ = await comm.connect(timeout=10)
    assert connected
    out = b""

    async def until(needle: bytes) -> dict | None:
        nonlocal out
        deadline = time.monotonic() + 15
        while needle not in out:
            assert time.monotonic() < deadline, out
            msg = await asyncio.wait_for(comm.output_queue.get(), 15)
            if msg["type"] == "websocket.close":
                return msg
            if msg.get("bytes"):
                out += msg["bytes"]
        return None

    await until(b"bash$ ")
    await comm.send_to(text_data=json.dumps({"type": "resize", "rows": 33, "cols": 120}))
    await comm.send_to(bytes_data=b"echo $POD_NAME\r")
    await until(pod.encode() + b"\r\n")
    session = fake_k8s.exec_sessions[-1]
    assert session["command"] == shell_argv("bash")  # UTF-8 locale when the image sets none
    assert {"Width": 120, "Height": 33} in session["resizes"]
    await comm.send_to(bytes_data=b"exit 4\r")
    closing = None
    while True:
        msg = await asyncio.wait_for(comm.output_queue.get(), 15)
        if msg.get("text"):
            data = json.loads(msg["text"])
            closing = data if data["type"] == "closing" else closing
        if msg["type"] == "websocket.close":
            break
    assert msg["code"] == 1000 and msg["reason"] == "terminal exited with code 4"
    assert closing == {"type": "closing", "code": 1000, "reason": "terminal exited with code 4"}


async def test_k8s_logs_tab(k8s_job, alice):
    pod = f"{JOB}-actor-0"
    comm = ws_communicator(f"/ws/terminal/jobs/{JOB}/logs/", await sync_to_async(session_cookie)(alice))
    assert (await comm.connect(timeout=10))[0]
    targets = json.loads(await comm.receive_from(timeout=10))
    assert pod in [t["pod"] for t in targets["targets"]]
    await comm.send_to(text_data=json.dumps({"type": "subscribe", "pods": [pod]}))
    lines = []
    while True:
        msg = json.loads(await comm.receive_from(timeout=10))
        if msg["type"] == "lines":
            lines += msg["lines"]
        if msg["type"] == "tick":
            break
    assert [line["t"] for line in lines] == ["Ray cluster is ready", "Global Step 1 <b>x</b>"]
    assert lines[1]["h"] == '<span class="ansi-fg-2">Global Step 1</span> &lt;b&gt;x&lt;/b&gt;'
    await comm.disconnect()


@pytest.mark.parametrize("who", ["anonymous", "bob"])
@pytest.mark.parametrize("path", [f"/ws/terminal/jobs/{JOB}/pods/{JOB}-actor-0/", f"/ws/terminal/jobs/{JOB}/logs/"])
async def test_k8s_paths_refuse_anonymous_and_other_users(k8s_job, fake_k8s, bob, who, path):  # noqa: F811
    cookie = await sync_to_async(session_cookie)(bob) if who == "bob" else None
    comm = ws_communicator(path, cookie)
    assert (await comm.connect(timeout=10))[0]
    first = json.loads((await comm.receive_output(timeout=10))["text"])
    assert first["type"] == "closing" and first["code"] == (4403 if who == "bob" else 4401)
    assert (await comm.receive_output(timeout=10))["type"] == "websocket.close"
    assert fake_k8s.exec_sessions == []  # the API server never saw an exec
    wrong = ws_communicator(path, cookie, origin="http://evil.example")
    assert not (await wrong.connect(timeout=10))[0]


async def test_k8s_distroless_pod_says_no_shell_within_5_s(k8s_job, fake_k8s, alice):  # noqa: F811
    pod = f"{JOB}-actor-0"
    fake_k8s.set_shells(NS, pod, ())
    comm = ws_communicator(f"/ws/terminal/jobs/{JOB}/pods/{pod}/", await sync_to_async(session_cookie)(alice))
    t0 = time.monotonic()
    assert (await comm.connect(timeout=10))[0]
    while True:
        msg = await asyncio.wait_for(comm.output_queue.get(), 10)
        if msg["type"] == "websocket.close":
            break
    assert time.monotonic() - t0 < 5
    assert msg["code"] == 1011 and msg["reason"] == "no shell found (tried bash, sh)"
