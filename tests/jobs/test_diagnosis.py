"""Diagnosis: stage timelines from the wrapper markers and classification of known errors (seed 05)."""

from __future__ import annotations

import re

from jobs.explain.diagnosis import FINDING_TEXT, WorkerInput, diagnose, scan_log
from rlark_console.language import translate

HEAD_OK = """RLINF_NODE_RANK: 0
rlark-sshd started on port 22
Executing prepare script...
prepared
Waiting for 3 nodes to join the Ray cluster...
Starting Ray cluster status check...
Waiting for cluster to have at least 3 nodes.
Ray Address: 10.0.0.1:6379
Found 3 total nodes, 3 of which are alive.
Current node count: 3
Cluster is ready: 3 nodes available (required: 3).
Ray cluster check passed.
Ray cluster is ready. Printing cluster information:
==========================================
Active: 3 nodes
==========================================
Executing run script...
[INFO 10:00:01 RLinf] RLinf is running on a cluster with 3 nodes and 24 accelerators.
Global Step:    1/100 | Progress: 1%
Run script exited with code 0
"""


def worker_log(rank: int, tail: str = "") -> str:
    return (
        f"RLINF_NODE_RANK: {rank}\n"
        "SSH public key injected into authorized_keys\n"
        "Executing prepare script...\n"
        "Connecting to Ray head at demo-header-ray-head:6379...\n"
        "HEAD IP: 10.0.0.1\n"
        "Head is reachable at 10.0.0.1:6379\n"
        f"{tail}"
    )


def test_healthy_job_has_full_timeline_and_no_findings():
    result = diagnose(
        [
            WorkerInput("demo-header-0", "Header", head=True, expected_rank=0, phase="Running", log=HEAD_OK),
            WorkerInput("demo-rollout-0", "Rollout", expected_rank=1, phase="Running", log=worker_log(1)),
        ]
    )
    assert result.findings == []
    head, worker = result.workers
    assert [m.key for m in head.scan.markers] == [
        "rank",
        "ssh",
        "prepare",
        "head_wait",
        "cluster_ready",
        "run_script",
        "run_exit",
    ]
    assert head.last_stage_key == "run_exit"
    assert head.first_error is None
    assert worker.last_stage_key == "head_reachable"
    assert [m.key for m in worker.scan.markers] == ["rank", "ssh", "prepare", "connect", "head_ip", "head_reachable"]
    assert worker.scan.rank == 1


def test_shm_nccl_and_partial_ray_cluster_are_classified():
    head = HEAD_OK.replace("Found 3 total nodes, 3 of which are alive.\nCurrent node count: 3\n", "")
    head = head.replace(
        "Cluster is ready: 3 nodes available (required: 3).\nRay cluster check passed.\n",
        "Found 2 total nodes, 2 of which are alive.\nCurrent node count: 2\n"
        "Error: Cluster did not become ready within 15 minutes (required 3 nodes).\nRay cluster check failed.\n"
        "Warning: Ray cluster check failed, proceeding anyway.\n",
    )
    head = head.replace(
        "[INFO 10:00:01 RLinf] RLinf is running on a cluster with 3 nodes and 24 accelerators.\n",
        "[WARNING 10:00:01 RLinf] Waiting for 3 nodes to be ready, currently 2 nodes available.\n",
    ).replace("Global Step:    1/100 | Progress: 1%\nRun script exited with code 0\n", "")
    rollout = worker_log(
        1,
        "(RolloutWorker pid=77) ERROR: Unexpected bus error encountered in worker. "
        "This might be caused by insufficient shared memory (shm).\n"
        "OSError: [Errno 28] No space left on device: '/dev/shm/torch_123'\n",
    )
    actor = worker_log(
        2,
        "[rank2]:[E ProcessGroupNCCL.cpp:616] Watchdog caught collective operation timeout: "
        "WorkNCCL(SeqNum=1, OpType=ALLREDUCE) ran for 600000 milliseconds before timing out.\n",
    )
    result = diagnose(
        [
            WorkerInput("demo-header-0", "Header", head=True, expected_rank=0, log=head),
            WorkerInput("demo-rollout-0", "Rollout", expected_rank=1, log=rollout),
            WorkerInput("demo-actor-0", "Actor", expected_rank=2, log=actor),
        ]
    )
    by_code = {(f.code, f.pod) for f in result.findings}
    assert ("shm_or_disk", "demo-rollout-0") in by_code
    assert ("nccl", "demo-actor-0") in by_code
    assert ("ray_partial", "demo-header-0") in by_code
    assert ("ray_check_failed", "demo-header-0") in by_code
    # No false positives on the healthy parts.
    assert ("nccl", "demo-rollout-0") not in by_code and ("shm_or_disk", "demo-actor-0") not in by_code
    partial = next(f for f in result.findings if f.code == "ray_partial")
    assert partial.detail("en") == "The head's cluster check needed 3 nodes and saw at most 2 alive."
    shm = next(f for f in result.findings if f.code == "shm_or_disk")
    assert "No space left on device" in shm.line or "shared memory" in shm.line
    # Next steps come from seed 05 in the user's language.
    assert shm.next_step("zh-hans").startswith("创建器不能配置 /dev/shm 的 memory-backed volume。")
    assert shm.next_step("en").startswith("The job wizard cannot configure a memory-backed volume for /dev/shm.")
    nccl = next(f for f in result.findings if f.code == "nccl")
    assert "RLark 不自动诊断 NCCL" in nccl.next_step("zh-hans")
    assert nccl.to_dict("en")["title"] == "NCCL init, socket, timeout or collective hang"


def test_rlinf_waiting_line_alone_flags_partial_cluster():
    log = HEAD_OK.replace(
        "[INFO 10:00:01 RLinf] RLinf is running on a cluster with 3 nodes and 24 accelerators.\n",
        "[WARNING 10:00:01 RLinf] Waiting for 3 nodes to be ready, currently 1 nodes available.\n",
    )
    (finding,) = [f for f in diagnose([WorkerInput("h-0", head=True, log=log)]).findings if f.code == "ray_partial"]
    assert finding.detail("zh-hans") == "RLinf 需要 3 个节点，当前只有 1 个可用。"
    # Once RLinf reports the cluster formed after waiting, it is no longer partial.
    formed = log + "[INFO 10:00:09 RLinf] RLinf is running on a cluster with 3 nodes and 24 accelerators.\n"
    assert "ray_partial" not in diagnose([WorkerInput("h-0", head=True, log=formed)]).codes()


def test_multi_head_is_flagged():
    result = diagnose(
        [
            WorkerInput("demo-header-0", "Header", head=True, log=HEAD_OK),
            WorkerInput("demo-header-1", "Header", head=True, log=HEAD_OK.replace("RANK: 0", "RANK: 1")),
        ]
    )
    assert result.multi_head
    (finding,) = result.job_findings
    assert finding.code == "multi_head"
    assert finding.detail("en") == "Pods that ran the run script: demo-header-0, demo-header-1."
    assert "先按多 Head 副本缺陷处理" in finding.next_step("zh-hans")
    single = diagnose([WorkerInput("demo-header-0", "Header", head=True, log=HEAD_OK)])
    assert not single.multi_head


def test_timeline_prepare_failure():
    log = (
        "RLINF_NODE_RANK: 1\n"
        "Executing prepare script...\n"
        "Collecting rlinf\n"
        "bash: /opt/venv/bin/activate: No such file or directory\n"
    )
    (w,) = diagnose([WorkerInput("j-rollout-0", "Rollout", log=log, phase="Failed")]).workers
    assert w.last_stage_key == "prepare"
    assert w.first_error == (4, "bash: /opt/venv/bin/activate: No such file or directory")
    assert [f.code for f in w.findings] == ["prepare_failed"]
    assert w.findings[0].line_no == 4
    assert w.to_dict("zh-hans")["lastStageLabel"] == "角色准备脚本"
    assert w.to_dict("en")["advice"].startswith("The first error after this comes from the role's prepareScript.")


def test_timeline_missing_ray_cli():
    log = (
        "RLINF_NODE_RANK: 0\nExecuting prepare script...\n"
        "Error: Ray CLI is not found. Please ensure Ray is installed.\n"
    )
    (w,) = diagnose([WorkerInput("j-header-0", "Header", head=True, log=log, phase="Failed")]).workers
    assert w.last_stage_key == "prepare"
    assert w.first_error == (3, "Error: Ray CLI is not found. Please ensure Ray is installed.")
    codes = [f.code for f in w.findings]
    assert codes == ["ray_cli_missing"]  # not misreported as a prepare-script failure
    assert w.findings[0].next_step("en").startswith("Use an image with a pinned Ray version")
    assert w.scan.markers[-1].failed


def test_timeline_cannot_reach_head():
    attempts = "".join(
        f"Waiting for head to be reachable at demo-header-ray-head:6379... (attempt {k})\n" for k in range(1, 121)
    )
    log = (
        "RLINF_NODE_RANK: 2\nConnecting to Ray head at demo-header-ray-head:6379...\n"
        + attempts
        + "[2026-01-01 10:00:00] ConnectionError: Could not connect to Ray at demo-header-ray-head:6379\n"
    )
    (w,) = diagnose([WorkerInput("demo-rollout-1", "Rollout", log=log)]).workers
    assert w.last_stage_key == "connect"
    assert w.scan.head_wait_attempts == 120
    assert w.first_error is not None and "ConnectionError" in w.first_error[1]
    (finding,) = [f for f in w.findings if f.code == "head_unreachable"]
    assert finding.detail("en") == "Waited 120 times without Head is reachable."
    assert "不要只重启 Worker" in w.to_dict("zh-hans")["advice"]


def test_worker_exit_code_and_run_script_failure():
    w_log = worker_log(1, "Ray worker process exited with code 137\nStopping Ray worker...\n")
    h_log = HEAD_OK.replace(
        "Run script exited with code 0", "Traceback (most recent call last):\nRun script exited with code 3"
    )
    result = diagnose([WorkerInput("j-h-0", head=True, log=h_log), WorkerInput("j-w-0", log=w_log)])
    head, worker = result.workers
    assert [f.code for f in worker.findings] == ["worker_exit"]
    assert worker.findings[0].detail("en") == "Exit code 137."
    assert worker.scan.markers[-1].key == "stopping"
    assert worker.last_stage_key == "head_reachable"  # a failed exit is not a completed stage
    assert [f.code for f in head.findings] == ["run_script_failed"]
    assert head.first_error[1] == "Traceback (most recent call last):"
    ok = diagnose([WorkerInput("j-w-0", log=worker_log(1, "Ray worker process exited with code 0\n"))])
    assert ok.findings == [] and ok.workers[0].last_stage_key == "worker_exit"


def test_container_state_findings_image_pull_crash_loop_oom():
    result = diagnose(
        [
            WorkerInput(
                "j-a-0",
                container={"state": "waiting", "reason": "ImagePullBackOff", "message": 'Back-off pulling image "x:1"'},
            ),
            WorkerInput(
                "j-b-0",
                events=[{"type": "Warning", "reason": "Failed", "message": 'Failed to pull image "y:2": not found'}],
            ),
            WorkerInput("j-c-0", container={"state": "waiting", "reason": "CrashLoopBackOff", "restart_count": 5}),
            WorkerInput("j-d-0", container={"state": "running", "last_reason": "OOMKilled", "restart_count": 1}),
        ]
    )
    got = {(f.code, f.pod) for f in result.findings}
    assert got == {("image_pull", "j-a-0"), ("image_pull", "j-b-0"), ("crash_loop", "j-c-0"), ("oom_killed", "j-d-0")}
    pull = next(f for f in result.findings if f.pod == "j-a-0")
    assert pull.next_step("zh-hans") == "对照启动清单中的 digest；凭据只通过组织允许的 Secret 方式处理。"


def test_restarted_container_only_last_run_counts():
    log = "RLINF_NODE_RANK: 1\nExecuting prepare script...\nboom: error\nRLINF_NODE_RANK: 1\n" + worker_log(1)[19:]
    scan = scan_log(log)
    assert scan.segment_start == 4
    assert [m.key for m in scan.markers][0] == "rank" and scan.markers[0].line_no == 4


def test_every_finding_has_both_languages():
    for code, texts in FINDING_TEXT.items():  # title, suspicion, next step: English msgids
        assert len(texts) == 3 and all(texts), code
        for text in texts:
            assert translate(text, "en") == text and re.search(r"[\u4e00-\u9fff]", translate(text, "zh-hans")), code
