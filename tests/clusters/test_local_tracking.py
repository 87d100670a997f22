"""Experiment-tracking credentials on the local runtime (``clusters.runtime.local.tracking``): the files, without
Ray, and a real two-node Ray job whose Workers receive the keys (marker ``ray``) while the supervisor's state, the
Pods' env and the logs never hold them."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os

import pytest

from clusters import tracking_secret
from clusters.runtime.local import tracking
from clusters.runtime.local.supervision import Supervisor
from jobs.observe.log_markers import ScanState
from tests.clusters.test_local_runtime_support import SupervisorProcess, manifest, nodes_spec, wait_for

WANDB_KEY = "local-wandb-key-5b1f0c2d9e8a7b6c5d4e3f2a1b0c9d8e"
SWAN_KEY = "swan-key-Q1W2E3R4T5Y6U7I8O9P0"
VALUES = {
    "WANDB_API_KEY": WANDB_KEY,
    "WANDB_BASE_URL": "https://127.0.0.1:9443",
    "WANDB_ENTITY": "rl-team",  # the W&B credential's entity travels with its key
    "SWANLAB_API_KEY": SWAN_KEY,
}


def with_secret(job: str, template: str = "header", head: bool = True, **kw):
    m = manifest(job, template, head=head, **kw)
    secret = tracking_secret.secret(m.task, m.namespace, {"rlinf.io/job": job}, VALUES)
    return dataclasses.replace(m, extra_objects=(secret,))


def test_take_drops_the_values_and_leaves_the_callers_manifest_alone():
    wire = dataclasses.asdict(with_secret("j1"))
    stripped, values = tracking.take(wire)
    assert values == VALUES
    assert WANDB_KEY not in json.dumps(stripped) and SWAN_KEY not in json.dumps(stripped)
    assert stripped["extra_objects"][0]["metadata"]["name"] == "j1-header-tracking"
    assert tracking_secret.values_of(wire["extra_objects"][0]) == VALUES
    plain = dataclasses.asdict(manifest("j2", "header", head=True))
    assert tracking.take(plain) == (plain, None)


def test_every_variable_is_a_worker_file_the_wrapper_scripts_export():
    """The wrapper scripts export exactly the variables of ``clusters.tracking_secret`` (the entity too)."""
    from pathlib import Path

    import clusters

    scripts = Path(clusters.__file__).parent / "scripts"
    for name in ("ray_head.sh", "ray_worker.sh"):
        line = next(x for x in (scripts / name).read_text().splitlines() if "WANDB_API_KEY |" in x)
        listed = line.split(")")[0].strip().split(" | ")
        assert listed == list(tracking_secret.VARIABLES), name


def test_worker_files_are_root_owned_and_readable_by_the_job_only(tmp_path):
    tracking.store(tmp_path, "j1", VALUES)
    master = tmp_path / "tracking" / "j1.json"
    assert master.stat().st_mode & 0o777 == 0o600 and (tmp_path / "tracking").stat().st_mode & 0o777 == 0o700
    uid = 100000 + 7 if os.geteuid() == 0 else None
    mount = tracking.worker_mount(tmp_path, "j1", (uid, 65536) if uid else None)
    assert (mount.target, mount.read_only, mount.kind) == ("/rlark/tracking", True, "bind")
    files = {p.name: p for p in (tmp_path / "tracking" / "j1" / str(uid or os.geteuid())).iterdir()}
    assert set(files) == set(VALUES)
    for name, path in files.items():
        st = path.stat()
        assert path.read_text() == VALUES[name]
        assert st.st_uid == os.geteuid()
        if uid:
            assert (st.st_gid, st.st_mode & 0o777) == (uid, 0o440)
        else:
            assert st.st_mode & 0o777 == 0o400
    tracking.store(tmp_path, "j1", None)  # the job no longer picks a credential
    assert not master.exists() and tracking.worker_mount(tmp_path, "j1", None) is None
    with pytest.raises(ValueError):
        tracking.store(tmp_path, "../x", VALUES)


def test_supervisor_keeps_the_values_out_of_its_state_and_forgets_them_with_the_job(tmp_path):
    sup = Supervisor(tmp_path / "root")
    sup.op_set_nodes("c1", [{"name": "n1", "labels": {}, "capacity": {"cpu": 4}}])
    sup.op_apply_task("c1", dataclasses.asdict(with_secret("j1")))
    sup._dirty = True
    sup._save()
    state = (tmp_path / "root" / "state.json").read_text()
    assert WANDB_KEY not in state and SWAN_KEY not in state
    assert json.loads((tmp_path / "root" / "tracking" / "j1.json").read_text()) == VALUES
    sup.op_delete_task("c1", "j1-header")
    assert not (tmp_path / "root" / "tracking" / "j1.json").exists()
    for base in list(sup.ports.locks):
        sup.ports.unlock(base)


# The Header's run script asks every Ray node (the Header's and the Worker's) for a digest of each variable its
# Ray worker processes see, then prints the run-URL lines W&B and SwanLab print.
RUN = r"""python -u - <<'PY'
import hashlib, json, os, ray
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy
ray.init(address="auto", logging_level="ERROR")
NAMES = ("WANDB_API_KEY", "WANDB_BASE_URL", "WANDB_ENTITY", "SWANLAB_API_KEY", "SWANLAB_WEB_HOST")
@ray.remote(num_cpus=0)
def seen():
    return {n: hashlib.sha256(os.environ[n].encode()).hexdigest() for n in NAMES if n in os.environ}
nodes = [n["NodeID"] for n in ray.nodes() if n["Alive"]]
refs = [seen.options(scheduling_strategy=NodeAffinitySchedulingStrategy(n, soft=False)).remote() for n in nodes]
print("TRACKING-SEEN " + json.dumps(ray.get(refs)), flush=True)
PY
echo "wandb: 🚀 View run at https://wandb.ai/team/rlinf/runs/abc123"
echo "swanlab: 🚀 View run at https://swanlab.cn/@alice/rlinf/runs/xyz789"
"""


def _log(root, pod: str) -> str:
    path = root / "pods" / "c1" / pod / "main.log"
    return path.read_text(errors="replace") if path.exists() else ""


@pytest.mark.ray
@pytest.mark.timeout(900)
def test_a_real_worker_receives_the_keys_and_nothing_else_holds_them(tmp_path):
    root = tmp_path / "root"
    sup = SupervisorProcess(root).start()
    rt = sup.runtime(nodes_spec(("n1", {}, {"cpu": 8, "memory": "32Gi"}), ("n2", {}, {"cpu": 8, "memory": "32Gi"})))
    try:
        rt.apply_task(with_secret("trk", "header", head=True, total=2, run=RUN))
        rt.apply_task(with_secret("trk", "worker", head=False, rank_start=1, total=2))
        wait_for(lambda: "Run script exited" in _log(root, "trk-header-0"), 600, 1, what="the run script")
        log = _log(root, "trk-header-0")
        assert "Run script exited with code 0" in log, log[-3000:]
        seen = json.loads(log.split("TRACKING-SEEN ", 1)[1].splitlines()[0])
        want = {k: hashlib.sha256(v.encode()).hexdigest() for k, v in VALUES.items()}
        assert len(seen) == 2 and all(s == want for s in seen), seen  # the Header's node and the Worker's
        links = ScanState().feed(log).links  # the Header's real log, as the per-Pod log scan reads it
        assert links == {
            "wandb": ["https://wandb.ai/team/rlinf/runs/abc123"],
            "swanlab": ["https://swanlab.cn/@alice/rlinf/runs/xyz789"],
        }
        texts = [(root / "state.json").read_text(), log, _log(root, "trk-worker-0")]
        texts += [json.dumps(rt.pod_info(p).get("env") or {}) for p in ("trk-header-0", "trk-worker-0")]
        for text in texts:
            assert WANDB_KEY not in text and SWAN_KEY not in text
        rt.delete_task("rlark-system", "trk-worker")
        rt.delete_task("rlark-system", "trk-header")
        wait_for(lambda: not (root / "tracking" / "trk.json").exists(), 60, what="the job's values removed")
    finally:
        sup.stop()
