"""Scenarios on the real local runtime (supervisor + wrapper scripts + real Ray): the demo job (examples/demo) runs
to Succeeded and its run check shows five met checks with evidence, its metrics are the runtime's own readings and
its TensorBoard scalars are read from the files the workload wrote; a run script exiting 3 fails the job naming the
header, and diagnosis names the failure."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
import yaml

from clusters.models import Cluster
from clusters.runtime import registry
from clusters.services.inventory import upsert_local_nodes
from jobs.control import controller
from jobs.explain import diagnosis, runcheck
from jobs.models import Job, MetricSample, Pod
from jobs.observe import metrics
from jobs.observe.status import get_condition
from jobs.observe.sync import sync_job
from launcher.management.commands.seed_demo import DEMO_NODES
from tests.clusters.test_local_runtime_support import SupervisorProcess

pytestmark = [pytest.mark.ray, pytest.mark.django_db(transaction=True), pytest.mark.timeout(900)]

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def local(settings, tmp_path):
    settings.CELERY_TASK_ALWAYS_EAGER = True
    settings.VAR_DIR = tmp_path / "var"
    settings.RLARK_LOCAL_ROOT = tmp_path / "local"
    sup = SupervisorProcess(settings.RLARK_LOCAL_ROOT).start()
    cluster = Cluster.objects.create(
        name="local", runtime="local", status="online", allow_host_path=True, host_path_roots="/tmp"
    )
    upsert_local_nodes(cluster, DEMO_NODES)
    yield tmp_path
    for job in Job.objects.all():
        try:
            controller.delete(job)
        except Exception:  # noqa: BLE001 - best effort; the supervisor stop below kills every Worker anyway
            pass
    sup.stop()


def demo_document(output: Path, run_script: str | None = None, rollouts: int = 2) -> dict:
    doc = yaml.safe_load((ROOT / "examples/demo/job.yaml").read_text())
    head, rollout = doc["spec"]["tasks"]
    head["kubernetes"]["workload"]["template"]["spec"]["volumes"][0]["hostPath"]["path"] = str(output)
    head["runScript"] = run_script or (
        "python -u /rlark/examples/demo/train.py --config /rlark/examples/demo/demo.yaml --output /output "
        '--run-name "$RLARK_RUN_ID" --steps 3 --save-interval 1 --step-interval 0.2 --episodes 1'
    )
    rollout["kubernetes"]["workload"]["replicas"] = rollouts
    if not rollouts:
        doc["spec"]["tasks"] = [head]
    return doc


def run_until(job: Job, predicate, timeout: float, what: str) -> Job:
    deadline = time.monotonic() + timeout
    while True:
        sync_job(job)
        job.refresh_from_db()
        if predicate(job):
            return job
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}; phase {job.phase}: {job.message}")
        time.sleep(2)


def explain(job: Job) -> str:
    """The job's message and the last lines of every Worker's log (for a failing assertion)."""
    out = [f"{job.phase}: {job.message}"]
    for w in diagnosis.worker_inputs(job):
        lines = str(w.log).splitlines()
        out.append(f"--- {w.pod} ({len(lines)} lines)\n" + "\n".join(lines[-25:]))
    return "\n".join(out)


class Spy:
    """Records what the real runtime's ``pod_metrics`` returned (the runtime is not replaced)."""

    def __init__(self, runtime):
        self.runtime = runtime
        self.returned = []

    def __getattr__(self, name):
        return getattr(self.runtime, name)

    def pod_metrics(self, namespace, job):
        value = self.runtime.pod_metrics(namespace, job)
        self.returned.append(value)
        return value


def test_demo_job_succeeds_with_five_met_checks_and_real_metrics(local, admin_user, monkeypatch):
    output = local / "out"
    doc = demo_document(output)
    job = Job.objects.create(
        name="cartpole-demo",
        owner=admin_user,
        spec=doc,
        rlinf_config=(ROOT / "examples/demo/demo.yaml").read_text(),
        run_check={"output_path": "/output/$RLARK_RUN_ID/checkpoints", "max_wait_minutes": 10},
    )
    controller.request_reconcile(job)
    job = run_until(job, lambda j: j.phase in ("Running", "Failed"), 300, "Running")
    assert job.phase == "Running", explain(job)

    # The status sync already stored samples; then one more sample: exactly what the local runtime reported.
    assert MetricSample.objects.filter(job=job, pod_name="cartpole-demo-header-0").exists()
    real = registry.runtime_for
    spies = []

    def spying(cluster):
        spies.append(Spy(real(cluster)))
        return spies[-1]

    monkeypatch.setattr(registry, "runtime_for", spying)
    assert metrics.sample_job(job)
    monkeypatch.setattr(registry, "runtime_for", real)
    reported = {k: v for spy in spies for r in spy.returned if r for k, v in r.items()}
    assert set(reported) == {"cartpole-demo-header-0", "cartpole-demo-rollout-0", "cartpole-demo-rollout-1"}
    rows = {w.pod: w for w in metrics.worker_metrics(job)}
    for pod, values in reported.items():
        assert rows[pod].cpu == pytest.approx(values["cpu"])
        assert rows[pod].memory == int(values["memory"]) and rows[pod].memory > 0

    job = run_until(job, lambda j: j.phase in ("Succeeded", "Failed"), 600, "the run script to end")
    assert job.phase == "Succeeded", explain(job)
    assert get_condition(job.conditions, "Succeeded")["status"] == "True"

    results = runcheck.job_run_check(job, "en")
    assert [r.status for r in results] == [runcheck.MET] * 5, [(r.number, r.evidence) for r in results]
    evidence = {r.number: "\n".join(r.evidence) for r in results}
    assert "3 actual Pods in total; RLinf cluster.num_nodes = 3." in evidence[2]
    assert "Header node check: Cluster is ready: 3 nodes available (required: 3)." in evidence[3]
    assert "RLinf is running on a cluster with 3 nodes" in evidence[4]
    assert "Global Step: 1/3" in evidence[5] and "global_step_" in evidence[5]

    diag = diagnosis.diagnose_job(job)
    assert diag.findings == [] and not diag.multi_head
    head = next(w for w in diag.workers if w.worker.head)
    assert head.last_stage_key == "run_exit" and head.scan.last("run_exit").values["code"] == "0"

    tb = metrics.job_metrics(job, sample=False)["tensorboard"]
    assert tb["readable"] and tb["charts"]
    run_id = Pod.objects.get(name="cartpole-demo-header-0").uid  # RLARK_RUN_ID: the run's own prefix (14.2)
    assert run_id and [p.name for p in output.iterdir()] == [run_id]
    assert tb["dir"] == f"/output/{run_id}" and f"/output/{run_id}/checkpoints/" in evidence[5]
    md = runcheck.markdown_record(job, results, recorder="root")
    assert md.count("| 符合预期 |") == 5


def test_run_script_exit_3_fails_naming_the_header(local, admin_user):
    doc = demo_document(local / "out", run_script="echo working; exit 3", rollouts=0)
    job = Job.objects.create(name="fails", owner=admin_user, spec=doc)
    controller.request_reconcile(job)
    job = run_until(job, lambda j: j.phase in ("Succeeded", "Failed"), 300, "the run script to end")
    assert job.phase == "Failed"
    assert "fails-header-0" in job.message
    diag = diagnosis.diagnose_job(job)
    (finding,) = [f for f in diag.findings if f.code == "run_script_failed"]
    assert finding.pod == "fails-header-0" and finding.detail("en") == "Exit code 3."
    results = runcheck.job_run_check(job, "en")
    assert results[4].status == runcheck.NOT_MET  # no progress signal, and the job has ended
