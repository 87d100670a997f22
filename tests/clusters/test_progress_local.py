"""Progress at a glance on the real local runtime (supervisor + wrapper scripts + real Ray): the demo job's
``Global Step: k/N`` lines reach the Job through the status sync's own log reads, and the job list, the Overview
and the API show "step k / N" with its time left while it runs, then the last step once it succeeded."""

from __future__ import annotations

import pytest
from django.utils.translation import override

from jobs.control import controller
from jobs.models import Job, Pod
from jobs.observe.progress import progress_text
from tests.clusters.test_runcheck_local import ROOT, demo_document, explain, local, run_until  # noqa: F401

pytestmark = [pytest.mark.ray, pytest.mark.django_db(transaction=True), pytest.mark.timeout(900)]

STEPS = 12
RUN = (
    "python -u /rlark/examples/demo/train.py --config /rlark/examples/demo/demo.yaml --output /output "
    f'--run-name "$RLARK_RUN_ID" --steps {STEPS} --save-interval 100 --step-interval 1 --episodes 1'
)


def test_the_demo_jobs_progress_appears_while_it_runs_and_stays_at_its_last_step(local, admin_user, client):  # noqa: F811
    job = Job.objects.create(
        name="progress-demo",
        owner=admin_user,
        spec=demo_document(local / "out", run_script=RUN, rollouts=2),  # demo.yaml: cluster.num_nodes 3
        rlinf_config=(ROOT / "examples/demo/demo.yaml").read_text(),
    )
    controller.request_reconcile(job)
    job = run_until(job, lambda j: j.progress_step or j.phase == "Failed", 300, "a first Global Step")
    assert job.phase == "Running", explain(job)
    assert job.progress_total == STEPS  # the line's own total (--steps), not runner.max_steps: 60 of the config
    first = job.progress_step
    job = run_until(
        job, lambda j: (j.progress_rate and j.progress_step > first) or j.phase != "Running", 120, "a second step"
    )
    assert job.phase == "Running" and job.progress_step < STEPS, explain(job)
    # about one step a second (--step-interval 1), measured between two syncs: between 10 and 120 a minute
    assert 10 <= job.progress_rate <= 120, job.progress_rate
    client.force_login(admin_user)
    with override("en"):
        shown = progress_text(job)
    assert shown.startswith(f"step {job.progress_step} / {STEPS} · ") and shown.endswith(" left"), shown
    page = client.get("/jobs/", HTTP_ACCEPT_LANGUAGE="en").content.decode()
    assert f"step {job.progress_step} / {STEPS}" in page
    overview = client.get("/", HTTP_ACCEPT_LANGUAGE="zh-hans").content.decode()
    assert f"第 {job.progress_step} / {STEPS} 步" in overview
    api = client.get("/api/v1/jobs/progress-demo/").json()["progress"]
    assert api["step"] == job.progress_step and api["total"] == STEPS and api["etaSeconds"] > 0

    job = run_until(job, lambda j: j.phase in ("Succeeded", "Failed"), 300, "the end of the run")
    assert job.phase == "Succeeded", explain(job)
    assert job.progress_step == STEPS
    with override("en"):
        assert progress_text(job) == f"step {STEPS} / {STEPS}"  # finished: no time left shown


QUIET = RUN.replace("--save-interval 100", "--save-interval 1") + ' | grep --line-buffered -v "Global Step"'


def test_without_global_step_lines_the_step_comes_from_the_runs_tensorboard_files(local, admin_user, client):  # noqa: F811
    """The same demo with its ``Global Step`` lines filtered out of the log: the status sync reads the step from
    the event files it writes (flushed every step, ``--save-interval 1``) under ``tensorBoardDir``
    (``/output/$RLARK_RUN_ID``, a hostPath); the total is ``runner.max_steps`` of the attached config (60)."""
    job = Job.objects.create(
        name="progress-tb",
        owner=admin_user,
        spec=demo_document(local / "out", run_script=QUIET, rollouts=2),
        rlinf_config=(ROOT / "examples/demo/demo.yaml").read_text(),
    )
    controller.request_reconcile(job)
    job = run_until(job, lambda j: j.progress_step or j.phase in ("Failed", "Succeeded"), 300, "a step from events")
    assert job.progress_step and 1 <= job.progress_step <= STEPS, explain(job)
    assert job.progress_total == 60
    assert not any((p.container_state.get("signals") or {}).get("step") for p in Pod.objects.filter(task__job=job))
    client.force_login(admin_user)
    page = client.get("/jobs/", HTTP_ACCEPT_LANGUAGE="en").content.decode()
    assert f"step {job.progress_step} / 60" in page
