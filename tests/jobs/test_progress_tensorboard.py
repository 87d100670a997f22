"""Progress from TensorBoard scalars when a job's logs show no ``Global Step`` line.

Real event files written with tensorboard's own writer (``EventFileWriter`` + ``Event``/``Summary`` protos): the
step is the ``global_step`` scalar (else the highest event step); more events move it on the next look, reading
only the new bytes; a half-written or corrupt file does not break; through the status sync (in-memory runtime,
the Header's ``tensorBoardDir`` on a hostPath) the job list and the API show it, and a log line wins.
"""

from __future__ import annotations

import os

import pytest
from django.utils.translation import override
from tensorboard.compat.proto.event_pb2 import Event
from tensorboard.compat.proto.summary_pb2 import Summary
from tensorboard.summary.writer.event_file_writer import EventFileWriter

from jobs.models import Job, Phase
from jobs.observe import progress_tensorboard as tbp
from jobs.observe.progress import progress_text
from tests.fake_runtime import job_document
from tests.jobs.test_sync import HEAD_READY, resync, runtimes  # noqa: F401 - the fixture


def scalars(writer: EventFileWriter, step: int, **values: float) -> None:
    """One event per tag at ``step`` (``train__global_step`` -> tag ``train/global_step``), flushed to disk."""
    for name, value in values.items():
        tag = name.replace("__", "/")
        writer.add_event(Event(step=step, summary=Summary(value=[Summary.Value(tag=tag, simple_value=value)])))
    writer.flush()


def only_file(directory) -> str:
    (name,) = [n for n in os.listdir(directory) if "tfevents" in n]
    return os.path.join(directory, name)


@pytest.fixture(autouse=True)
def _fresh():
    tbp.forget()
    yield
    tbp.forget()


def look(directory, state: tbp.JobState | None = None) -> tbp.JobState:
    state = state or tbp.JobState(str(directory))
    tbp.read_on(state)
    return state


def test_the_global_step_scalar_gives_the_step(tmp_path):
    writer = EventFileWriter(str(tmp_path))
    for step in range(1, 6):  # RLinf logs with step=global_step; the scalar says which step it is
        scalars(writer, step * 10, train__loss=0.5, train__global_step=step)
    assert tbp.step_of(look(tmp_path)) == 5


def test_without_a_global_step_scalar_the_highest_event_step_counts(tmp_path):
    writer = EventFileWriter(str(tmp_path / "run1"))
    scalars(writer, 7, env__success_once=0.1)
    scalars(writer, 3, env__success_once=0.0)
    assert tbp.step_of(look(tmp_path)) == 7


def test_appended_events_move_the_step_and_only_new_bytes_are_parsed(tmp_path):
    writer = EventFileWriter(str(tmp_path))
    scalars(writer, 1, train__global_step=1)
    state = look(tmp_path)
    path = only_file(tmp_path)
    size = os.path.getsize(path)
    assert tbp.step_of(state) == 1 and state.bytes_read == size
    scalars(writer, 2, train__global_step=2, train__loss=0.3)
    state = look(tmp_path, state)
    assert tbp.step_of(state) == 2
    assert state.bytes_read == os.path.getsize(path) - size  # the first events were not parsed again
    state = look(tmp_path, state)
    assert state.bytes_read == 0 and tbp.step_of(state) == 2


def test_a_half_written_record_waits_and_a_corrupt_file_is_ignored(tmp_path):
    source = tmp_path / "source"
    writer = EventFileWriter(str(source))
    scalars(writer, 1, train__global_step=1)
    first = open(only_file(source), "rb").read()  # the file's version record and step 1
    scalars(writer, 2, train__global_step=2)
    data = open(only_file(source), "rb").read()
    logs = tmp_path / "logs"
    logs.mkdir()
    half = logs / "events.out.tfevents.1.host"
    half.write_bytes(data[:-7])  # the last record is not complete yet
    (logs / "events.out.tfevents.0.garbage").write_bytes(os.urandom(300))
    state = look(logs)
    assert tbp.step_of(state) == 1
    half.write_bytes(data)  # the writer finished the record
    assert tbp.step_of(look(logs, state)) == 2
    half.write_bytes(first)  # replaced by a shorter file (a new run in the same place): read from its start
    state = look(logs, state)
    assert tbp.step_of(state) == 1 and state.bytes_read == len(first)


def test_a_look_reads_a_bounded_number_of_bytes(tmp_path, monkeypatch):
    writer = EventFileWriter(str(tmp_path))
    for step in range(1, 200):
        scalars(writer, step, train__global_step=step)
    monkeypatch.setattr(tbp, "MAX_BYTES", 2000)
    state = look(tmp_path)
    first = tbp.step_of(state)
    assert 0 < state.bytes_read <= 2000 and first < 199
    while state.bytes_read:
        state = look(tmp_path, state)
    assert tbp.step_of(state) == 199


def test_a_record_bigger_than_a_look_is_stepped_over(tmp_path, monkeypatch):
    writer = EventFileWriter(str(tmp_path))
    scalars(writer, 1, train__global_step=1)
    big = Summary.Value(tag="images/frame", image=Summary.Image(encoded_image_string=b"x" * 5000))
    writer.add_event(Event(step=2, summary=Summary(value=[big])))
    scalars(writer, 3, train__global_step=3)
    monkeypatch.setattr(tbp, "MAX_BYTES", 2000)
    state = look(tmp_path)
    for _ in range(5):
        state = look(tmp_path, state)
    assert tbp.step_of(state) == 3


# --- through the status sync ------------------------------------------------------------------------------------


def tb_job(owner, data, config: str = "runner:\n  max_steps: 100\n") -> Job:
    from jobs.control import controller

    doc = job_document("demo")
    head = doc["spec"]["tasks"][0]
    head["tensorBoardDir"] = "/data/tb"
    spec = head["kubernetes"]["workload"]["template"]["spec"]
    spec["containers"][0]["volumeMounts"] = [{"name": "data", "mountPath": "/data"}]
    spec["volumes"] = [{"name": "data", "hostPath": {"path": str(data)}}]
    job = Job.objects.create(name="demo", owner=owner, spec=doc, rlinf_config=config)
    controller.request_reconcile(job)
    job.refresh_from_db()
    return job


@pytest.mark.django_db
def test_the_sync_takes_the_step_from_tensorboard_and_the_list_and_api_show_it(runtimes, alice, client, tmp_path):  # noqa: F811
    fake = runtimes["alpha"]
    job = tb_job(alice, tmp_path / "data")
    writer = EventFileWriter(str(tmp_path / "data" / "tb" / "20260101-00:00:00"))
    scalars(writer, 12, train__global_step=12, train__loss=0.2)
    fake.set_running()
    fake.log("demo-header-0", *HEAD_READY)
    job = resync(job)
    assert job.phase == Phase.RUNNING
    assert (job.progress_step, job.progress_total) == (12, 100)  # total: runner.max_steps of the config
    with override("en"):
        assert progress_text(job) == "step 12 / 100"
    client.force_login(alice)
    assert "step 12 / 100" in client.get("/jobs/", HTTP_ACCEPT_LANGUAGE="en").content.decode()
    assert "第 12 / 100 步" in client.get("/jobs/", HTTP_ACCEPT_LANGUAGE="zh-hans").content.decode()
    api = client.get("/api/v1/jobs/demo/", HTTP_ACCEPT_LANGUAGE="en").json()["progress"]
    assert (api["step"], api["total"], api["text"]) == (12, 100, "step 12 / 100")

    scalars(writer, 20, train__global_step=20)
    assert resync(job).progress_step == 12  # looked at again only after READ_INTERVAL seconds
    tbp.forget(job.pk)  # as if READ_INTERVAL passed (the offsets are read again from the start)
    assert resync(job).progress_step == 20

    fake.log("demo-header-0", "Global Step: 5/10 | Progress:  50.0%")  # a log line wins over the scalars
    job = resync(job)
    assert (job.progress_step, job.progress_total) == (5, 10)
    scalars(writer, 30, train__global_step=30)
    tbp.forget(job.pk)
    assert resync(job).progress_step == 5


@pytest.mark.django_db
def test_without_a_readable_tensorboard_dir_there_is_no_progress(runtimes, alice, tmp_path):  # noqa: F811
    fake = runtimes["alpha"]
    job = tb_job(alice, tmp_path / "absent")
    fake.set_running()
    fake.log("demo-header-0", *HEAD_READY)
    job = resync(job)
    assert job.phase == Phase.RUNNING and job.progress_step is None


def test_the_interval_between_two_looks(tmp_path):
    """``seen_step`` looks at a job's files at most every READ_INTERVAL seconds (the clock is given)."""

    class Head:
        pk, head = 1, True

        class cluster:  # noqa: N801
            runtime = "local"

    class FakeJob:
        pk, phase, stopped = 99, "Running", False
        spec_section = {
            "tasks": [
                {
                    "head": True,
                    "tensorBoardDir": "/data",
                    "kubernetes": {
                        "workload": {
                            "template": {
                                "spec": {
                                    "containers": [
                                        {"name": "main", "volumeMounts": [{"name": "d", "mountPath": "/data"}]}
                                    ],
                                    "volumes": [{"name": "d", "hostPath": {"path": str(tmp_path)}}],
                                }
                            }
                        }
                    },
                }
            ]
        }

    writer = EventFileWriter(str(tmp_path))
    scalars(writer, 1, train__global_step=1)
    now = [1000.0]
    assert tbp.seen_step(FakeJob, [Head], {}, clock=lambda: now[0]) == [1, None]
    scalars(writer, 2, train__global_step=2)
    now[0] += tbp.READ_INTERVAL - 1
    assert tbp.seen_step(FakeJob, [Head], {}, clock=lambda: now[0]) == [1, None]
    now[0] += 1
    assert tbp.seen_step(FakeJob, [Head], {}, clock=lambda: now[0]) == [2, None]
