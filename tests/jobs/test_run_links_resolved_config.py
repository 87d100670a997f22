"""W&B / SwanLab run links captured by the per-Pod log scan (``jobs.observe.run_links``) and the resolved RLinf
config beside the TensorBoard events (``jobs.observe.resolved_config``), as the Metrics tab and the run record
show them."""

from __future__ import annotations

import hashlib
from types import SimpleNamespace

import pytest

from accounts.models import TrackingCredential
from jobs.observe import run_links
from jobs.observe.log_markers import ScanState

WANDB = "wandb: 🚀 View run ppo-maniskill at: https://wandb.ai/team/rlinf/runs/abc123"
SWAN = "swanlab: 🚀 View run at https://swanlab.cn/@alice/rlinf/runs/xyz789"


def test_the_scan_keeps_each_services_run_addresses_across_any_cut():
    text = f"RLINF_NODE_RANK: 0\nstep 1\n{WANDB}\nwandb: Syncing run\n{SWAN}\nGlobal Step 2\n"
    for cut in (1, len(text) // 2, text.index("https") + 5, len(text) - 1):
        state = ScanState().feed(text[:cut]).feed(text[cut:])
        assert state.links == {
            "wandb": ["https://wandb.ai/team/rlinf/runs/abc123"],
            "swanlab": ["https://swanlab.cn/@alice/rlinf/runs/xyz789"],
        }
        again = ScanState.from_json(state.to_json())  # stored as the PodLogScan's JSON
        assert again.links == state.links


def test_only_run_lines_of_the_two_clients_and_only_https_are_kept():
    state = ScanState().feed(
        "echo View run at https://wandb.ai/not/a/client/line\n"
        "wandb: 🚀 View run x at: http://wandb.ai/plain/http\n"
        "swanlab: 🚀 View run at https://swanlab.cn/@a/p/runs/1.\n"
        + "".join(f"wandb: 🚀 View run r at: https://wandb.ai/t/p/runs/{i}\n" for i in range(10))
    )
    assert state.links["swanlab"] == ["https://swanlab.cn/@a/p/runs/1"]
    assert state.links["wandb"] == [f"https://wandb.ai/t/p/runs/{i}" for i in range(run_links.PER_SERVICE)]


@pytest.mark.django_db
def test_the_page_gets_only_allowed_hosts_and_the_owners_self_hosted_one(alice):
    job = SimpleNamespace(owner=alice)
    scans = SimpleNamespace(
        links={
            "demo-header-0": {"wandb": ["https://evil.example.net/r/1", "https://wandb.example.com/t/p/runs/9"]},
            "demo-rollout-0": {"swanlab": ["https://user:pw@swanlab.cn/x", "https://swanlab.cn/@a/p/runs/2"]},
        }
    )
    assert [link["url"] for link in run_links.job_links(job, scans)] == ["https://swanlab.cn/@a/p/runs/2"]
    TrackingCredential.objects.create(
        user=alice, name="own", kind="wandb", api_key="k", host="https://wandb.example.com"
    )
    assert run_links.job_links(job, scans) == [
        {"service": "wandb", "label": "W&B", "url": "https://wandb.example.com/t/p/runs/9"},
        {"service": "swanlab", "label": "SwanLab", "url": "https://swanlab.cn/@a/p/runs/2"},
    ]


def _job_with_tensorboard(tmp_path, owner):
    """A local job whose Header mounts ``tmp_path``/data at /data and logs TensorBoard into /data/tb."""
    from clusters.models import Cluster
    from jobs.models import Job, Task
    from tests.jobs.test_runcheck import template

    data = tmp_path / "data"
    (data / "tb").mkdir(parents=True)
    head = template("header", "rlinf/rlinf:v1", {}, 1, head=True, mounts=data)
    head["tensorBoardDir"] = "/data/tb"
    cluster = Cluster.objects.create(name="local", runtime="local", status="online")
    job = Job.objects.create(name="demo", owner=owner, spec={"metadata": {"name": "demo"}, "spec": {"tasks": [head]}})
    Task.objects.create(job=job, template_name="header", name="demo-header", cluster=cluster, head=True, replicas=1)
    return job, data / "tb"


@pytest.mark.django_db
def test_resolved_config_byte_for_byte_with_its_checksum_and_cut_when_long(tmp_path, alice):
    from jobs.observe import resolved_config

    job, tb = _job_with_tensorboard(tmp_path, alice)
    assert resolved_config.resolved_config(job) is None
    body = "runner:\n  logger:\n    logger_backends: [tensorboard, wandb]\n    project_name: 测试\n".encode()
    (tb / "tensorboard").mkdir()
    (tb / "tensorboard" / "config.yaml").write_bytes(body)
    found = resolved_config.resolved_config(job)
    assert found.path == "/data/tb/tensorboard/config.yaml"
    assert found.text.encode() == body and found.sha256 == hashlib.sha256(body).hexdigest()
    assert found.size == len(body) and not found.truncated and found.hashed_all
    long = b"a: " + b"x" * (resolved_config.MAX_SHOW + 10) + b"\n"
    (tb / "config.yaml").write_bytes(long)  # the directory's own config.yaml comes first
    found = resolved_config.resolved_config(job)
    assert found.path == "/data/tb/config.yaml" and found.truncated
    assert len(found.text) == resolved_config.MAX_SHOW and found.sha256 == hashlib.sha256(long).hexdigest()


@pytest.mark.django_db
def test_a_link_out_of_the_directory_is_not_read(tmp_path, alice):
    from jobs.observe import resolved_config

    job, tb = _job_with_tensorboard(tmp_path, alice)
    secret = tmp_path / "outside.yaml"
    secret.write_text("password: hunter2\n")
    (tb / "config.yaml").symlink_to(secret)
    assert resolved_config.resolved_config(job) is None


@pytest.mark.django_db
def test_a_run_folder_below_the_directory_is_found_newest_first(tmp_path, alice):
    import os

    from jobs.observe import resolved_config

    job, tb = _job_with_tensorboard(tmp_path, alice)
    for i, run in enumerate(("20260101-0900", "20260102-0900")):
        folder = tb / run / "tensorboard"
        folder.mkdir(parents=True)
        (folder / "events.out.tfevents.1.host").write_bytes(b"")
        (folder / "config.yaml").write_text(f"run: {run}\n")
        os.utime(folder / "config.yaml", (1_700_000_000 + i, 1_700_000_000 + i))
    (tb / "stray").mkdir()
    (tb / "stray" / "config.yaml").write_text("not: a run\n")  # no event files beside it
    found = resolved_config.resolved_config(job)
    assert found.path == "/data/tb/20260102-0900/tensorboard/config.yaml" and found.text == "run: 20260102-0900\n"


def test_the_scan_sent_into_a_worker_answers_as_the_console_reads_it(tmp_path):
    """The script a Kubernetes Header runs (the module's own source, standard library only) finds the same file
    as the console's host-side call; garbled or foreign output is no result, and "nothing found" is one."""
    import subprocess
    import sys

    from jobs.observe import config_scan

    run = tmp_path / "tb" / "2026-12-06"
    run.mkdir(parents=True)
    (run / "events.out.tfevents.1.host").write_bytes(b"")
    (run / "config.yaml").write_text("runner:\n  max_steps: 7\n", encoding="utf-8")
    script = open(config_scan.__file__, encoding="utf-8").read()
    out = subprocess.run(
        [sys.executable, "-I", "-c", script, str(tmp_path / "tb")], capture_output=True, text=True, timeout=60
    ).stdout
    answer = config_scan.decode("\x1b[0m" + out)
    assert answer == {"config": config_scan.find(str(tmp_path / "tb"))}
    assert answer["config"]["rel"] == "2026-12-06/config.yaml" and answer["config"]["size"] == 23
    empty = subprocess.run(
        [sys.executable, "-I", "-c", script, str(tmp_path / "none")], capture_output=True, text=True, timeout=60
    ).stdout
    assert config_scan.decode(empty) == {"config": None}
    assert config_scan.decode("RLARK-CONFIG not-base64!") is None and config_scan.decode("hello") is None
