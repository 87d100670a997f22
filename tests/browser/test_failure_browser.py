"""Browser: the Diagnosis of a Failed job says why it failed (Worker, last stage, exit code, first error, the lines
before the exit, links to the full log) and the overview of a running job says which Ray nodes have not joined;
zh and en screenshots."""

from __future__ import annotations

import io
import tarfile
from datetime import timedelta

import pytest
from django.utils import timezone
from playwright.sync_api import expect

from jobs.control import log_archive
from jobs.models import Job, Pod, Task
from jobs.observe.status import log_archive_path
from tests.browser.test_diagnosis_browser import _seed_cluster, login, set_lang
from tests.conftest import ARTIFACTS
from tests.jobs.test_runcheck import template

pytestmark = [
    pytest.mark.browser,
    pytest.mark.django_db(transaction=True),
    pytest.mark.usefixtures("orm_beside_playwright"),
]

BROKE_LOG = (
    "RLINF_NODE_RANK: 0\nExecuting prepare script...\n"
    "INFO:root:warm-up request failed, retrying\n"
    "cat: /data/robot.yaml: No such file or directory\n"
)
RAYLET = b"raylet: failed to register with the GCS\n"
SIGNALS = {"lastStage": "Executing prepare script...", "firstError": "cat: /data/robot.yaml: No such file or directory"}


@pytest.fixture
def seeded(admin_user, tmp_path, settings):
    """A Failed job ``broke`` (its Header's prepare script exited 2; the log archived) and a Running job ``nodes``
    whose rollout-1 has not joined Ray, as the status sync leaves them."""
    settings.VAR_DIR = tmp_path / "var"
    settings.RLARK_LOCAL_ROOT = tmp_path / "no-supervisor"
    cluster = _seed_cluster()
    now = timezone.now()
    head = template("header", "rlinf/rlinf:v1", {"pool": "head"}, 1, head=True)
    broke = Job.objects.create(
        name="broke",
        owner=admin_user,
        spec={"metadata": {"name": "broke"}, "spec": {"tasks": [head]}},
        phase="Failed",
        message="Header broke-header-0 (role Header) exited with code 2 after stage 'Executing prepare script...'; "
        "first error: cat: /data/robot.yaml: No such file or directory",
        started_at=now - timedelta(minutes=3),
    )
    task = Task.objects.create(
        job=broke, template_name="header", name="broke-header", cluster=cluster, namespace="rlark-system", head=True
    )
    Pod.objects.create(
        task=task,
        name="broke-header-0",
        node="local-gpu-0",
        phase="Failed",
        exit_code=2,
        container_state={"state": "terminated", "exit_code": 2, "signals": SIGNALS},
        created_at=now - timedelta(minutes=2),
    )
    path = log_archive_path("broke", "broke-header-0")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(BROKE_LOG)
    ray = io.BytesIO()
    with tarfile.open(fileobj=ray, mode="w:gz") as tar:
        info = tarfile.TarInfo("broke-header-0/run-1/session_1/raylet.out")
        info.size = len(RAYLET)
        tar.addfile(info, io.BytesIO(RAYLET))
    log_archive.ray_path_for("broke", "broke-header-0").write_bytes(ray.getvalue())
    nodes = Job.objects.create(
        name="nodes",
        owner=admin_user,
        spec={"metadata": {"name": "nodes"}, "spec": {"tasks": [head]}},
        phase="Pending",
        message="All Workers started; waiting for the Ray cluster to form",
        started_at=now - timedelta(minutes=3),
        conditions=[
            {
                "type": "RayNodesJoined",
                "status": "False",
                "reason": "NodesMissing",
                "message": "Ray nodes 2/3, missing rollout-1 (rank 2)",
                "lastTransitionTime": now.isoformat(),
            }
        ],
    )
    return broke, nodes


def test_why_a_job_failed_and_which_ray_nodes_are_missing(page, live_server, client, admin_user, seeded):
    ARTIFACTS.mkdir(exist_ok=True)
    login(page, live_server, client, admin_user)
    for lang in ("zh-hans", "en"):
        zh = lang == "zh-hans"
        set_lang(page, live_server, lang)
        page.goto(f"{live_server.url}/jobs/broke/diagnosis/")
        card = page.locator("[data-testid=failure]")
        expect(card.locator("[data-testid=failure-pod]")).to_have_text("broke-header-0")
        expect(card.locator("[data-testid=failure-stage]")).to_have_text(
            "角色准备脚本" if zh else "Role prepare script"
        )
        expect(card.locator("[data-testid=failure-exit-code]")).to_have_text("2")
        expect(card.locator("[data-testid=failure-first-error]")).to_contain_text("No such file or directory")
        expect(card.locator("[data-testid=failure-tail]")).to_contain_text("warm-up request failed")
        expect(page.locator("[data-testid=no-findings]")).to_have_count(0)
        with page.expect_download() as download:
            card.locator("[data-testid=failure-ray-logs]").click()
        with tarfile.open(download.value.path(), mode="r:gz") as tar:
            assert tar.extractfile("broke-header-0/run-1/session_1/raylet.out").read() == RAYLET
        page.click("[data-testid=failure-log-link]")
        expect(page).to_have_url(f"{live_server.url}/jobs/broke/?tab=logs&pod=broke-header-0")
        page.goto(f"{live_server.url}/jobs/broke/diagnosis/")
        page.screenshot(path=str(ARTIFACTS / f"diagnosis-failure-{lang}.png"), full_page=True)
        page.goto(f"{live_server.url}/jobs/nodes/?tab=overview")
        line = page.locator("[data-testid=ray-nodes]")
        expect(line).to_have_text(
            "Ray 节点 2/3，缺少 rollout-1 (rank 2)" if zh else "Ray nodes 2/3, missing rollout-1 (rank 2)"
        )
        page.screenshot(path=str(ARTIFACTS / f"overview-ray-nodes-{lang}.png"), full_page=True)
