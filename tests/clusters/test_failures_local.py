"""Real failures on the local runtime (supervisor, wrapper scripts, real Ray): each job fails, and its Diagnosis names
the failing Worker, its last completed stage, its exit code, its first error (never an INFO line) and the last
lines before the exit, with a link to the full log; the page never says that no known error was found.

Seed 05-troubleshooting-jobs-workers: "定位第一条错误，而不是只看最后一行"; "区分失败发生在镜像/挂载、准备脚本、Ray
集群建立，还是 Head Task 的运行命令".
"""

from __future__ import annotations

import time

import pytest
from django.test import Client
from rest_framework.test import APIClient

from jobs.control import controller
from jobs.models import Job
from jobs.observe.sync import sync_job
from tests.clusters.test_runcheck_local import demo_document, explain, local  # noqa: F401 - the fixture
from tests.failure_scripts import PREPARE_EXIT_2, TRACEBACK, crash_once

pytestmark = [pytest.mark.ray, pytest.mark.django_db(transaction=True), pytest.mark.timeout(900)]


def scenarios(out) -> dict[str, dict]:
    """Job name -> the job document of one real failure."""
    docs = {}
    doc = demo_document(out / "prep", rollouts=0)
    doc["spec"]["tasks"][0]["prepareScript"] = PREPARE_EXIT_2
    docs["prep"] = doc
    doc = demo_document(out / "noray", rollouts=0)
    doc["spec"]["tasks"][0]["prepareScript"] = "export PATH=/usr/bin:/bin"
    docs["noray"] = doc
    docs["trace"] = demo_document(out / "trace", run_script=TRACEBACK, rollouts=0)
    doc = demo_document(out / "lost", run_script="sleep 600", rollouts=1)
    doc["spec"]["tasks"][1]["prepareScript"] = "export RLARK_HEAD_ADDRESS=head.invalid RLARK_HEAD_WAIT_ATTEMPTS=2"
    docs["lost"] = doc
    doc = demo_document(out / "again", run_script="sleep 300", rollouts=0)
    doc["spec"]["tasks"][0]["prepareScript"] = crash_once("/output")
    docs["again"] = doc
    return docs


def all_ended(jobs: list[Job], timeout: float) -> list[Job]:
    deadline = time.monotonic() + timeout
    while True:
        for job in jobs:
            sync_job(job)
            job.refresh_from_db()
        if all(j.phase in ("Succeeded", "Failed") for j in jobs):
            return jobs
        if time.monotonic() > deadline:
            raise AssertionError("\n\n".join(explain(j) for j in jobs))
        time.sleep(2)


def diagnosis(job: Job, user, lang: str) -> dict:
    api = APIClient()
    api.force_authenticate(user)
    resp = api.get(f"/api/v1/jobs/{job.name}/diagnosis/", HTTP_ACCEPT_LANGUAGE=lang)
    assert resp.status_code == 200, resp.content
    return resp.json()


def test_each_real_failure_is_named_with_its_worker_stage_exit_code_and_first_error(local, admin_user):  # noqa: F811
    jobs = []
    for name, doc in scenarios(local / "out").items():
        job = Job.objects.create(name=name, owner=admin_user, spec=doc)
        controller.request_reconcile(job)
        jobs.append(job)
    lost_job = jobs.pop(3)
    ended = {j.name: j for j in all_ended(jobs, 420)}
    assert all(j.phase == "Failed" for j in ended.values()), {n: (j.phase, j.message) for n, j in ended.items()}
    got = {name: diagnosis(job, admin_user, "en")["failure"] for name, job in ended.items()}
    why = {name: (ended[name].message, f) for name, f in got.items()}

    prep = got["prep"]
    assert prep["pod"] == "prep-header-0" and prep["exitCode"] == 2, why["prep"]
    assert prep["lastStage"] == "prepare" and prep["lastStageLabel"] == "Role prepare script", why["prep"]
    assert prep["firstError"]["line"] == "cat: /data/robot.yaml: No such file or directory", why["prep"]

    noray = got["noray"]
    assert noray["pod"] == "noray-header-0" and noray["exitCode"] == 1, why["noray"]
    assert noray["firstError"]["line"].startswith("Error: Ray CLI is not found."), why["noray"]
    assert noray["tail"][-1].startswith("Error: Ray CLI is not found."), why["noray"]

    trace = got["trace"]
    assert trace["pod"] == "trace-header-0" and trace["exitCode"] == 1 and trace["reason"] == "RunScriptFailed"
    assert trace["lastStage"] == "run_script", why["trace"]
    assert trace["firstError"]["line"] == "Traceback (most recent call last):", why["trace"]
    assert "warm-up request failed" not in ended["trace"].message  # the INFO line is not the job's first error
    assert "JSONDecodeError" in ended["trace"].message, why["trace"]
    assert trace["tail"][-1] == "Run script exited with code 1" and len(trace["tail"]) <= 20
    assert any("JSONDecodeError" in line for line in trace["tail"]), why["trace"]

    # A Ray Worker that cannot reach the head does not end (Ray's raylet keeps asking for the GCS): the job is not
    # Failed, and the Diagnosis names the Worker that waits and the address it waits for.
    sync_job(lost_job)
    lost_job.refresh_from_db()
    assert lost_job.phase != "Failed", lost_job.message
    lost = diagnosis(lost_job, admin_user, "en")
    assert lost["failure"] is None
    (waiting,) = [f for f in lost["findings"] if f["code"] == "head_unreachable"]
    assert waiting["pod"] == "lost-rollout-0", lost["findings"]
    rollout = next(w for w in lost["workers"] if w["pod"] == "lost-rollout-0")
    assert rollout["lastStage"] == "connect" and rollout["headWaitAttempts"] == 2, rollout

    # The first container crashed; whether the sync saw its exit or the restart first, the Diagnosis finds the
    # traceback: in the current log, or (after the restart, the current log clean) in the previous container's.
    again = got["again"]
    assert again["pod"] == "again-header-0", why["again"]
    assert again["source"] == (
        "the previous container's log (the container restarted)" if again["previous"] else "the current container's log"
    ), why["again"]
    assert "RuntimeError: boom in the first container" in "\n".join(again["tail"]), why["again"]
    assert again["firstError"]["line"] == "Traceback (most recent call last):", why["again"]

    zh = diagnosis(ended["prep"], admin_user, "zh-hans")["failure"]
    assert zh["lastStageLabel"] == "角色准备脚本" and zh["source"] == "当前容器的日志"
    client = Client()
    client.force_login(admin_user)
    for lang, absent in (("en", "No known error was found"), ("zh-hans", "未在 Worker 日志和状态中发现已知错误")):
        for name in ended:
            page = client.get(f"/jobs/{name}/diagnosis/", HTTP_ACCEPT_LANGUAGE=lang).content.decode()
            assert 'data-testid="failure"' in page and absent not in page, (name, lang)
            assert f"/jobs/{name}/?tab=logs&amp;pod={got[name]['pod']}" in page
