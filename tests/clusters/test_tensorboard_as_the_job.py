"""A job's TensorBoard runs as the job (docs/security.md): the uid of its Workers, as the real local supervisor
reports it, in namespaces where the console's files are hidden and only the job's TensorBoard directory is
mounted. A symlink the job leaves in that directory (as a probe did, with TensorBoard's projector plugin racing a
symlink swap to read the console's ``secret.key``) leads only to what the job itself may read.
"""

from __future__ import annotations

import os
import re
import urllib.request
from pathlib import Path

import psutil
import pytest
from django.conf import settings

from clusters.models import Cluster
from jobs.explain import tensorboard_server
from jobs.models import Job, Task
from tests.clusters.test_local_runtime_support import SupervisorProcess

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="a root console runs TensorBoard as the job's uid")


@pytest.fixture
def job(db, tmp_path, settings, admin_user):
    settings.VAR_DIR = tmp_path / "var"
    settings.VAR_DIR.mkdir(mode=0o700)
    settings.RLARK_LOCAL_ROOT = tmp_path / "local"
    (settings.VAR_DIR / "secret.key").write_text("the-console-secret")
    (settings.VAR_DIR / "secret.key").chmod(0o600)
    cluster = Cluster.objects.create(name="local", runtime="local", status="online")
    job = Job.objects.create(name="tbjob", owner=admin_user, spec={"spec": {"tasks": []}})
    Task.objects.create(job=job, template_name="header", name="tbjob-header", cluster=cluster, head=True)
    return job


def test_tensorboard_runs_as_the_jobs_workers_and_sees_only_its_directory(job, tmp_path):
    sup = SupervisorProcess(Path(settings.RLARK_LOCAL_ROOT)).start()
    logdir = tmp_path / "out" / "tb"
    logdir.mkdir(parents=True)
    (logdir / "lnk").symlink_to(settings.VAR_DIR)  # what the job could leave in its own output
    try:
        ids = tensorboard_server._job_ids(job)  # asked of the real supervisor
        assert ids is not None and ids[0] >= 100000, ids
        server = tensorboard_server._start(job.name, str(logdir), ids)
        try:
            tb = next(
                p
                for p in psutil.Process(server.proc.pid).children(recursive=True)
                if "tensorboard" in " ".join(p.cmdline())
            )
            assert tb.uids().real == ids[0], tb.uids()
            # in its mount namespace: the job's directory, and the console's state hidden (a root-owned placeholder)
            root = Path(f"/proc/{tb.pid}/root")
            assert (root / "rlark" / "tensorboard" / "lnk").is_symlink()
            hidden = root / str(settings.VAR_DIR).lstrip("/") / "secret.key"
            assert not hidden.exists() or hidden.read_text() != "the-console-secret"
            url = f"http://127.0.0.1:{server.port}{server.prefix}/data/runs"
            with urllib.request.urlopen(url, timeout=10) as resp:
                assert resp.status == 200
        finally:
            server.stop()
        log = (Path(settings.VAR_DIR) / "tensorboard" / job.name / "main.log").read_text(errors="replace")
        assert not re.search(r"Traceback", log), log[-2000:]
    finally:
        sup.stop()
