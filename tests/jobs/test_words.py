"""Words a user reads (issue "Words"): the language menu names each language in its own name; the Task table's
and a Pod's messages follow the page's language (the console's own sentences; Kubernetes' words stay as they are);
a finished Worker has one word in every tab and in the Logs picker; a marker repeated in a row is one line of the
Diagnosis timeline; the bastion, the WebTerminal and ``rlark ssh`` say that a finished job has finished;
``GET /api/v1/ssh/`` (``rlark ssh-config``) lists only the Workers of jobs that run."""

from __future__ import annotations

import html
import os
import re
import subprocess
import sys
from pathlib import Path

import asyncssh
import pytest
from django.utils import translation
from rest_framework.test import APIClient

from accounts.authentication import issue_token
from jobs.explain.diagnosis import WorkerInput, diagnose
from jobs.models import Job, Phase, Pod, Task
from jobs.observe import phases
from jobs.observe.state_words import STATE_WORDS, state_label, state_labels
from jobs.observe.status import localized_message
from jobs.observe.sync import sync_job
from sshgate import access
from sshkeys.services import add_key
from terminal.services import logs, panel
from tests.jobs.test_job_pages import fake, running, submit  # noqa: F401  (fixture)

pytestmark = pytest.mark.django_db

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def terminal_runtime(fake):  # noqa: F811
    """The Logs panel, the WebTerminal and the bastion resolve Workers through this same fake runtime."""
    from terminal.services.runtimes import use_runtime_factory

    use_runtime_factory(lambda cluster: fake)
    yield fake
    use_runtime_factory(None)


def finished(fake, job: Job) -> Job:  # noqa: F811
    """``job`` (running) as it is once its run script exited 0 and its Workers' Pods are gone."""
    fake.log(f"{job.name}-header-0", "Run script exited with code 0")
    fake.terminate(f"{job.name}-header-0", 0)
    sync_job(job)
    job.refresh_from_db()
    assert job.phase == Phase.SUCCEEDED, job.message
    for task in job.tasks.all():
        fake.delete_task(task.namespace, task.name)
    return job


# --- the language menu ------------------------------------------------------------------------------------------


@pytest.mark.parametrize("lang", ["zh-hans", "en"])
def test_language_menu_names_each_language_in_its_own_name(client, alice, lang):
    client.force_login(alice)
    html = client.get("/jobs/", HTTP_ACCEPT_LANGUAGE=lang).content.decode()
    menu = re.search(r'data-testid="language-select">(.*?)</select>', html, re.S).group(1)
    assert re.findall(r"<option [^>]*>([^<]+)</option>", menu) == ["中文", "English"]
    assert "英语" not in html and "Chinese" not in menu


# --- Task and Pod messages --------------------------------------------------------------------------------------


def test_task_and_pod_messages_follow_the_pages_language(client, fake, alice):  # noqa: F811
    job = submit(alice)
    header, rollout = job.tasks.order_by("order")
    waiting = phases.pending_reason(header, [])  # what the sync stores before the Pod exists
    header.message = waiting
    header.save()
    rollout.message = "demo-rollout-0: Unschedulable: 0/3 nodes are available: 3 Insufficient nvidia.com/gpu."
    rollout.save()
    Pod.objects.filter(name="demo-header-0").update(  # as the sync marks a running Worker that was lost
        phase="Failed", reason="PodDeleted", message="the Pod disappeared while the job was running"
    )
    client.force_login(alice)
    zh = client.get(f"/jobs/{job.name}/", HTTP_ACCEPT_LANGUAGE="zh-hans").content.decode()
    messages = re.findall(r'data-testid="task-message">([^<]*)<', zh)
    assert messages[0] == "等待 Pod demo-header-0 被创建"
    assert messages[1] == rollout.message  # Kubernetes' own words stay as they are
    en = client.get(f"/jobs/{job.name}/", HTTP_ACCEPT_LANGUAGE="en").content.decode()
    assert re.findall(r'data-testid="task-message">([^<]*)<', en)[0] == "Waiting for Pod demo-header-0 to be created"
    workers = client.get(f"/jobs/{job.name}/?tab=workers", HTTP_ACCEPT_LANGUAGE="zh-hans").content.decode()
    assert re.findall(r'data-testid="pod-message">([^<]*)<', workers) == ["任务运行期间 Pod 消失了"]


def test_the_consoles_task_sentences_have_their_chinese():
    with translation.override("zh-hans"):
        assert localized_message("Runtime error: connection refused") == "运行时错误：connection refused"
        assert localized_message("Cluster alpha is unreachable: timed out") == "集群 alpha 无法连接：timed out"
        assert localized_message("demo-rollout-1: Pending") == "demo-rollout-1：等待中"
        # the job's message quotes what blocks its Workers, which is translated too when it is ours
        assert localized_message("Waiting for Workers: 0/3 ready (Waiting for Pod demo-header-0 to be created)") == (
            "等待 Worker：0/3 已就绪 (等待 Pod demo-header-0 被创建)"
        )
        assert localized_message("demo-header-0: ErrImagePull: not found") == "demo-header-0: ErrImagePull: not found"
    with translation.override("en"):
        assert localized_message("demo-rollout-1: Pending") == "demo-rollout-1: Pending"


# --- one word per state -----------------------------------------------------------------------------------------


def test_one_word_per_state_in_every_table_of_words():
    """The Job/Task phase labels (``Phase``), the Workers tab, the Run check and the Logs picker share one table."""
    from jobs.explain.runcheck_input import phase_label
    from jobs.observe.headline import worker_phase_label

    for code, words in [
        ("zh-hans", ["等待中", "运行中", "已完成", "失败", "已停止", "已完成", "未知"]),
        ("en", ["Pending", "Running", "Succeeded", "Failed", "Stopped", "Completed", "Unknown"]),
    ]:
        with translation.override(code):
            assert [state_label(s) for s in STATE_WORDS] == words
            assert {p: str(label) for p, label in Phase.choices} == {p: state_label(p) for p, _ in Phase.choices}
            assert all(worker_phase_label(s) == state_label(s) == phase_label(s, code) for s in STATE_WORDS)
            assert panel.log_strings()["states"] == state_labels()
    assert state_label("Evicted") == "Evicted"  # an unknown state is shown as it is


def test_logs_picker_labels_a_finished_worker_as_the_workers_tab_does(client, terminal_runtime, alice):
    job = finished(terminal_runtime, running(terminal_runtime, submit(alice)))
    targets, warnings = logs.resolve_targets(logs.load_layout(job))
    assert not warnings and targets and all(not t.exists for t in targets)  # the Pods are gone
    assert {t.as_dict()["shownPhase"] for t in targets} == {"Completed"}
    client.force_login(alice)
    for lang, word in [("zh-hans", "已完成"), ("en", "Completed")]:
        page = client.get(f"/jobs/{job.name}/?tab=workers", HTTP_ACCEPT_LANGUAGE=lang).content.decode()
        assert set(re.findall(r'data-testid="worker-phase" data-phase="Completed">([^<]+)<', page)) == {word}
        logs_tab = client.get(f"/jobs/{job.name}/?tab=logs", HTTP_ACCEPT_LANGUAGE=lang).content.decode()
        assert f'"Completed": "{word}"' in html.unescape(logs_tab)  # the picker's word, from the same table


def test_a_worker_that_vanished_while_its_job_runs_is_still_gone(terminal_runtime, alice):
    job = running(terminal_runtime, submit(alice))
    terminal_runtime.delete_task("ns", "demo-rollout")
    targets, _ = logs.resolve_targets(logs.load_layout(job))
    gone = [t.as_dict() for t in targets if not t.exists]
    assert gone and {t["shownPhase"] for t in gone} == {"Running"}  # the picker says "gone" for these


# --- the Diagnosis timeline -------------------------------------------------------------------------------------


WAITING_WORKER = [
    "RLINF_NODE_RANK: 1",
    "Connecting to Ray head at demo-header-0.demo:6379...",
    *[
        line
        for k in range(1, 8)
        for line in (
            "HEAD IP: 10.0.0.5",
            f"Waiting for head to be reachable at demo-header-0.demo:6379... (attempt {k})",
        )
    ],
]


def test_a_marker_repeated_in_a_row_is_one_timeline_entry_with_its_count():
    result = diagnose([WorkerInput(pod="demo-rollout-0", role="rollout", log="\n".join(WAITING_WORKER))])
    timeline = result.workers[0].to_dict("zh-hans")["timeline"]
    assert [(m["key"], m["count"]) for m in timeline] == [("rank", 1), ("connect", 1), ("head_ip", 7)]
    head_ip = timeline[-1]
    assert head_ip["label"] == "Head 地址已解析" and head_ip["lineNo"] == 3 and head_ip["lastLineNo"] == 15
    assert head_ip["last"]


def test_diagnosis_page_shows_the_repeated_marker_once(client, fake, alice):  # noqa: F811
    job = running(fake, submit(alice))
    fake.log("demo-rollout-0", *WAITING_WORKER)
    sync_job(job)
    client.force_login(alice)
    for lang, text in [("zh-hans", "Head 地址已解析（连续 7 次）"), ("en", "Head address resolved (7 times in a row)")]:
        page = client.get(f"/jobs/{job.name}/diagnosis/", HTTP_ACCEPT_LANGUAGE=lang).content.decode()
        row = re.search(r'data-pod="demo-rollout-0">(.*?)</tr>', page, re.S).group(1)
        stages = re.findall(r'data-testid="timeline-stage" data-key="head_ip" data-count="(\d+)">([^<]+)<', row)
        assert stages == [("7", text)], stages


# --- SSH to a finished job's Worker -----------------------------------------------------------------------------


def _identity(user):
    key = asyncssh.generate_private_key("ssh-ed25519").export_public_key().decode().strip()
    return access.authenticate(user.username, add_key(user, "laptop", key).fingerprint)


def test_bastion_says_the_job_has_finished(terminal_runtime, alice):
    job = running(terminal_runtime, submit(alice))
    who = _identity(alice)
    target = access.resolve_worker(who, "demo-header-0", 22)
    job = finished(terminal_runtime, job)
    with pytest.raises(access.Denied) as denied:
        access.resolve_worker(who, "demo-rollout-1", 22)
    assert str(denied.value) == "job demo has finished (phase Succeeded): Worker demo-rollout-1 no longer runs"
    assert (
        access.worker_running(target) == "job demo has finished (phase Succeeded): Worker demo-header-0 no longer runs"
    )
    # a job that runs and has not created the Pod yet still says so
    other = submit(alice, name="fresh")
    with pytest.raises(access.Denied, match="it may not have a Pod yet"):
        access.resolve_worker(who, f"{other.name}-header-3", 22)


def test_ssh_api_and_ssh_config_list_only_running_jobs_workers(terminal_runtime, alice):
    done = finished(terminal_runtime, running(terminal_runtime, submit(alice, name="done")))
    live = submit(alice, name="live")
    terminal_runtime.set_running()
    sync_job(live)
    stopped = submit(alice, name="halted")
    Job.objects.filter(pk=stopped.pk).update(stopped=True, phase=Phase.STOPPED)
    assert Pod.objects.filter(task__job=done).exists()  # its rows stay, but none is reachable
    api = APIClient()
    api.credentials(HTTP_AUTHORIZATION=f"Token {issue_token(alice, 'cli')[1]}")
    body = api.get("/api/v1/ssh/").json()
    assert {w["job"] for w in body["workers"]} == {"live"}
    assert all(not line.startswith("done-") for line in body["known_hosts"])
    named = api.get("/api/v1/ssh/?job=done").json()
    assert named["workers"] == [] and named["job_phase"] == "Succeeded"
    assert api.get("/api/v1/ssh/?job=live").json()["job_phase"] in ("Pending", "Running")


def test_task_rows_keep_their_stored_english():
    """The database keeps the English sentence (API, logs): only the page translates it."""
    task = Task(name="t", replicas=1)
    assert phases.pending_reason(task, []) == "Waiting for Pod t-0 to be created"


# --- the real rlark executable against a live console ------------------------------------------------------------


@pytest.mark.django_db(transaction=True)
def test_rlark_ssh_config_and_ssh_of_a_finished_job(live_server, terminal_runtime, alice, tmp_path):
    finished(terminal_runtime, running(terminal_runtime, submit(alice, name="done")))
    live = submit(alice, name="live")
    terminal_runtime.set_running()
    sync_job(live)
    env = {
        **os.environ,
        "PYTHONPATH": str(ROOT),  # this checkout's rlark_cli
        "RLARK_URL": live_server.url,
        "RLARK_TOKEN": issue_token(alice, "cli")[1],
        "RLARK_LANG": "en",
        "RLARK_CONFIG": str(tmp_path / "none.yaml"),
        "HOME": str(tmp_path),
    }
    rlark = str(Path(sys.executable).parent / "rlark")
    known = ["--known-hosts", str(tmp_path / "kh")]
    config = subprocess.run([rlark, "ssh-config", *known], env=env, capture_output=True, text=True, timeout=60)
    assert config.returncode == 0, config.stderr
    hosts = re.findall(r"^Host (\S+)$", config.stdout, re.M)
    assert hosts[0] == "rlark-bastion" and hosts[1:] and all(h.startswith("live-") for h in hosts[1:]), hosts
    only = subprocess.run(
        [rlark, "ssh-config", "--job", "done", *known], env=env, capture_output=True, text=True, timeout=60
    )
    assert re.findall(r"^Host (\S+)$", only.stdout, re.M) == ["rlark-bastion"]
    assert "# no running Workers" in only.stdout
    ssh = subprocess.run([rlark, "ssh", "done"], env=env, capture_output=True, text=True, timeout=60)
    assert ssh.returncode != 0
    assert "job done has finished (phase Succeeded): its Workers no longer run" in ssh.stderr
    halted = submit(alice, name="halted")
    Job.objects.filter(pk=halted.pk).update(stopped=True, phase=Phase.STOPPED)
    ssh = subprocess.run([rlark, "ssh", "halted"], env=env, capture_output=True, text=True, timeout=60)
    assert ssh.returncode != 0 and "job halted is stopped: start it again (rlark start job halted)" in ssh.stderr
    helptext = subprocess.run([rlark, "ssh-config", "--help"], env=env, capture_output=True, text=True, timeout=60)
    assert "running or starting" in helptext.stdout and "finished, failed or stopped" in helptext.stdout


@pytest.mark.parametrize(("lang", "word"), [("zh-hans", "已完成"), ("en", "Succeeded")])
def test_every_page_names_a_jobs_state_from_the_one_table(client, fake, alice, lang, word):  # noqa: F811
    job = submit(alice)
    Job.objects.filter(pk=job.pk).update(phase=Phase.SUCCEEDED)
    job.tasks.update(phase=Phase.SUCCEEDED)
    client.force_login(alice)
    listing = client.get("/jobs/", HTTP_ACCEPT_LANGUAGE=lang).content.decode()
    assert re.findall(r'data-testid="job-phase"[^>]*>([^<]+)<', listing) == [word]
    assert f'<option value="Succeeded" >{word}</option>' in listing  # the list's phase filter
    detail = client.get(f"/jobs/{job.name}/", HTTP_ACCEPT_LANGUAGE=lang).content.decode()
    assert re.findall(r'data-testid="detail-phase">([^<]+)<', detail) == [word]
    tasks = re.search(r'data-testid="task-table">(.*?)</table>', detail, re.S).group(1)
    assert re.findall(r'class="badge phase-succeeded">([^<]+)<', tasks) == [word, word]
    diagnosis = client.get(f"/jobs/{job.name}/diagnosis/", HTTP_ACCEPT_LANGUAGE=lang).content.decode()
    assert re.findall(r'data-testid="detail-phase">([^<]+)<', diagnosis) == [word]
