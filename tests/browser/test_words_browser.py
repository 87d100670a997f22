"""Browser: the words a user reads, in zh and en, on a job whose two Workers ran on a real local supervisor and
finished normally (their Pods then deleted, as after a finished run): the language menu names each language in
its own name; the Logs picker labels a finished Worker with the Workers tab's word (已完成 / Completed), not
"gone"; the Diagnosis shows the Worker's seven ``HEAD IP`` lines as one timeline entry with its count; the Task
table's and a Pod's messages are in the page's language; the jobs list names each state with the same word.
Screenshots: ``words-{menu,logs,diagnosis,tasks,workers,list,overview}-{lang}.png``."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone
from playwright.sync_api import expect

from jobs.control import log_archive
from jobs.models import Job, Pod, Task
from tests.browser.forked_asgi import forked_asgi_server
from tests.browser.test_diagnosis_browser import _seed_cluster, login, set_lang
from tests.clusters.test_local_runtime_support import SupervisorProcess, manifest, nodes_spec, wait_for
from tests.conftest import screenshot_dir
from tests.jobs.test_runcheck import template

pytestmark = [
    pytest.mark.browser,
    pytest.mark.django_db(transaction=True),
    pytest.mark.usefixtures("orm_beside_playwright"),
]

HEADER = (
    "echo 'RLINF_NODE_RANK: 0'; echo 'Ray cluster is ready. Printing cluster information:';"
    " echo 'Executing run script...'; echo 'training done'; echo 'Run script exited with code 0';"
    " trap 'exit 0' TERM; sleep 600 & wait"
)
WORKER = (
    "echo 'RLINF_NODE_RANK: 1'; echo 'Connecting to Ray head at words-header-ray-head:6379...';"
    " for k in 1 2 3 4 5 6 7; do echo 'HEAD IP: 127.0.0.1';"
    ' echo "Waiting for head to be reachable at words-header-ray-head:6379... (attempt $k)"; done;'
    " echo 'Head is reachable at 127.0.0.1:6379'; trap 'exit 0' TERM; sleep 600 & wait"
)
WORDS = {
    "zh-hans": {"done": "已完成", "gone": "已删除", "head_ip": "Head 地址已解析（连续 7 次）", "other": "English"},
    "en": {"done": "Completed", "gone": "gone", "head_ip": "Head address resolved (7 times in a row)", "other": "中文"},
}


@pytest.fixture
def finished_job(tmp_path, settings, admin_user):
    """Job ``words`` (Succeeded): a Header whose run script exited 0 and a Worker that reached it, on a real local
    supervisor (the last sync saw both Running); their logs archived and their Pods deleted, as the controller does
    once a run has finished. Job ``waits``
    (Pending) has a Task whose Pod is not created yet."""
    settings.VAR_DIR = tmp_path / "var"
    settings.RLARK_LOCAL_ROOT = tmp_path / "root"
    sup = SupervisorProcess(tmp_path / "root").start()
    rt = sup.runtime(nodes_spec(("local-gpu-0", {"pool": "head"}, {"cpu": 4})), cluster="local")
    rt.apply_task(manifest("words", "header", head=True, command=["bash", "-c", HEADER]))
    rt.apply_task(manifest("words", "worker", head=False, command=["bash", "-c", WORKER]))
    try:
        for pod, last in (("words-header-0", b"Run script exited"), ("words-worker-0", b"Head is reachable")):
            logged = lambda pod=pod, last=last: last in b"".join(rt.stream_log("rlark-system", pod))  # noqa: E731
            wait_for(logged, 60, what=f"{pod}'s last line")
        cluster = _seed_cluster()
        now = timezone.now()
        tasks = [template("header", "rlinf/rlinf:v1", {"pool": "head"}, 1, head=True)]
        tasks.append(template("worker", "rlinf/rlinf:v1", {"pool": "head"}, 1))
        job = Job.objects.create(
            name="words",
            owner=admin_user,
            spec={"metadata": {"name": "words"}, "spec": {"tasks": tasks}},
            phase="Succeeded",
            message="Run script exited with code 0",
            started_at=now - timedelta(minutes=3),
            finished_at=now,
        )
        infos = {p.name: p for p in rt.list_pods("rlark-system", "words")}
        for order, name in enumerate(("header", "worker")):
            task = Task.objects.create(
                job=job,
                template_name=name,
                name=f"words-{name}",
                cluster=cluster,
                namespace="rlark-system",
                head=name == "header",
                display_role="Header" if name == "header" else "Worker",
                order=order,
                rank_start=order,
                phase="Succeeded",
            )
            info = infos[f"words-{name}-0"]
            Pod.objects.create(
                task=task, name=info.name, uid=info.uid, node="local-gpu-0", ip="127.0.0.1", phase="Running"
            )
            log_archive.archive_task_logs(job, task)  # the full logs stay readable once the Pods are gone
            rt.delete_task("rlark-system", task.name)
        wait_for(lambda: not list(rt.list_pods("rlark-system", "words")), 30, what="the Pods deleted")
        waits = Job.objects.create(
            name="waits",
            owner=admin_user,
            spec={"metadata": {"name": "waits"}, "spec": {"tasks": tasks[:1]}},
            phase="Pending",
            message="Waiting for Workers: 0/1 ready (Waiting for Pod waits-header-0 to be created)",
        )
        Task.objects.create(
            job=waits,
            template_name="header",
            name="waits-header",
            cluster=cluster,
            namespace="rlark-system",
            head=True,
            message="Waiting for Pod waits-header-0 to be created",
        )
        lost = Job.objects.create(
            name="lost",
            owner=admin_user,
            spec={"metadata": {"name": "lost"}, "spec": {"tasks": tasks[:1]}},
            phase="Running",
            started_at=now - timedelta(minutes=5),
        )
        lost_task = Task.objects.create(
            job=lost, template_name="header", name="lost-header", cluster=cluster, namespace="rlark-system", head=True
        )
        Pod.objects.create(  # as the sync marks a running Worker whose Pod was deleted under it
            task=lost_task,
            name="lost-header-0",
            node="local-gpu-0",
            phase="Failed",
            reason="PodDeleted",
            message="the Pod disappeared while the job was running",
        )
        yield job
    finally:
        for name in ("words-header", "words-worker"):
            rt.delete_task("rlark-system", name)
        sup.stop()


@pytest.fixture
def asgi_server(finished_job):
    """The console's ASGI app (pages and websockets) under daphne in a forked process on the test database."""
    with forked_asgi_server() as url:
        yield url


@pytest.mark.parametrize("lang", ["zh-hans", "en"])
def test_words_of_a_finished_job(page, client, admin_user, finished_job, asgi_server, lang):
    server = type("Server", (), {"url": asgi_server})
    words = WORDS[lang]
    shots = screenshot_dir()
    login(page, server, client, admin_user)
    set_lang(page, server, lang)

    # the language menu: each language in its own name, whatever the page's language
    page.goto(f"{asgi_server}/jobs/")
    menu = page.locator('[data-testid="language-select"]')
    assert [t.strip() for t in menu.locator("option").all_inner_texts()] == ["中文", "English"]
    assert "英语" not in page.content()
    menu.evaluate("el => el.setAttribute('size', '2')")  # show both options in the screenshot
    page.locator("header.topbar").screenshot(path=str(shots / f"words-menu-{lang}.png"))

    # the Logs picker: a finished Worker carries the Workers tab's word, not "gone"
    page.goto(f"{asgi_server}/jobs/words/?tab=workers")
    expect(page.locator('[data-testid="worker-phase"]')).to_have_text([words["done"], words["done"]])
    page.goto(f"{asgi_server}/jobs/words/?tab=logs&pod=words-worker-0")
    options = page.locator('[data-testid="logs-worker"] option')
    expect(options.filter(has_text="words-worker-0")).to_have_text(f"words-worker-0 · {words['done']}")
    expect(options.filter(has_text="words-header-0")).to_have_text(f"words-header-0 · {words['done']}")
    assert not any(words["gone"] in t for t in options.all_inner_texts())
    expect(page.locator(".log-view .ll").filter(has_text="Head is reachable")).to_have_count(1)  # the archive
    page.screenshot(path=str(shots / f"words-logs-{lang}.png"), full_page=True)

    # the Diagnosis: seven HEAD IP lines are one entry with their count
    page.goto(f"{asgi_server}/jobs/words/diagnosis/")
    row = page.locator('[data-testid="worker-timeline"][data-pod="words-worker-0"]')
    stages = row.locator('[data-testid="timeline-stage"]')
    keys = stages.evaluate_all("els => els.map(e => e.dataset.key)")
    assert keys == ["rank", "connect", "head_ip", "head_reachable"], keys  # resolved once (x7), then reachable
    expect(row.locator('[data-testid="timeline-stage"][data-key="head_ip"]')).to_have_text(words["head_ip"])
    expect(row.locator('[data-testid="diag-worker-phase"]')).to_have_text(words["done"])
    page.screenshot(path=str(shots / f"words-diagnosis-{lang}.png"), full_page=True)

    # the Task table's message, in the page's language (the stored sentence is English)
    page.goto(f"{asgi_server}/jobs/waits/")
    message = page.locator('[data-testid="task-message"]')
    expect(message).to_have_text(
        "等待 Pod waits-header-0 被创建" if lang == "zh-hans" else "Waiting for Pod waits-header-0 to be created"
    )
    page.locator('[data-testid="task-table"]').scroll_into_view_if_needed()
    page.screenshot(path=str(shots / f"words-tasks-{lang}.png"), full_page=True)

    # a Pod's message (the console's sentence) in the Workers tab's details, in the page's language
    page.goto(f"{asgi_server}/jobs/lost/?tab=workers")
    page.click('[data-testid="expand-lost-header-0"]')
    expect(page.locator('[data-testid="pod-message"]')).to_have_text(
        "任务运行期间 Pod 消失了" if lang == "zh-hans" else "The Pod disappeared while the job was running"
    )
    expect(page.locator('[data-testid="worker-phase"]')).to_have_text("失败" if lang == "zh-hans" else "Failed")
    page.screenshot(path=str(shots / f"words-workers-{lang}.png"), full_page=True)

    # the jobs list and the Overview name each state with the same word
    page.goto(f"{asgi_server}/jobs/")
    expect(page.locator('[data-testid="job-phase"]')).to_have_count(3)
    shown = {t.strip() for t in page.locator('[data-testid="job-phase"]').all_inner_texts()}
    assert shown == ({"已完成", "等待中", "运行中"} if lang == "zh-hans" else {"Succeeded", "Pending", "Running"})
    page.screenshot(path=str(shots / f"words-list-{lang}.png"), full_page=True)
    page.goto(f"{asgi_server}/")
    page.screenshot(path=str(shots / f"words-overview-{lang}.png"), full_page=True)
