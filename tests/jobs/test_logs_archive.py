"""Logs stay readable after a job stops or ends: once the runtime has deleted a Pod, the Logs tab,
its websocket and the download read the copy the status sync archived (peers L12)."""

from __future__ import annotations

import pytest

from jobs.observe.status import log_archive_path
from terminal.services import logs
from tests.terminal.test_logs_service import NS, _targets, job, runtime  # noqa: F401 - fixtures

pytestmark = pytest.mark.django_db


def _archive(settings, tmp_path, job_name: str, pod: str, text: str):  # noqa: F811
    settings.VAR_DIR = tmp_path / "var"
    path = log_archive_path(job_name, pod)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def test_gone_pod_is_read_from_the_archive(runtime, job, settings, tmp_path):  # noqa: F811
    _archive(settings, tmp_path, "demo", "demo-actor-0", "".join(f"step {i}\n" for i in range(1200)))
    runtime.delete_pod(NS, "demo-actor-0")
    target = _targets(job)["demo-actor-0"]
    assert not target.exists
    batch = logs.read_tail(runtime, target)
    assert len(batch.lines) == 1000 and batch.lines[-1] == "step 1199"
    first, rest = logs.open_download(target)
    assert (first + b"".join(rest)).decode().count("\n") == 1200


def test_gone_pod_without_archive_is_reported_gone(runtime, job, settings, tmp_path):  # noqa: F811
    settings.VAR_DIR = tmp_path / "var"
    runtime.delete_pod(NS, "demo-actor-0")
    target = _targets(job)["demo-actor-0"]
    state, message = logs.empty_state(target, previous=False)
    assert state == "gone" and "demo-actor-0" in message


@pytest.mark.django_db(transaction=True)
@pytest.mark.asyncio
async def test_download_view_serves_the_archive(alice, runtime, settings, tmp_path):  # noqa: F811
    from asgiref.sync import sync_to_async
    from django.test import AsyncClient

    from terminal.demo_runtime import seed_job

    await sync_to_async(seed_job)(runtime, alice)
    _archive(settings, tmp_path, "demo", "demo-actor-0", "Run script exited with code 0\n")
    runtime.delete_pod(NS, "demo-actor-0")
    client = AsyncClient()
    await sync_to_async(client.force_login)(alice)
    resp = await client.get("/terminal/jobs/demo/logs/download/?pod=demo-actor-0")
    assert resp.status_code == 200
    body = b"".join([chunk async for chunk in resp.streaming_content])
    assert body == b"Run script exited with code 0\n"
