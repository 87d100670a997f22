"""Browser: the Diagnosis, Run check and Metrics tabs of a job with a Worker that never joined, an NCCL timeout and
a /dev/shm error; the settings form and the Markdown export; zh and en screenshots."""

from __future__ import annotations

import re
from datetime import datetime, timedelta
from pathlib import Path

import pytest
from django.conf import settings as django_settings
from django.utils import timezone
from playwright.sync_api import expect

from clusters.models import Cluster
from clusters.services.inventory import upsert_local_nodes
from jobs.models import Job, Pod, Task
from jobs.observe import metrics as metrics_service
from jobs.observe.status import log_archive_path
from tests.conftest import ARTIFACTS
from tests.jobs.test_runcheck import HEAD_LOG, template, worker_log

pytestmark = [
    pytest.mark.browser,
    pytest.mark.django_db(transaction=True),
    pytest.mark.usefixtures("orm_beside_playwright"),
]


FAILING_HEAD = HEAD_LOG.replace(
    "Current node count: 3\nCluster is ready: 3 nodes available (required: 3).\nRay cluster check passed.\n",
    "Current node count: 2\nError: Cluster did not become ready within 15 minutes (required 3 nodes).\n"
    "Ray cluster check failed.\nWarning: Ray cluster check failed, proceeding anyway.\n",
).replace(
    "[INFO 10:00:01 RLinf] RLinf is running on a cluster with 3 nodes and 24 accelerators. token=abc123456\n",
    "[WARNING 10:00:01 RLinf] Waiting for 3 nodes to be ready, currently 2 nodes available.\n",
)


def _seed_cluster() -> Cluster:
    """The online local cluster with a head and a rollout GPU node."""
    cluster = Cluster.objects.create(name="local", runtime="local", status="online")
    upsert_local_nodes(
        cluster,
        [
            {"name": "local-gpu-0", "labels": {"pool": "head"}, "capacity": {"nvidia.com/gpu": 8}},
            {"name": "local-gpu-1", "labels": {"pool": "rollout"}, "capacity": {"nvidia.com/gpu": 8}},
        ],
    )
    return cluster


def _seed_job(owner, data: Path, now: datetime) -> Job:
    """The Running job ``demo`` (a header writing TensorBoard events into ``data``, 2 rollouts), 42 min old."""
    head = template("header", "rlinf/rlinf:v1", {"pool": "head"}, 1, head=True, mounts=data)
    head["tensorBoardDir"] = "/data/tb"
    doc = {
        "metadata": {"name": "demo"},
        "spec": {"tasks": [head, template("rollout", "rlinf/rlinf:v1", {"pool": "rollout"}, 2)]},
    }
    return Job.objects.create(
        name="demo",
        owner=owner,
        spec=doc,
        phase="Running",
        started_at=now - timedelta(minutes=42),
        rlinf_config="cluster:\n  num_nodes: 3\n",
        run_check={"output_path": "/data/ckpt"},
    )


def _seed_tasks(job: Job, cluster: Cluster) -> tuple[Task, Task]:
    """The job's header and rollout Tasks."""
    th = Task.objects.create(
        job=job,
        template_name="header",
        name="demo-header",
        cluster=cluster,
        namespace="rlark-system",
        display_role="Header",
        head=True,
        replicas=1,
    )
    tr = Task.objects.create(
        job=job,
        template_name="rollout",
        name="demo-rollout",
        cluster=cluster,
        namespace="rlark-system",
        display_role="Rollout",
        order=1,
        replicas=2,
        rank_start=1,
    )
    return th, tr


def _seed_pods(th: Task, tr: Task, now: datetime) -> None:
    """Three Running Pods, the first rollout restarted once."""
    running = {"state": "running", "ready": True}
    Pod.objects.create(
        task=th,
        name="demo-header-0",
        node="local-gpu-0",
        ip="127.0.0.1",
        phase="Running",
        container_state=running,
        created_at=now - timedelta(minutes=41),
    )
    Pod.objects.create(
        task=tr,
        name="demo-rollout-0",
        node="local-gpu-1",
        ip="127.0.0.1",
        phase="Running",
        container_state=running,
        created_at=now - timedelta(minutes=41),
        restart_count=1,
    )
    Pod.objects.create(
        task=tr,
        name="demo-rollout-1",
        ordinal=1,
        node="local-gpu-1",
        ip="127.0.0.1",
        phase="Running",
        container_state=running,
        created_at=now - timedelta(minutes=41),
    )


def _seed_logs() -> None:
    """Archived logs: the failing Ray check on the header, an NCCL timeout and a /dev/shm error on rollout-0, a
    rollout-1 that never reaches the head."""
    logs = {
        "demo-header-0": FAILING_HEAD,
        "demo-rollout-0": worker_log(1)
        + "[rank1]:[E ProcessGroupNCCL.cpp:616] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=1, "
        "OpType=ALLREDUCE) ran for 600000 milliseconds before timing out.\n"
        "OSError: [Errno 28] No space left on device: '/dev/shm/torch_123'\n",
        "demo-rollout-1": "RLINF_NODE_RANK: 2\nConnecting to Ray head at demo-header-ray-head:6379...\n"
        + "".join(
            f"Waiting for head to be reachable at demo-header-ray-head:6379... (attempt {k})\n" for k in range(1, 121)
        ),
    }
    for pod, text in logs.items():
        path = log_archive_path("demo", pod)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)


def _seed_tensorboard(data: Path) -> None:
    """40 steps of three TensorBoard scalars under ``data``/tb/run."""
    from tensorboardX import SummaryWriter

    writer = SummaryWriter(logdir=str(data / "tb" / "run"))
    for step in range(1, 41):
        writer.add_scalar("train/actor/loss", 1.0 / step + 0.02 * (step % 5), step)
        writer.add_scalar("env/success_once", min(1.0, step / 35), step)
        writer.add_scalar("rollout/reward", (step % 7) / 7 + step / 40, step)
    writer.close()


def _seed_pod_metrics(job: Job, now: datetime) -> None:
    """20 CPU/memory samples, 5 s apart, of the header and rollout-0."""
    for i in range(20):
        metrics_service.record_pod_metrics(
            job,
            {
                "demo-header-0": {"cpu": 1.0 + (i % 4) * 0.3, "memory": (3 + i / 10) * 2**30},
                "demo-rollout-0": {"cpu": 0.5 + (i % 3) * 0.2, "memory": (2 + i / 20) * 2**30},
            },
            now - timedelta(seconds=5 * (20 - i)),
        )


@pytest.fixture
def seeded(admin_user, tmp_path, settings):
    settings.VAR_DIR = tmp_path / "var"
    settings.RLARK_LOCAL_ROOT = tmp_path / "no-supervisor"
    cluster = _seed_cluster()
    data = tmp_path / "data"
    now = timezone.now()
    job = _seed_job(admin_user, data, now)
    th, tr = _seed_tasks(job, cluster)
    _seed_pods(th, tr, now)
    _seed_logs()
    _seed_tensorboard(data)
    _seed_pod_metrics(job, now)
    return job


def login(page, live_server, client, user):
    client.force_login(user)
    page.context.add_cookies(
        [
            {
                "name": django_settings.SESSION_COOKIE_NAME,
                "value": client.cookies[django_settings.SESSION_COOKIE_NAME].value,
                "url": live_server.url,
            }
        ]
    )


def set_lang(page, live_server, lang):
    page.context.add_cookies([{"name": django_settings.LANGUAGE_COOKIE_NAME, "value": lang, "url": live_server.url}])


def test_diagnosis_runcheck_metrics_pages(page, live_server, client, admin_user, seeded):
    ARTIFACTS.mkdir(exist_ok=True)
    login(page, live_server, client, admin_user)
    for lang in ("zh-hans", "en"):
        set_lang(page, live_server, lang)
        page.goto(f"{live_server.url}/jobs/demo/diagnosis/")
        codes = page.locator("[data-testid=finding]").evaluate_all("els => els.map(e => e.dataset.code)")
        assert {"nccl", "shm_or_disk", "ray_partial", "ray_check_failed", "head_unreachable"} <= set(codes)
        row = page.locator("[data-testid=worker-timeline][data-pod=demo-rollout-1]")
        expect(row.locator("[data-testid=last-stage]")).to_have_text(
            "Worker 解析和连接 Head" if lang == "zh-hans" else "Worker resolving and connecting to the head"
        )
        nccl = page.locator("[data-testid=finding][data-code=nccl] [data-testid=next-step]")
        expect(nccl).to_contain_text("RLark 不自动诊断 NCCL" if lang == "zh-hans" else "RLark does not diagnose NCCL")
        page.screenshot(path=str(ARTIFACTS / f"diagnosis-{lang}.png"), full_page=True)

        page.goto(f"{live_server.url}/jobs/demo/run-check/")
        checks = page.locator("[data-testid=check]")
        expect(checks).to_have_count(5)
        check3 = page.locator("[data-testid=check][data-number='3']")
        expect(check3).to_have_attribute("data-status", "not_met")
        expect(check3.locator("[data-testid=check-status]")).to_have_text("未符合" if lang == "zh-hans" else "Not met")
        expect(check3).to_contain_text("demo-rollout-1")
        assert "abc123456" not in page.content()
        page.screenshot(path=str(ARTIFACTS / f"runcheck-{lang}.png"), full_page=True)

        page.goto(f"{live_server.url}/jobs/demo/metrics/")
        expect(page.locator("[data-testid=tb-chart]")).to_have_count(3)
        header = page.locator("[data-testid=worker-metric][data-pod=demo-header-0]")
        expect(header.locator("[data-testid=cpu]")).to_have_text("1.90")
        expect(page.locator("[data-testid=worker-metric][data-pod=demo-rollout-1]")).to_contain_text(
            "暂不可用" if lang == "zh-hans" else "not available"
        )
        # the phase badge beside the job's (monospace) name is a label in the page's font, as on the job page
        badge = page.locator("[data-testid=detail-phase]")
        assert "monospace" not in badge.evaluate("e => getComputedStyle(e).fontFamily")
        page.screenshot(path=str(ARTIFACTS / f"metrics-{lang}.png"), full_page=True)

    # Settings form and export (English).
    page.goto(f"{live_server.url}/jobs/demo/run-check/")
    page.fill("[data-testid=max-wait]", "5")
    page.fill("[data-testid=progress-pattern]", "Global Step")
    page.click("[data-testid=save-settings]")
    page.wait_for_load_state("load")
    expect(page.locator("[data-testid=max-wait]")).to_have_value("5")
    with page.expect_download() as info:
        page.click("[data-testid=export-record]")
    text = open(info.value.path(), encoding="utf-8").read()
    assert text.startswith("# Job run check record\n")  # the page is in English: so is the record
    assert "| 3. Ray started as expected | Not met |" in text
    assert "HF_TOKEN" not in text and "hf_SuperSecretToken123" not in text


def test_diagnosis_and_run_check_say_how_old_their_log_results_are(
    page, live_server, client, admin_user, seeded, monkeypatch
):
    """The tabs show the stored log scans with their time; older than RLARK_LOG_SCAN_MAX_AGE, they say
    the new lines are being read in the background (the refresh is asked for once)."""
    from jobs import tasks as job_tasks
    from jobs.models import PodLogScan

    queued: list[int] = []
    monkeypatch.setattr(job_tasks.refresh_log_scans, "delay", queued.append)
    ARTIFACTS.mkdir(exist_ok=True)
    login(page, live_server, client, admin_user)
    set_lang(page, live_server, "en")
    page.goto(f"{live_server.url}/jobs/demo/diagnosis/")  # first visit: scanned now
    expect(page.locator("[data-testid=scan-age]")).to_contain_text("Log results as of")
    expect(page.locator("[data-testid=scan-refreshing]")).to_have_count(0)
    # as if read from the running Pods 75 s ago (these Pods' logs come from the archive, which never grows)
    PodLogScan.objects.update(updated_at=timezone.now() - timedelta(seconds=75), final=False, cursor="")
    for lang, age, refreshing in (
        ("zh-hans", re.compile(r"（1m 1\ds 前）"), "正在后台读取新的日志行"),
        ("en", re.compile(r"\(1m 1\ds ago\)"), "Newer log lines are being read in the background"),
    ):
        set_lang(page, live_server, lang)
        for tab in ("diagnosis", "run-check"):
            page.goto(f"{live_server.url}/jobs/demo/{tab}/")
            expect(page.locator("[data-testid=scan-age]")).to_contain_text(age)
            expect(page.locator("[data-testid=scan-refreshing]")).to_contain_text(refreshing)
            page.screenshot(path=str(ARTIFACTS / f"{tab}-stale-{lang}.png"), full_page=True)
    assert queued == [Job.objects.get(name="demo").pk]
