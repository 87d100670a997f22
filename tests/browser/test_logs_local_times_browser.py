"""Browser: the Logs tab's timestamp toggle shows times on the local runtime (a real supervisor runs the Worker),
in the page's zone or in UTC as the zone setting says. Screenshots: ``logs-local-times-{lang}.png``."""

from __future__ import annotations

import re
import time
from datetime import timedelta

import pytest
from django.utils import timezone
from playwright.sync_api import expect

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


@pytest.fixture
def worker(tmp_path, settings, admin_user):
    """Job ``stamps``: one Header on a real local supervisor that wrote ``first``, then ``second`` 2 s later."""
    settings.VAR_DIR = tmp_path / "var"
    settings.RLARK_LOCAL_ROOT = tmp_path / "root"
    sup = SupervisorProcess(tmp_path / "root").start()
    rt = sup.runtime(nodes_spec(("local-gpu-0", {"pool": "head"}, {"cpu": 4})), cluster="local")
    script = "echo first; sleep 2; echo second; trap 'exit 0' TERM; sleep 600 & wait"
    rt.apply_task(manifest("stamps", "header", head=True, command=["bash", "-c", script]))
    try:
        wait_for(lambda: b"second" in b"".join(rt.stream_log("rlark-system", "stamps-header-0")), 30, what="log")
        time.sleep(1.0)
        cluster = _seed_cluster()
        head = template("header", "rlinf/rlinf:v1", {"pool": "head"}, 1, head=True)
        job = Job.objects.create(
            name="stamps",
            owner=admin_user,
            spec={"metadata": {"name": "stamps"}, "spec": {"tasks": [head]}},
            phase="Running",
            started_at=timezone.now() - timedelta(minutes=1),
        )
        task = Task.objects.create(
            job=job, template_name="header", name="stamps-header", cluster=cluster, namespace="rlark-system", head=True
        )
        info = next(p for p in rt.list_pods("rlark-system", "stamps"))
        Pod.objects.create(
            task=task, name="stamps-header-0", uid=info.uid, node="local-gpu-0", ip="127.0.0.1", phase="Running"
        )
        yield
    finally:
        rt.delete_task("rlark-system", "stamps-header")
        sup.stop()


@pytest.fixture
def asgi_server(worker):
    """The console's ASGI app (pages and websockets) under daphne in a forked process on the test database."""
    with forked_asgi_server() as url:
        yield url


TIME = re.compile(r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d{3}")


@pytest.mark.parametrize("lang", ["zh-hans", "en"])
def test_local_log_lines_show_times(page, client, admin_user, worker, asgi_server, lang):
    server = type("Server", (), {"url": asgi_server})
    login(page, server, client, admin_user)
    set_lang(page, server, lang)
    page.goto(f"{asgi_server}/jobs/stamps/?tab=logs&pod=stamps-header-0")
    expect(page.locator(".log-view .ll").filter(has_text="second")).to_have_count(1)
    page.check('[data-testid="logs-timestamps"]')
    stamps = page.locator(".log-view .lts")
    expect(stamps.first).to_be_visible()
    local = [t.strip() for t in stamps.all_inner_texts()]
    assert len(local) >= 2 and all(TIME.match(t) and t.endswith("+08:00") for t in local), local  # Asia/Shanghai
    assert local[0] != local[-1], local  # first and second were written 2 s apart
    page.select_option('[data-testid="logs-tz"]', "utc")
    expect(stamps.first).to_contain_text("UTC")
    utc = [t.strip() for t in stamps.all_inner_texts()]
    assert utc != local, (utc, local)  # the page's zone (Asia/Shanghai) is not UTC
    page.screenshot(path=str(screenshot_dir() / f"logs-local-times-{lang}.png"), full_page=True)
