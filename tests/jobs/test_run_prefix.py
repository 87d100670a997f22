"""Per-run output prefix (seed 02-confirm-job-running.txt, check 5): two runs share one host folder, the Metrics
tab and the Run check of the current run read only ``$RLARK_RUN_ID``'s files, and the demo job writes under
that prefix."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from jobs.explain.runcheck import _run_output
from jobs.jobspec.layout import main_container
from jobs.jobspec.manifests import injected_env
from jobs.models import Pod
from jobs.observe import metrics as metrics_service
from jobs.observe.run_prefix import run_path, uses_run_id
from tests.jobs.test_metrics import ReportingRuntime, job, use_runtime  # noqa: F401 - the fixture

pytestmark = pytest.mark.django_db

CURRENT, OTHER = "1111aaaa-run", "2222bbbb-run"


def _write_run(root: Path, run_id: str, tag: str, steps: int) -> None:
    from tensorboardX import SummaryWriter

    writer = SummaryWriter(logdir=str(root / run_id / "tensorboard"))
    for step in range(1, steps + 1):
        writer.add_scalar(tag, float(step), step)
    writer.close()
    (root / run_id / f"global_step_{steps}").mkdir()
    (root / run_id / f"global_step_{steps}" / "model.pt").write_bytes(b"x" * steps)


def test_uses_run_id_forms():
    assert uses_run_id("/output/$RLARK_RUN_ID") and uses_run_id("/output/${RLARK_RUN_ID}/ckpt")
    assert not uses_run_id("/output") and not uses_run_id("/output/$RLARK_RUN_IDX")


def test_metrics_and_run_check_read_only_the_current_run(job, monkeypatch):  # noqa: F811
    job, data = job
    use_runtime(monkeypatch, ReportingRuntime(None))
    _write_run(data, OTHER, "other/loss", 7)  # another run (or another job) in the same host folder
    head = job.spec["spec"]["tasks"][0]
    head["tensorBoardDir"] = "/data/$RLARK_RUN_ID"
    job.save(update_fields=["spec"])

    # before the Header Pod has a UID nothing of this run can exist
    Pod.objects.filter(name="job-header-0").update(uid="")
    assert run_path(job, "/data/$RLARK_RUN_ID") is None
    assert metrics_service.tensorboard_source(job).reason == "missing"

    Pod.objects.filter(name="job-header-0").update(uid=CURRENT)
    _write_run(data, CURRENT, "train/loss", 3)
    source = metrics_service.tensorboard_source(job)
    assert source.host_dir == str(data / CURRENT) and source.container_dir == f"/data/{CURRENT}"
    assert set(metrics_service.read_scalars(source.host_dir)) == {"train/loss"}

    out = _run_output(job, "/data/$RLARK_RUN_ID", [head], "local")
    assert out.state == "ok" and out.files == 2  # its event file and its checkpoint, not the other run's
    assert out.sample.startswith(f"/data/{CURRENT}/")


def test_header_gets_its_run_id_and_the_demo_writes_under_it():
    env = injected_env(head=True, template={}, rank_start=0, total_nodes=3, head_task="h", domain="", ssh_keys=[])
    run_id = next(e for e in env if e["name"] == "RLARK_RUN_ID")
    assert run_id["valueFrom"]["fieldRef"]["fieldPath"] == "metadata.uid"
    demo = yaml.safe_load(Path("examples/demo/job.yaml").read_text())
    header = demo["spec"]["tasks"][0]
    assert header["tensorBoardDir"] == "/output/$RLARK_RUN_ID"
    assert '--run-name "$RLARK_RUN_ID"' in header["runScript"]
    assert any(m["mountPath"] == "/output" for m in main_container(header)["volumeMounts"])
