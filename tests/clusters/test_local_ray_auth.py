"""Ray token authentication between local jobs, on real Ray (marker ``ray``).

With job networks off (``RLARK_LOCAL_JOB_NETWORKS=0``, what an unprivileged console runs: every local Worker
shares the host's loopback, where each job's GCS, dashboard and dashboard agent listen), authentication alone
must keep one job out of another: from
job A's head (its run script), B's dashboard-agent job API (the "ShadowRay" POST), B's dashboard job API and B's
GCS must refuse A, with A's token and with none; B's own run script still reaches its cluster with ``ray.init``
and ``ray job submit``. The token stays out of ``state.json``, the Pods' env and logs."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from tests.clusters.test_local_runtime_support import SupervisorProcess, manifest, nodes_spec, wait_for

pytestmark = [pytest.mark.ray, pytest.mark.timeout(900)]

NODES = nodes_spec(("n1", {}, {"cpu": 16, "memory": "64Gi"}))

B_RUN = """
dash=$(python -c 'import json, os
args = json.loads(os.environ["RLARK_LOCAL_RAY_START_ARGS"])
print(next(a.split("=", 1)[1] for a in args if a.startswith("--dashboard-port=")))')
python -u -c 'import ray
ray.init(address="auto", logging_level="ERROR")
print("B-INIT", ray.get(ray.remote(lambda: 41 + 1).remote()), flush=True)'
timeout 180 ray job submit --address "http://127.0.0.1:$dash" -- echo B-SUBMIT-OK
"""

# Job A's run script: every way into B it would try, with its own token and with none.
PROBE = r"""
import json, os, subprocess, sys, urllib.error, urllib.request

mine = open(os.environ["RAY_AUTH_TOKEN_PATH"]).read().strip() if os.environ.get("RAY_AUTH_TOKEN_PATH") else ""

def post(url, token):
    body = json.dumps({"entrypoint": "touch /tmp/shadowray", "submission_id": "shadow-" + os.urandom(4).hex()})
    headers = {"Content-Type": "application/json"}
    if token:
        headers["Authorization"] = "Bearer " + token
    req = urllib.request.Request(url, data=body.encode(), headers=headers, method="POST")
    try:
        with urllib.request.urlopen(req, timeout=30) as resp:
            return resp.status
    except urllib.error.HTTPError as exc:
        return exc.code
    except OSError as exc:
        return "error " + str(exc)

GCS = '''
import sys
from ray._raylet import GcsClient
try:
    GcsClient(address=sys.argv[1]).internal_kv_keys(b"", namespace=None, timeout=10)
    print("OK")
except Exception as exc:
    print("REFUSED " + type(exc).__name__)
'''

def gcs(address, token):
    env = {k: v for k, v in os.environ.items() if not k.startswith("RAY_AUTH")}
    env["RAY_AUTH_MODE"] = "disabled"
    if token:
        env.update(RAY_AUTH_MODE="token", RAY_AUTH_TOKEN=token)
    try:
        out = subprocess.run([sys.executable, "-c", GCS, address], env=env, capture_output=True, text=True, timeout=90)
        return (out.stdout.strip().splitlines() or ["no answer: " + out.stderr[-300:]])[-1]
    except subprocess.TimeoutExpired:
        return "timeout"

agent = "http://127.0.0.1:%s/api/job_agent/jobs/" % os.environ["B_AGENT_PORT"]
dash = "http://127.0.0.1:%s/api/jobs/" % os.environ["B_DASHBOARD_PORT"]
gcs_b = "127.0.0.1:" + os.environ["B_GCS_PORT"]
result = {
    "has_token": bool(mine),
    "agent_none": post(agent, ""),
    "agent_a": post(agent, mine),
    "dashboard_none": post(dash, ""),
    "dashboard_a": post(dash, mine),
    "gcs_none": gcs(gcs_b, ""),
    "gcs_a": gcs(gcs_b, mine),
    "gcs_own": gcs("127.0.0.1:" + os.environ["RLARK_RAY_PORT"], mine),
}
print("PROBE-RESULT " + json.dumps(result), flush=True)
"""


def log_of(root: Path, pod: str) -> str:
    path = root / "pods" / "c1" / pod / "main.log"
    return path.read_text(errors="replace") if path.exists() else ""


def test_another_jobs_worker_is_refused_by_gcs_dashboard_and_agent(tmp_path):
    root = tmp_path / "root"
    sup = SupervisorProcess(root, RLARK_LOCAL_RAY_DASHBOARD="1", RLARK_LOCAL_JOB_NETWORKS="0").start()
    rt = sup.runtime(NODES)
    try:
        rt.apply_task(manifest("jobb", "header", head=True, run=B_RUN))
        wait_for(lambda: "Run script exited" in log_of(root, "jobb-header-0"), 420, 1, what="job B's run script")
        b_log = log_of(root, "jobb-header-0")
        assert "Run script exited with code 0" in b_log, b_log[-3000:]
        assert "B-INIT 42" in b_log and "\nB-SUBMIT-OK\n" in b_log, b_log[-3000:]
        assert "succeeded" in b_log.split("\nB-SUBMIT-OK\n", 1)[1], b_log[-3000:]

        state = json.loads((root / "state.json").read_text())
        b_base = state["pods"]["c1/jobb-header-0"]["port_base"]
        env = [
            {"name": "B_AGENT_PORT", "value": str(b_base + 3)},
            {"name": "B_DASHBOARD_PORT", "value": str(b_base + 7)},
            {"name": "B_GCS_PORT", "value": str(state["jobs"]["c1/jobb"]["gcs_port"])},
            {"name": "PROBE_PY", "value": PROBE},
        ]
        rt.apply_task(manifest("joba", "header", head=True, env=env, run='python -u -c "$PROBE_PY"'))
        wait_for(lambda: "PROBE-RESULT" in log_of(root, "joba-header-0"), 420, 1, what="job A's probe")
        a_log = log_of(root, "joba-header-0")
        result = json.loads(a_log.split("PROBE-RESULT ", 1)[1].splitlines()[0])
        print("job A's probe of job B:", result)
        assert result["has_token"]
        assert result["gcs_own"] == "OK", result  # the probe itself works
        assert result["agent_none"] == 401 and result["agent_a"] == 403, result
        assert result["dashboard_none"] == 401 and result["dashboard_a"] == 403, result
        assert result["gcs_none"].startswith("REFUSED"), result
        assert result["gcs_a"].startswith("REFUSED"), result
        assert not (root / "pods" / "c1" / "jobb-header-0" / "tmp" / "shadowray").exists()

        # each job its own token: a root-only file, a copy only the job's uid reads, in no state, env or log
        tokens = {job: (root / "ray-auth" / f"{job}.token").read_text() for job in ("joba", "jobb")}
        assert len(set(tokens.values())) == 2 and all(len(t) == 64 for t in tokens.values())
        for job, token in tokens.items():
            master = (root / "ray-auth" / f"{job}.token").stat()
            assert (master.st_uid, master.st_mode & 0o777) == (os.geteuid(), 0o600)
            (copy_path,) = (root / "ray-auth" / job).glob("*/token")  # one copy, for the job's one uid here
            copy = copy_path.stat()
            assert copy.st_mode & 0o777 == 0o400
            if os.geteuid() == 0:
                assert copy.st_uid != 0  # the job's subordinate uid
            state_text = (root / "state.json").read_text()
            assert token not in state_text
            for pod in ("joba-header-0", "jobb-header-0"):
                assert token not in log_of(root, pod)
                assert token not in json.dumps(rt.pod_info(pod).get("env") or {})
        assert rt.pod_info("joba-header-0")["env"]["RAY_AUTH_TOKEN_PATH"] == "/rlark/ray-auth/token"

        rt.delete_task("rlark-system", "joba-header")
        wait_for(lambda: not (root / "ray-auth" / "joba.token").exists(), 30, what="job A's token removed")
    finally:
        sup.stop()
