"""A running job on real nodes, as a user sees it in the console: the Logs tab's tail and timestamps and the
previous container's log after Ray is killed in a rollout (a real restart, counted), the WebTerminal in a real
container (with the shell's real exit code, which kwok cannot report), and Stop/Start leaving no container of
the job in the nodes' containerd while stopped."""

from __future__ import annotations

import asyncio
import json
from datetime import UTC, datetime

import pytest
from asgiref.sync import async_to_sync, sync_to_async
from django.test import Client
from rest_framework.test import APIClient

from terminal.services.runtimes import use_runtime_factory
from tests.k8s_nodes.conftest import namespace_containers
from tests.k8s_nodes.jobs import demo_job, pod_logs
from tests.k8s_real.conftest import wait_for
from tests.k8s_real.jobs import TerminalOutput, running, synced
from tests.terminal_support import session_cookie, ws_communicator

pytestmark = [pytest.mark.k8s_nodes, pytest.mark.django_db(transaction=True), pytest.mark.timeout(600)]
JOB = "live-a"
HEAD = f"{JOB}-header-0"
ROLLOUT = f"{JOB}-rollout-0"
# After Ray formed: 300 numbered lines, then the run script keeps running (the job stays Running).
RUN_SCRIPT = 'for i in $(seq 1 300); do echo "Global Step $i/300"; done; exec sleep infinity'


@pytest.fixture
def live_job(real_nodes, real_cluster, real_namespace, alice):
    use_runtime_factory(None)  # the real registry: KubernetesRuntime for this cluster
    api = APIClient()
    api.force_authenticate(alice)
    doc = demo_job(JOB, real_nodes.worker, rollouts=1)
    doc["spec"]["tasks"][0]["runScript"] = RUN_SCRIPT
    doc["spec"]["tasks"][1]["nodeSelector"] = {"kubernetes.io/hostname": "real-1"}  # replicas = matching nodes
    resp = api.post("/api/v1/jobs/", doc, format="json")
    assert resp.status_code == 201, resp.json()["errors"]
    wait_for(lambda: running(real_namespace, 2), 120, "2 real Pods Running")
    try:
        wait_for(
            lambda: "Global Step 300/300" in real_namespace.kubectl("logs", HEAD, "-c", "main"), 150, "the run script"
        )
    except pytest.fail.Exception as exc:
        raise AssertionError(f"{exc}\n{pod_logs(real_namespace)}") from None
    synced(JOB, lambda j: j.phase == "Running", 60, "job Running")
    return api


async def _live_lines(alice, pod: str, needle: str, timeout: float = 60) -> list[dict]:
    """Subscribe to ``pod``'s live log over the Logs tab's websocket until a line contains ``needle``."""
    comm = ws_communicator(f"/ws/terminal/jobs/{JOB}/logs/", await sync_to_async(session_cookie)(alice))
    assert (await comm.connect(timeout=30))[0]
    json.loads(await comm.receive_from(timeout=30))  # the targets
    await comm.send_to(text_data=json.dumps({"type": "subscribe", "pods": [pod], "live": True}))
    seen: list[dict] = []
    deadline = asyncio.get_running_loop().time() + timeout
    while not any(needle in line["t"] for line in seen):
        assert asyncio.get_running_loop().time() < deadline, seen[-5:]
        msg = json.loads(await comm.receive_from(timeout=timeout))
        if msg["type"] == "lines":
            seen.extend(msg["lines"])
    await comm.disconnect()
    return seen


def test_logs_tab_tail_timestamps_download_and_previous_container_after_a_restart(live_job, real_namespace, alice):
    client = Client()
    client.force_login(alice)
    html = client.get(f"/jobs/{JOB}/log/", {"pod": HEAD}).content.decode()
    assert "Global Step 300/300" in html and "Executing run script..." in html

    # live lines carry the kubelet's own timestamps: real times of this run
    lines = async_to_sync(_live_lines)(alice, HEAD, "Global Step 300/300")
    stamped = [line for line in lines if line["t"] == "Global Step 300/300"]
    assert stamped and "ts" in stamped[-1], stamped
    written = datetime.fromisoformat(stamped[-1]["ts"].replace("Z", "+00:00"))
    assert abs((datetime.now(UTC) - written).total_seconds()) < 600, stamped[-1]

    resp = client.get("/terminal/jobs/live-a/logs/download/", {"pod": HEAD})
    assert resp.status_code == 200
    body = async_to_sync(_read_all)(resp.streaming_content).decode()
    assert body.startswith("RLINF_NODE_RANK: 0\n"), body[:200]
    assert all(f"Global Step {i}/300\n" in body for i in (1, 150, 300))

    # kill Ray in the rollout: its wrapper exits, the kubelet restarts the container
    before = real_namespace.pods()[ROLLOUT]["status"]["containerStatuses"][0]["restartCount"]
    real_namespace.kubectl("exec", ROLLOUT, "-c", "main", "--", "bash", "-c", "kill -9 $(pgrep -x raylet)")
    wait_for(
        lambda: real_namespace.pods()[ROLLOUT]["status"]["containerStatuses"][0]["restartCount"] > before,
        120,
        "the rollout container restarted by the kubelet",
    )

    def console_restarts() -> int:
        synced(JOB, lambda j: True, 10, "a sync")
        workers = {w["pod"]: w for w in live_job.get(f"/api/v1/jobs/{JOB}/").json()["status"]["workers"]}
        return workers.get(ROLLOUT, {}).get("restarts") or 0

    wait_for(lambda: console_restarts() > before, 60, "the restart count in the console")
    previous = client.get(f"/jobs/{JOB}/log/", {"pod": ROLLOUT, "previous": "1"}).content.decode()
    assert "RLINF_NODE_RANK: 1" in previous and "Ray runtime started" in previous, previous[-2000:]


async def _read_all(chunks) -> bytes:
    return b"".join([chunk async for chunk in chunks])


@pytest.mark.asyncio
async def test_web_terminal_in_a_real_container_reports_the_exit_code(live_job, alice):
    comm = ws_communicator(f"/ws/terminal/jobs/{JOB}/pods/{HEAD}/", await sync_to_async(session_cookie)(alice))
    connected, _ = await comm.connect(timeout=30)
    assert connected
    output = TerminalOutput(comm)
    await comm.send_to(text_data=json.dumps({"type": "resize", "rows": 33, "cols": 101}))
    await comm.send_to(bytes_data="echo rlark-$((6*7)) 你好; stty size; echo $RLARK_TOTAL_NODES\r".encode())
    await output.until(b"rlark-42 " + "你好".encode())
    await output.until(b"33 101")  # the resize reached the container's TTY through the real kubelet
    await comm.send_to(bytes_data=b"exit 3\r")
    while True:
        msg = await asyncio.wait_for(comm.output_queue.get(), 30)
        if msg["type"] == "websocket.close":
            break
    assert msg["reason"] == "terminal exited with code 3", msg
    await comm.wait(timeout=15)


def test_stop_leaves_no_container_on_the_nodes_and_start_brings_them_back(live_job, real_nodes, real_namespace):
    assert len(namespace_containers(real_nodes.nodes, real_namespace.name)) >= 4  # 2 sandboxes + 2 main containers
    assert live_job.post(f"/api/v1/jobs/{JOB}/stop/").status_code == 200
    wait_for(lambda: real_namespace.pods() == {}, 90, "Pods gone after Stop")
    wait_for(lambda: not namespace_containers(real_nodes.nodes, real_namespace.name), 90, "no container in containerd")
    synced(JOB, lambda j: j.phase == "Stopped", 30, "job Stopped")

    assert live_job.post(f"/api/v1/jobs/{JOB}/start/").status_code == 200
    wait_for(lambda: running(real_namespace, 2), 120, "2 real Pods Running again")
    wait_for(lambda: len(namespace_containers(real_nodes.nodes, real_namespace.name)) >= 4, 60, "containers back")
