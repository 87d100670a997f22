"""The demo workload (examples/demo) end to end on the local runtime with real Ray: the seeded-demo-style
3-Worker job forms a 3-node Ray cluster on loopback, confirms each node's rank, trains CartPole, writes
TensorBoard events and a readable checkpoint into the job's output mount; a Worker whose Ray process dies
is restarted with its previous log kept; scale to 0 leaves no process; the RLinf charger config's
``cluster:`` section drives a 2-node run."""

from __future__ import annotations

import copy
import json
import re
import time
import types
from pathlib import Path

import numpy as np
import pytest
import yaml

from clusters.runtime.local import launcher
from launcher.management.commands.seed_demo import DEMO_NODES
from tests.clusters.test_local_runtime_support import (
    LoopbackWatch,
    SupervisorProcess,
    markers_in_order,
    pid_alive,
    pod_pids,
    wait_for,
)

ROOT = Path(__file__).resolve().parents[2]
JOB_YAML = ROOT / "examples" / "demo" / "job.yaml"
CHARGER = ROOT / "examples" / "demo" / "rlinf" / "emb_realworld_charger_sac_cnn_async.yaml"
SHARED_CHARGER = ROOT.parent / "shared" / "rlinf-configs" / CHARGER.name
LOCAL = types.SimpleNamespace(name="local", namespace="rlark-system")
NODES = [{**n, "labels": {**n["labels"], "kubernetes.io/hostname": n["name"]}} for n in DEMO_NODES]


def demo_doc(output: Path, extra_args: str) -> dict:
    doc = yaml.safe_load(JOB_YAML.read_text())
    header = doc["spec"]["tasks"][0]
    header["kubernetes"]["workload"]["template"]["spec"]["volumes"][0]["hostPath"]["path"] = str(output)
    header["runScript"] += " " + extra_args
    return doc


def build(job: str, doc: dict):
    from jobs.jobspec.manifests import build_task_manifests

    return build_task_manifests(job, doc, clusters={"local": LOCAL}, registries=[], ssh_keys=[])


@pytest.fixture(scope="module")
def sup(tmp_path_factory):
    s = SupervisorProcess(tmp_path_factory.mktemp("demo") / "root").start()
    yield s
    s.stop()


def _loaded() -> bool:
    """The 10 s stop target holds on an idle 2-core machine; other test runs may load it."""
    return __import__("os").getloadavg()[0] > 4


def log_of(rt, pod: str, previous: bool = False) -> str:
    return rt.read_log("rlark-system", pod, tail_lines=None, previous=previous)


def test_demo_helpers_read_the_charger_cluster_section():
    import importlib.util

    spec = importlib.util.spec_from_file_location("demo_train", ROOT / "examples" / "demo" / "train.py")
    train = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(train)
    if SHARED_CHARGER.exists():
        assert CHARGER.read_text() == SHARED_CHARGER.read_text()  # the shipped copy is verbatim
    cluster = yaml.safe_load(CHARGER.read_text())["cluster"]
    groups = train.node_groups(cluster, cluster["num_nodes"])
    assert groups == {"4090": [0], "franka": [1]}
    lines = train.placement_summary(cluster, groups)
    assert "Component env: node group franka (node ranks [1])" in lines
    assert "Component actor: node group 4090 (node ranks [0])" in lines
    assert train.parse_ranks("all", [0, 1, 2]) == [0, 1, 2]
    assert train.parse_ranks(" 1 - 2 ", [0, 1, 2]) == [1, 2]
    assert train.parse_ranks("0,,2", [0, 1, 2]) == [0, 2]


@pytest.mark.django_db
def test_demo_job_yaml_is_a_valid_job_for_the_seeded_cluster():
    from django.conf import settings
    from django.contrib.auth import get_user_model
    from django.core.management import call_command

    from clusters import host_paths
    from jobs.jobspec.inventory import Inventory
    from jobs.jobspec.validator import validate

    call_command("seed_demo", password="x-demo-pass-1")
    admin = get_user_model().objects.get(username="admin")
    document = yaml.safe_load(JOB_YAML.read_text())
    result = validate(document, Inventory.from_db(admin))
    assert [p.code for p in result.errors] == ["host_path_outside_roots"]  # the file's path is nobody's directory
    volume = document["spec"]["tasks"][0]["kubernetes"]["workload"]["template"]["spec"]["volumes"][0]
    volume["hostPath"]["path"] = host_paths.demo_output_path(str(settings.RLARK_LOCAL_ROOT), "admin", "cartpole-demo")
    result = validate(document, Inventory.from_db(admin))
    assert result.errors == [], result.errors
    volume["hostPath"]["path"] = host_paths.demo_output_path(str(settings.RLARK_LOCAL_ROOT), "bob", "cartpole-demo")
    assert [p.code for p in validate(document, Inventory.from_db(admin)).errors] == ["host_path_outside_roots"]
    assert result.workers == 3
    manifests = build("cartpole-demo", yaml.safe_load(JOB_YAML.read_text()))
    assert [(m.task, m.replicas, m.rank_start, m.total_nodes) for m in manifests] == [
        ("cartpole-demo-header", 1, 0, 3),
        ("cartpole-demo-rollout", 2, 1, 3),
    ]


def _wait_for_the_run(rt, head: str, t0: float) -> None:
    """Ray comes up, the first Global Step is logged and the run script ends; prints the times from submit."""
    wait_for(lambda: "Ray cluster is ready" in log_of(rt, head), 240, 0.2, what="Ray ready")
    ready = time.monotonic() - t0
    wait_for(lambda: "Global Step: 1/" in log_of(rt, head), 120, 0.2, what="first Global Step")
    first_step = time.monotonic() - t0
    wait_for(lambda: "Run script exited with code" in log_of(rt, head), 120, what="run script end")
    print(f"submit->Ray ready {ready:.1f}s, submit->first Global Step {first_step:.1f}s")


def _check_pod_placement(rt) -> None:
    """Every Worker Runs; the header on the GPU node, the two rollouts on the other two nodes."""
    pods = {p.name: p for p in rt.list_pods("rlark-system", "cartpole-demo")}
    assert {n: (p.phase, p.node) for n, p in pods.items()} == {
        "cartpole-demo-header-0": ("Running", "local-gpu-0"),
        "cartpole-demo-rollout-0": ("Running", pods["cartpole-demo-rollout-0"].node),
        "cartpole-demo-rollout-1": ("Running", pods["cartpole-demo-rollout-1"].node),
    }
    assert {pods["cartpole-demo-rollout-0"].node, pods["cartpole-demo-rollout-1"].node} == {
        "local-gpu-1",
        "local-robot-0",
    }


def _check_header_markers(rt, head: str) -> str:
    """The header's log shows the Ray cluster forming, the run and each node's confirmed rank; -> the GCS port."""
    log = log_of(rt, head)
    port = re.search(r"Ray Address: 127\.0\.0\.1:(\d+)", log).group(1)
    assert port != "6379"  # each local job has its own GCS port
    assert (
        markers_in_order(
            log,
            [
                "RLINF_NODE_RANK: 0",
                "Waiting for 3 nodes to join the Ray cluster...",
                "Cluster is ready: 3 nodes available (required: 3).",
                "Ray cluster check passed.",
                "Ray cluster is ready. Printing cluster information:",
                "Executing run script...",
                "RLinf is running on a cluster with 3 nodes and 1 accelerators.",
                "Learner on node rank 0 (cartpole-demo-header-0)",
                "Global Step: 1/6",
                "Global Step: 6/6",
                "Saving checkpoint at step 6.",
                "Run script exited with code 0",
            ],
        )
        == []
    )
    assert "Warning: Ray cluster check failed" not in log
    for rank, pod in enumerate(["cartpole-demo-header-0", "cartpole-demo-rollout-0", "cartpole-demo-rollout-1"]):
        assert f"({pod}, 127.0.0.1) confirmed RLINF_NODE_RANK={rank}" in log
    _check_rollout_markers(rt, log, port)
    return port


def _check_rollout_markers(rt, log: str, port: str) -> None:
    """Each rollout Worker has its actor and its own log shows it joining the head at ``port``."""
    for rank in (1, 2):
        assert f"Rollout actor on node rank {rank}" in log
        wlog = log_of(rt, f"cartpole-demo-rollout-{rank - 1}")
        assert (
            markers_in_order(
                wlog,
                [
                    f"RLINF_NODE_RANK: {rank}",
                    f"Connecting to Ray head at 127.0.0.1:{port}...",
                    "HEAD IP: 127.0.0.1",
                    f"Head is reachable at 127.0.0.1:{port}",
                ],
            )
            == []
        )


def _check_run_output(run: Path) -> Path:
    """The run wrote a readable checkpoint and TensorBoard events; -> the checkpoint's actor directory."""
    ckpt = run / "checkpoints" / "global_step_6" / "actor"
    assert np.load(ckpt / "policy.npz")["weights"].shape == (5, 2)
    assert json.loads((ckpt / "meta.json").read_text())["global_step"] == 6
    events = list((run / "tensorboard").glob("events.out.tfevents.*"))
    assert events and events[0].stat().st_size > 0
    return ckpt


def _check_exec_sees_rank_and_workdir(rt) -> None:
    """exec: the Worker's rank and working directory."""
    info = rt.pod_info("cartpole-demo-rollout-1")
    stream = rt.exec("rlark-system", "cartpole-demo-rollout-1")
    stream.write(b"echo RANK=$RLINF_NODE_RANK; pwd; exit\n")
    text = b""
    while (chunk := stream.read(2.0)) != b"":
        text += chunk or b""
    stream.close()
    assert "RANK=2" in text.decode() and info["workdir"] in text.decode()


def _check_ray_stop_restarts_one_worker(rt, head: str, port: str) -> None:
    """`ray stop` inside one Worker only stops that Worker's Ray (its own PID namespace); the wrapper
    exits with Ray's code and the container is restarted with the previous log kept."""
    others = {p["name"]: p["pid"] for p in rt._call("list_pods", job="cartpole-demo")}
    stream = rt.exec("rlark-system", "cartpole-demo-rollout-0", ["bash", "-c", "ray stop --force"])
    while stream.read(2.0) != b"":
        pass
    stream.close()
    restarted = wait_for(
        lambda: (
            (p := {x.name: x for x in rt.list_pods("rlark-system", "cartpole-demo")})
            and p["cartpole-demo-rollout-0"].container.restart_count >= 1
            and p["cartpole-demo-rollout-0"]
        ),
        120,
        what="rollout-0 restarted",
    )
    previous = log_of(rt, "cartpole-demo-rollout-0", previous=True)
    assert re.search(r"Ray worker process exited with code \d+\nStopping Ray worker...", previous)
    assert restarted.container.last_exit_code is not None
    wait_for(
        lambda: f"Head is reachable at 127.0.0.1:{port}" in log_of(rt, "cartpole-demo-rollout-0"),
        120,
        what="restarted worker rejoins",
    )
    assert pid_alive(others["cartpole-demo-header-0"]) and pid_alive(others["cartpole-demo-rollout-1"])
    assert "Stopping Ray cluster..." not in log_of(rt, head)


def _check_scale_to_zero(rt, manifests) -> set[int]:
    """scale to 0: within 10 s no Pod of the job is left; -> the PIDs the job had."""
    pids = pod_pids(rt, "cartpole-demo")
    assert len(pids) > 10  # wrappers, raylets, GCS, Ray workers ...
    t_stop = time.monotonic()
    for m in manifests:
        rt.scale_task("rlark-system", m.task, 0)
    wait_for(lambda: not rt.list_pods("rlark-system", "cartpole-demo"), 30, what="pods gone")
    stop_seconds = time.monotonic() - t_stop
    print(f"scale to 0 took {stop_seconds:.1f}s")
    assert stop_seconds <= 10.5 or _loaded(), stop_seconds
    return pids


@pytest.mark.ray
def test_demo_job_trains_on_a_3_node_loopback_ray_cluster(sup, tmp_path):
    out = tmp_path / "output"
    rt = sup.runtime(NODES, cluster="local")
    manifests = build("cartpole-demo", demo_doc(out, "--steps 6 --step-interval 0.5 --run-name t1"))
    head = "cartpole-demo-header-0"
    t0 = time.monotonic()
    with LoopbackWatch(lambda: pod_pids(rt, "cartpole-demo")) as watch:
        for m in manifests:
            rt.apply_task(m)
        _wait_for_the_run(rt, head, t0)
        _check_pod_placement(rt)
        port = _check_header_markers(rt, head)
        ckpt = _check_run_output(out / "t1")
        _check_exec_sees_rank_and_workdir(rt)
        _check_ray_stop_restarts_one_worker(rt, head, port)
        pids = _check_scale_to_zero(rt, manifests)
    # SIGKILLed processes of a loaded machine may take a moment to be scheduled and die
    wait_for(lambda: not [p for p in pids if pid_alive(p)], 10, what="no process of the job left")
    assert np.load(ckpt / "policy.npz")["weights"].shape == (5, 2)  # readable after the job stopped
    assert watch.checked > 0 and watch.samples > 10
    assert watch.bad == set(), f"non-loopback connections: {watch.bad}"
    for m in manifests:
        rt.delete_task("rlark-system", m.task)


@pytest.mark.ray
def test_demo_runs_the_rlinf_charger_cluster_section(sup, tmp_path):
    out = tmp_path / "output"
    doc = demo_doc(out, "")
    header, rollout = doc["spec"]["tasks"]
    header["nodeSelector"] = {"rlinf.io/node-group": "4090"}
    header["runScript"] = (
        f"python -u /rlark/examples/demo/train.py --config /rlark/examples/demo/rlinf/{CHARGER.name} "
        "--output /output --steps 3 --step-interval 0.3 --run-name charger"
    )
    franka = copy.deepcopy(rollout)
    franka.update(name="franka", role="Env", nodeSelector={"rlinf.io/node-group": "franka"})
    franka["kubernetes"]["workload"]["replicas"] = 1
    doc["spec"]["tasks"] = [header, franka]
    manifests = build("charger", doc)
    rt = sup.runtime(NODES, cluster="local")
    for m in manifests:
        rt.apply_task(m)
    head = "charger-header-0"
    wait_for(lambda: "Run script exited with code" in log_of(rt, head), 300, what="charger run end")
    log = log_of(rt, head)
    assert (
        markers_in_order(
            log,
            [
                "Waiting for 2 nodes to join the Ray cluster...",
                "Cluster is ready: 2 nodes available (required: 2).",
                "Executing run script...",
                "RLinf is running on a cluster with 2 nodes and 1 accelerators.",
                "Global Step: 3/3",
                "Run script exited with code 0",
            ],
        )
        == []
    )
    assert "(charger-header-0, 127.0.0.1) confirmed RLINF_NODE_RANK=0, node groups: 4090" in log
    assert "(charger-franka-0, 127.0.0.1) confirmed RLINF_NODE_RANK=1, node groups: franka" in log
    assert "Component env: node group franka (node ranks [1])" in log
    assert {p.name: p.node for p in rt.list_pods("rlark-system", "charger")} == {
        "charger-header-0": "local-gpu-0",
        "charger-franka-0": "local-robot-0",
    }
    assert (out / "charger" / "checkpoints" / "global_step_3" / "actor" / "meta.json").exists()
    pids = pod_pids(rt, "charger")
    for m in manifests:
        rt.delete_task("rlark-system", m.task)
    wait_for(lambda: not rt.list_pods("rlark-system", "charger"), 15, what="deleted")
    wait_for(lambda: not [p for p in pids if pid_alive(p)], 10, what="no process of the job left")
    assert launcher.namespace_members(min(pids)) == [] or not pid_alive(min(pids))
