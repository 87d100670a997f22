"""Progress at a glance: the Global Step lines RLinf prints become "step 1,200 / 10,000 · 2 h 10 m left" on the
job list, the Overview, the API and ``rlark get``, stored by the status sync from its own log scan.

Unit tests of the parsing and the time left; the sync reading a Header's log (the in-memory runtime, the sync's
real cursor reads); the pages and the API; the list's query count at two fleet sizes.
"""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.contrib.auth import get_user_model
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone
from django.utils.translation import override

from clusters.models import Cluster
from jobs.control import controller
from jobs.models import Job, Phase
from jobs.observe import progress
from jobs.observe.progress import Progress, config_total, eta_text, parse_step, progress_text, text_of
from jobs.observe.sync import sync_job
from rlark_cli.main import main
from tests.fleet_seed import seed_jobs
from tests.jobs.test_cli import env  # noqa: F401 - the fixture
from tests.jobs.test_sync import run_ready, runtimes, submit  # noqa: F401 - the fixture
from tests.spec_fixtures import base_doc

EMBODIED = "│ Global Step:   12/100 │ Progress: ██░░░░░░░░░░░░░░░░░░ │  12.0%\n│ Elapsed: 0:01:10 │ ETA: 0:08:00 │"
TQDM = "Global Step:  10%|█         | 12/120 [00:10<01:30, 1.2it/s]\rGlobal Step:  11%|█         | 13/120 [00:11<01:29"
DEMO = "Global Step: 3/6 | Progress:  50.0% | reward=9.0 | loss=0.1000\n"


# --- parsing and text (unit) ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "text, expected",
    [
        (EMBODIED, (12, 100)),
        (TQDM, (13, 120)),  # a tqdm bar redrawn with \r: the last redraw counts
        (DEMO, (3, 6)),
        ("Global Step 7 | loss=0.5 | reward=0.75\n", (7, None)),
        ("Global Step: 1/10\nGlobal Step: 2/10\nsome other line\n", (2, 10)),
        ("Global Step: 5/0\n", (5, None)),  # a total of 0 is no total
        ("Global Step: 9/4\n", (9, None)),  # nor one below the step
        ("Global Step: 2/10\n== Global Step ==\n", (2, 10)),  # a heading without a number: the line before
        ("Global Step: 99999999999999/10\n", None),  # past 10**12: not a step
        ("Global Step:   0%|          | 0/? [00:00<?, ?it/s]", None),
        ("no progress here\n", None),
    ],
)
def test_the_last_global_step_line_gives_step_and_total(text, expected):
    assert parse_step(text) == expected


def test_fold_step_keeps_the_stored_step_when_nothing_new_was_printed():
    signals = progress.fold_step({"rayReady": True}, DEMO)
    assert signals["step"] == [3, 6]
    assert progress.fold_step(signals, "an unrelated line\n")["step"] == [3, 6]


def test_the_total_comes_from_runner_max_steps_when_the_line_has_none():
    assert config_total("runner:\n  max_steps: 10000\n  max_epochs: 3\n") == 10000
    assert config_total("runner:\n  max_steps: '500'\n") == 500
    assert config_total("runner:\n  max_steps: -1\n  max_epochs: 5\n") is None  # steps follow the data
    assert config_total("runner: [1, 2]\n") is None
    assert config_total("runner: {max_steps: true}\n") is None
    assert config_total("not: [valid\n") is None
    assert config_total("") is None


def test_text_with_a_total_and_a_rate_gives_the_time_left_in_both_languages():
    p = Progress(step=1200, total=10000, rate=8800 / 130, eta_seconds=130 * 60, updated_at=None)
    with override("en"):
        assert text_of(p) == "step 1,200 / 10,000 · 2 h 10 m left"
    with override("zh-hans"):
        assert text_of(p) == "第 1,200 / 10,000 步 · 剩余 2 小时 10 分"


def test_without_a_total_the_step_and_its_rate_only_never_an_eta():
    p = Progress(step=1200, total=None, rate=3.14, eta_seconds=None, updated_at=None)
    with override("en"):
        assert text_of(p) == "step 1,200 · 3.1 steps/min"
    with override("zh-hans"):
        assert text_of(p) == "第 1,200 步 · 3.1 步/分钟"
    with override("en"):
        assert text_of(Progress(5, None, None, None, None)) == "step 5"
        assert text_of(Progress(5, None, 0.25, None, None)) == "step 5 · 0.25 steps/min"
        assert text_of(Progress(5, None, 0.25, None, None, running=False)) == "step 5"  # stopped: no rate


@pytest.mark.parametrize(
    "seconds, en, zh",
    [
        (30, "under 1 m", "不到 1 分"),
        (91, "2 m", "2 分"),
        (7800, "2 h 10 m", "2 小时 10 分"),
        (98 * 3600, "4 d 2 h", "4 天 2 小时"),
    ],
)
def test_time_left(seconds, en, zh):
    with override("en"):
        assert eta_text(seconds) == en
    with override("zh-hans"):
        assert eta_text(seconds) == zh


def test_eta_only_while_running_with_a_total_and_a_rate():
    job = Job(name="x", phase=Phase.RUNNING, progress_step=100, progress_total=400, progress_rate=10.0)
    assert progress.progress_of(job).eta_seconds == 30 * 60
    job.phase = Phase.SUCCEEDED
    assert progress.progress_of(job).eta_seconds is None  # finished: nothing is left to wait for
    job.phase, job.progress_total = Phase.RUNNING, None
    assert progress.progress_of(job).eta_seconds is None
    job.progress_total, job.progress_step = 400, 400
    assert progress.progress_of(job).eta_seconds is None
    assert progress.progress_of(Job(name="y")) is None and progress_text(Job(name="y")) == ""


# --- the sync stores it from its log scan ---------------------------------------------------------------------


def _age_progress(job: Job, minutes: float) -> None:
    """As if the stored step had been seen ``minutes`` ago (the sync measures the rate between two steps)."""
    then = timezone.now() - timedelta(minutes=minutes)
    Job.objects.filter(pk=job.pk).update(progress_updated_at=then, progress_base_at=then)


@pytest.mark.django_db
def test_the_sync_stores_step_total_and_rate_from_the_header_log(runtimes, alice):  # noqa: F811
    fake = runtimes["alpha"]
    job = run_ready(fake, submit(alice))
    assert job.phase == Phase.RUNNING and job.progress_step is None
    fake.log("demo-header-0", "Global Step: 100/1000 | Progress:  10.0% | reward=1.0")
    job = _resync(job)
    assert (job.progress_step, job.progress_total, job.progress_rate) == (100, 1000, None)
    assert job.progress_updated_at is not None
    with override("en"):
        assert progress_text(job) == "step 100 / 1,000"  # one step seen: no rate, so no time left yet
    _age_progress(job, 10)
    fake.log("demo-header-0", "Global Step: 150/1000 | Progress:  15.0%", "Global Step: 200/1000 | Progress: 20.0%")
    job = _resync(job)
    assert job.progress_step == 200
    assert job.progress_rate == pytest.approx(10.0, rel=0.01)  # 100 steps in 10 minutes
    with override("en"):
        assert progress_text(job) == "step 200 / 1,000 · 1 h 20 m left"
    with override("zh-hans"):
        assert progress_text(job) == "第 200 / 1,000 步 · 剩余 1 小时 20 分"
    before = job.progress_updated_at
    fake.log("demo-header-0", "[INFO] saving a checkpoint")  # the log grew, no new step: nothing moves
    job = _resync(job)
    assert (job.progress_step, job.progress_updated_at) == (200, before)


@pytest.mark.django_db
def test_a_line_without_a_total_takes_runner_max_steps_of_the_attached_config(runtimes, alice):  # noqa: F811
    fake = runtimes["alpha"]
    job = run_ready(fake, submit(alice))
    Job.objects.filter(pk=job.pk).update(rlinf_config="runner:\n  max_steps: 10000\n")
    fake.log("demo-header-0", "Global Step 1200 | loss=0.1")
    job = _resync(job)
    assert (job.progress_step, job.progress_total) == (1200, 10000)


@pytest.mark.django_db
def test_without_any_total_the_list_shows_the_step_and_its_rate(runtimes, alice, client):  # noqa: F811
    fake = runtimes["alpha"]
    job = run_ready(fake, submit(alice))
    fake.log("demo-header-0", "Global Step 10 | loss=0.1")
    _age_progress(_resync(job), 2)
    fake.log("demo-header-0", "Global Step 16 | loss=0.1")
    job = _resync(job)
    assert job.progress_total is None and job.progress_rate == pytest.approx(3.0, rel=0.01)
    client.force_login(alice)
    page = client.get("/jobs/", HTTP_ACCEPT_LANGUAGE="en").content.decode()
    assert "step 16 · 3.0 steps/min" in page and "left" not in page


@pytest.mark.django_db
def test_two_syncs_close_together_move_the_step_but_never_give_a_burst_rate(runtimes, alice):  # noqa: F811
    fake = runtimes["alpha"]
    job = run_ready(fake, submit(alice))
    fake.log("demo-header-0", "Global Step: 10/100")
    _age_progress(_resync(job), 2)
    fake.log("demo-header-0", "Global Step: 20/100")
    job = _resync(job)
    assert job.progress_rate == pytest.approx(5.0, rel=0.01)  # 10 steps in 2 minutes
    fake.log("demo-header-0", "Global Step: 21/100")  # read again at once: a window of milliseconds
    job = _resync(job)
    assert (job.progress_step, job.progress_rate) == (21, pytest.approx(5.0, rel=0.01))
    Job.objects.filter(pk=job.pk).update(progress_base_at=timezone.now() - timedelta(minutes=1))
    fake.log("demo-header-0", "Global Step: 30/100")
    job = _resync(job)  # measured from step 20 a minute ago: 10 a minute, averaged with 5
    assert job.progress_rate == pytest.approx(7.5, rel=0.01)


@pytest.mark.django_db
def test_a_new_run_counting_from_the_start_again_drops_the_old_rate(runtimes, alice):  # noqa: F811
    fake = runtimes["alpha"]
    job = run_ready(fake, submit(alice))
    fake.log("demo-header-0", "Global Step: 50/100")
    _age_progress(_resync(job), 5)
    fake.log("demo-header-0", "Global Step: 60/100")
    job = _resync(job)
    assert job.progress_rate is not None
    _age_progress(job, 1)
    fake.log("demo-header-0", "Global Step: 1/100")
    job = _resync(job)
    assert (job.progress_step, job.progress_rate) == (1, None)


def _resync(job: Job) -> Job:
    sync_job(job)
    job.refresh_from_db()
    return job


# --- pages, API, query counts ---------------------------------------------------------------------------------


@pytest.fixture
def fleet(django_user_model):
    users = get_user_model()
    owner = users.objects.create(username="owner", password="!")
    staff = users.objects.create(username="ops", password="!", is_staff=True, is_superuser=True)
    cluster = Cluster.objects.create(name="alpha", runtime="local", namespace="rlark", status="online")
    state = {"seeded": 0}

    def grow(size: int) -> None:
        jobs = seed_jobs(size - state["seeded"], [owner], cluster, start=state["seeded"])
        for i, job in enumerate(jobs):
            job.progress_step, job.progress_total, job.progress_rate = 1200 + i, 10000 if i % 2 else None, 3.1
            job.progress_updated_at = timezone.now()
        Job.objects.bulk_update(jobs, ["progress_step", "progress_total", "progress_rate", "progress_updated_at"])
        state["seeded"] = size

    return grow, staff


@pytest.mark.django_db
def test_the_list_and_the_api_show_progress_with_as_many_queries_at_any_size(client, fleet, django_assert_num_queries):
    grow, staff = fleet
    client.force_login(staff)
    counts = {}
    for size in (20, 400):
        grow(size)
        for url in ("/jobs/?size=50", "/api/v1/jobs/?limit=50", "/"):
            with django_assert_num_queries(counts.setdefault(url, _count(client, url))):
                response = client.get(url, HTTP_ACCEPT_LANGUAGE="en")
            assert response.status_code == 200
    page = client.get("/jobs/?size=50", HTTP_ACCEPT_LANGUAGE="en").content.decode()
    assert "step 1," in page and "steps/min" in page
    newest = client.get("/api/v1/jobs/?limit=1", HTTP_ACCEPT_LANGUAGE="zh-hans").json()["results"][0]
    running = Job.objects.get(name=newest["name"])
    assert newest["progress"]["step"] == running.progress_step
    assert newest["progress"]["total"] == running.progress_total
    assert newest["progress"]["ratePerMinute"] == 3.1
    assert newest["progress"]["text"].startswith(f"第 {running.progress_step:,}")


def _count(client, url: str) -> int:
    with CaptureQueriesContext(connection) as ctx:
        client.get(url, HTTP_ACCEPT_LANGUAGE="en")
    return len(ctx.captured_queries)


@pytest.mark.django_db
def test_a_job_without_steps_has_a_null_progress_in_the_api(client, fleet):
    grow, staff = fleet
    grow(1)
    Job.objects.update(progress_step=None)
    client.force_login(staff)
    assert client.get("/api/v1/jobs/").json()["results"][0]["progress"] is None


@pytest.mark.django_db
def test_a_restart_starts_the_progress_over(runtimes, alice):  # noqa: F811
    fake = runtimes["alpha"]
    job = run_ready(fake, submit(alice))
    fake.log("demo-header-0", "Global Step: 50/100")
    job = _resync(job)
    assert job.progress_step == 50
    controller.restart(job)
    job.refresh_from_db()
    assert (job.progress_step, job.progress_total, job.progress_rate, job.progress_updated_at) == (None,) * 4
    assert progress_text(job) == ""


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize(
    "lang, timed, untimed",
    [("en", "step 200 / 1,000 · 1 h 20 m left", "step 16 · 3.0 steps/min"), ("zh", "第 200 / 1,000 步", "第 16 步")],
)
def test_rlark_get_and_describe_show_the_progress(env, capsys, alice, lang, timed, untimed):  # noqa: F811
    spec = base_doc()
    Job.objects.create(
        name="timed",
        owner=alice,
        spec=spec,
        phase=Phase.RUNNING,
        progress_step=200,
        progress_total=1000,
        progress_rate=10.0,
        progress_updated_at=timezone.now(),
    )
    Job.objects.create(
        name="untimed",
        owner=alice,
        spec=spec,
        phase=Phase.RUNNING,
        progress_step=16,
        progress_rate=3.0,
        progress_updated_at=timezone.now(),
    )
    Job.objects.create(name="fresh", owner=alice, spec=spec)
    assert main(["get", "jobs", "--lang", lang]) == 0
    lines = {line.split()[0]: line for line in capsys.readouterr().out.splitlines()}
    assert "PROGRESS" in lines["NAME"]
    assert timed in lines["timed"] and untimed in lines["untimed"]
    assert lines["fresh"].split()[3] == "-"  # no step yet
    assert main(["describe", "job", "timed", "--lang", lang]) == 0
    assert f"Progress:     {timed}" in capsys.readouterr().out


def test_a_log_full_of_mentions_without_numbers_is_looked_at_a_bounded_number_of_times():
    text = "Global Step: 7/9\n" + "== Global Step ==\n" * 100_000
    assert parse_step(text) is None  # the last 64 mentions have no number: no step is made up
    assert parse_step("Global Step: 7/9\n" + "== Global Step ==\n" * 10) == (7, 9)
