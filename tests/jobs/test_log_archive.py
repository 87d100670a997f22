"""The full log of every Worker instance is archived (gzip) when a job stops, ends or is
deleted, under a per-job cap the admin sets; it stays downloadable after Stop and, after Delete, until the
retention period ends. Against the real local runtime (supervisor process, Worker processes)."""

from __future__ import annotations

import gzip
import io
import os
import tarfile
from datetime import timedelta

import pytest
from django.test import Client
from django.utils import timezone

from clusters.models import Cluster, Node
from clusters.runtime import registry
from jobs.control import controller, log_archive
from jobs.models import Job, Pod, Task
from jobs.observe.status import read_worker_log
from terminal.services import logs
from tests.clusters.test_local_runtime_support import SupervisorProcess, manifest, wait_for

pytestmark = pytest.mark.django_db
MARKER = "Executing run script..."
LINES = 5000


@pytest.fixture
def local(tmp_path, settings):
    """A local cluster ``c1`` (one virtual node) served by a real supervisor; the console's var dir in
    ``tmp_path``."""
    settings.VAR_DIR = tmp_path / "var"
    settings.VAR_DIR.mkdir(mode=0o700)
    settings.RLARK_LOCAL_ROOT = tmp_path / "root"
    sup = SupervisorProcess(settings.RLARK_LOCAL_ROOT).start()
    cluster = Cluster.objects.create(name="c1", runtime="local", status="online")
    Node.objects.create(cluster=cluster, name="n1", labels={"kubernetes.io/hostname": "n1"}, capacity={"cpu": 8})
    rt = registry.runtime_for(cluster)
    rt.ping()
    yield rt, cluster
    sup.stop()


def start_job(rt, cluster, owner, name: str, script: str) -> Job:
    job = Job.objects.create(name=name, owner=owner, spec={}, phase="Running")
    task = Task.objects.create(
        job=job,
        template_name="header",
        name=f"{name}-header",
        cluster=cluster,
        namespace="rlark-system",
        role="Actor",
        head=True,
        replicas=1,
        applied_replicas=1,
        phase="Running",
    )
    rt.apply_task(manifest(name, "header", head=True, command=["bash", "-c", script]))
    pod = wait_for(lambda: (p := rt.list_pods("rlark-system", name)) and p[0], 10, what="pod")
    Pod.objects.create(task=task, name=pod.name, ordinal=0, uid=pod.uid, phase="Running")
    return job


def long_log_script(lines: int = LINES) -> str:
    return (
        f'echo "{MARKER}"; for i in $(seq 1 {lines}); do echo "Global Step: $i/{lines} loss=0.$i"; done; '
        "echo ALL-WRITTEN; trap 'exit 0' TERM; sleep 600 & wait"
    )


def full_lines(text: str) -> list[str]:
    return [x for x in text.splitlines() if x.startswith("Global Step: ")]


def test_full_head_log_downloadable_after_stop_and_after_delete(local, alice, bob):
    rt, cluster = local
    job = start_job(rt, cluster, alice, "arch", long_log_script())
    wait_for(lambda: "ALL-WRITTEN" in rt.read_log("rlark-system", "arch-header-0", tail_lines=3), 30, what="log")

    # Stop: archive, then the runtime removes the Pod (what reconcile does for a stopped job)
    task = job.tasks.get()
    log_archive.archive_task_logs(job, task)
    rt.scale_task("rlark-system", task.name, 0)
    wait_for(lambda: not rt.list_pods("rlark-system", "arch"), 15, what="pod gone")
    archived = log_archive.find("arch", "arch-header-0")
    assert archived is not None and archived.name.endswith(".log.gz")
    assert archived.read_bytes()[:2] == log_archive.GZIP_MAGIC and archived.stat().st_mode & 0o077 == 0
    text = read_worker_log(job, "arch-header-0", tail=None)
    assert MARKER in text and len(full_lines(text)) == LINES  # every line, not the last 1,000
    assert full_lines(text)[0] == f"Global Step: 1/{LINES} loss=0.1"
    target = {t.pod: t for t in logs.resolve_targets(logs.load_layout(job))[0]}["arch-header-0"]
    first, rest = logs.open_download(target)
    downloaded = (first + b"".join(rest)).decode()
    assert MARKER in downloaded and len(full_lines(downloaded)) == LINES

    # Delete: kept until the retention period ends, readable by its owner (and staff), nobody else
    controller.delete(job)
    assert not Job.objects.filter(name="arch").exists()
    owner = Client()
    owner.force_login(alice)
    listing = owner.get("/api/v1/log-archives/").json()
    assert [a["job"] for a in listing] == ["arch"]
    entry = listing[0]
    assert {"pod": "arch-header-0", "previous": False} in [
        {k: f[k] for k in ("pod", "previous")} for f in entry["files"]
    ]
    resp = owner.get(f"/api/v1/log-archives/{entry['id']}/logs/?pod=arch-header-0")
    assert resp.status_code == 200 and resp["Content-Disposition"].endswith('arch-arch-header-0.log"')
    body = b"".join(resp.streaming_content).decode()
    assert MARKER in body and len(full_lines(body)) == LINES
    page = owner.get("/log-archives/")
    assert page.status_code == 200 and "arch-header-0" in page.content.decode()
    other = Client()
    other.force_login(bob)
    assert other.get("/api/v1/log-archives/").json() == []
    assert other.get(f"/api/v1/log-archives/{entry['id']}/logs/?pod=arch-header-0").status_code == 404
    assert owner.get("/api/v1/log-archives/..%2F..%2Fsecret/logs/?pod=x").status_code == 404

    # A new job with the same name starts a fresh archive; the deleted one's expires after the retention
    assert log_archive.find("arch", "arch-header-0") is None
    assert log_archive.purge_expired(timezone.now() + timedelta(days=29)) == 0
    assert log_archive.purge_expired(timezone.now() + timedelta(days=31)) == 1
    assert owner.get("/api/v1/log-archives/").json() == []


def test_a_restart_the_sync_has_not_seen_yet_keeps_the_failed_runs_log(local, alice):
    """The kubelet (here the local runtime, 0 s first back-off) restarts a failed container before the sync
    records the restart: the archive still keeps the failed instance's log, and it is the one read."""
    rt, cluster = local
    script = (
        "if [ -e first-run-done ]; then echo second-instance; trap 'exit 0' TERM; sleep 600 & wait; fi; "
        "touch first-run-done; echo 'cat: /data/robot.yaml: No such file or directory' >&2; exit 2"
    )
    job = start_job(rt, cluster, alice, "raced", script)
    wait_for(lambda: rt.list_pods("rlark-system", "raced")[0].container.restart_count >= 1, 20, what="restart")
    wait_for(lambda: "second-instance" in rt.read_log("rlark-system", "raced-header-0", tail_lines=5), 20, what="log")
    task = job.tasks.get()
    assert task.pods.get().restart_count == 0  # the sync has not seen the restart
    log_archive.archive_task_logs(job, task)
    rt.scale_task("rlark-system", task.name, 0)
    wait_for(lambda: not rt.list_pods("rlark-system", "raced"), 15, what="pod gone")
    assert "second-instance" in read_worker_log(job, "raced-header-0", tail=None)
    previous = read_worker_log(job, "raced-header-0", tail=None, previous=True)
    assert "cat: /data/robot.yaml: No such file or directory" in previous and "second-instance" not in previous


def test_cap_cuts_the_archive_and_the_page_says_so(local, alice, settings):
    rt, cluster = local
    script = (
        f'echo "{MARKER}"; head -c 400000 /dev/urandom | base64 -w 100; echo ALL-WRITTEN; '
        "trap 'exit 0' TERM; sleep 600 & wait"
    )
    job = start_job(rt, cluster, alice, "capped", script)
    wait_for(lambda: "ALL-WRITTEN" in rt.read_log("rlark-system", "capped-header-0", tail_lines=3), 30, what="log")
    job.log_archive_max_bytes = 64 * 1024  # set by an admin in the back office
    job.save(update_fields=["log_archive_max_bytes"])
    log_archive.archive_task_logs(job, job.tasks.get())
    path = log_archive.find("capped", "capped-header-0")
    assert path.stat().st_size <= 64 * 1024 + 64 * 1024  # at most one read chunk past the cap
    with gzip.open(path, "rt") as fh:
        text = fh.read()
    assert text.startswith(MARKER) and "ALL-WRITTEN" not in text
    assert text.rstrip("\n").endswith(log_archive.CUT_LINE.format(cap=64 * 1024).rstrip("\n"))
    assert log_archive.cut_files("capped") == ["capped-header-0"]
    client = Client()
    client.force_login(alice)
    for lang, words in (("en", "reached its log archive size cap"), ("zh-hans", "大小上限")):
        client.cookies["django_language"] = lang
        page = client.get("/jobs/capped/?tab=logs").content.decode()
        assert 'data-testid="logs-archive-cut"' in page and words in page and "capped-header-0" in page
    # the default cap is the setting
    job.log_archive_max_bytes = None
    settings.RLARK_LOG_ARCHIVE_MAX_BYTES = 10 * 2**20
    log_archive.archive_task_logs(job, job.tasks.get())
    assert log_archive.cut_files("capped") == []
    with gzip.open(log_archive.find("capped", "capped-header-0"), "rt") as fh:
        assert "ALL-WRITTEN" in fh.read()
    rt.delete_task("rlark-system", "capped-header")


def test_older_plain_archives_stay_readable(settings, tmp_path, alice):
    settings.VAR_DIR = tmp_path / "var"
    legacy = log_archive.job_dir("old") / "old-header-0.log"
    legacy.parent.mkdir(parents=True)
    legacy.write_text("line 1\nline 2\n")
    path = log_archive.find("old", "old-header-0")
    assert path == legacy and log_archive.read_tail(path, 1) == "line 2\n"
    assert (
        os.path.basename(log_archive.path_for("old", "old-header-0", previous=True)) == "old-header-0.previous.log.gz"
    )


def test_admin_sets_a_jobs_log_archive_cap(admin_user, alice, client):
    job = Job.objects.create(name="capme", owner=alice, spec={}, phase="Running")
    client.force_login(admin_user)
    url = f"/admin/jobs/job/{job.pk}/change/"
    page = client.get(url)
    assert page.status_code == 200 and 'name="log_archive_max_bytes"' in page.content.decode()
    resp = client.post(
        url,
        {
            "log_archive_max_bytes": "1048576",
            "tasks-TOTAL_FORMS": "0",
            "tasks-INITIAL_FORMS": "0",
            "tasks-MIN_NUM_FORMS": "0",
            "tasks-MAX_NUM_FORMS": "1000",
        },
    )
    assert resp.status_code == 302, resp.content.decode()[:2000]
    job.refresh_from_db()
    assert job.log_archive_max_bytes == 1048576 and log_archive.cap_for(job) == 1048576
    assert job.phase == "Running" and job.name == "capme"  # nothing else changed
    client.force_login(alice)  # not staff: no back office
    assert client.get(url).status_code == 302


RAY_SESSION = "/tmp/ray/session_2026-12-06_00-00-00_000000_1/logs"


def test_ray_logs_of_a_failed_run_are_kept_archived_and_downloadable_after_delete(local, alice, bob):
    """A Worker whose run fails leaves Ray's own files (here written where Ray writes them, the Worker's private
    /tmp/ray/session_*/logs); they are downloadable while the job exists, archived at Stop, and kept after
    Delete for the retention period, only for their owner."""
    rt, cluster = local
    script = (
        "if [ -e first-run-done ]; then trap 'exit 0' TERM; sleep 600 & wait; fi; touch first-run-done; "
        f"mkdir -p {RAY_SESSION} && "
        f"echo 'raylet: failed to connect to the GCS at 10.0.0.9:6379' > {RAY_SESSION}/raylet.out; "
        "echo 'ray start failed' >&2; exit 1"
    )
    job = start_job(rt, cluster, alice, "rayfail", script)
    wait_for(lambda: rt.kept_ray_logs_bytes("rlark-system", "rayfail", "rayfail-header-0") > 0, 20, what="kept")
    owner, other = Client(), Client()
    owner.force_login(alice)
    other.force_login(bob)

    def members(body: bytes) -> dict[str, bytes]:
        with tarfile.open(fileobj=io.BytesIO(body), mode="r:gz") as tar:
            return {m.name: tar.extractfile(m).read() for m in tar.getmembers() if m.isfile()}

    url = "/api/v1/jobs/rayfail/ray-logs/?pod=rayfail-header-0"
    resp = owner.get(url)
    assert resp.status_code == 200 and resp["Content-Type"] == "application/gzip"
    files = members(b"".join(resp.streaming_content))
    raylet = next(v for k, v in files.items() if k.endswith("/raylet.out"))
    assert b"failed to connect to the GCS" in raylet and all(k.startswith("rayfail-header-0/run-") for k in files)
    assert other.get(url).status_code == 404  # not bob's job
    assert owner.get("/api/v1/jobs/rayfail/ray-logs/?pod=someone-else-0").status_code == 404

    # Stop: archived with the logs; after Delete the log archive lists and serves them
    task = job.tasks.get()
    log_archive.archive_task_logs(job, task)
    assert log_archive.find_ray("rayfail", "rayfail-header-0") is not None
    rt.scale_task("rlark-system", task.name, 0)
    controller.delete(job)
    wait_for(lambda: rt.kept_ray_logs_bytes("rlark-system", "rayfail", "rayfail-header-0") == 0, 30, what="gone")
    entry = owner.get("/api/v1/log-archives/").json()[0]
    assert [r["pod"] for r in entry["rayLogs"]] == ["rayfail-header-0"]
    resp = owner.get(f"/api/v1/log-archives/{entry['id']}/logs/?pod=rayfail-header-0&ray=true")
    assert resp.status_code == 200 and resp["Content-Disposition"].endswith('rayfail-rayfail-header-0-ray-logs.tar.gz"')
    assert members(b"".join(resp.streaming_content)) == files
    page = owner.get("/log-archives/").content.decode()
    assert 'data-testid="log-archive-ray"' in page
    assert other.get(f"/log-archives/{entry['id']}/download/?pod=rayfail-header-0&ray=1").status_code == 404


def test_a_bundle_over_the_cap_leaves_files_out_and_says_which(local, alice):
    rt, cluster = local
    script = (
        f"mkdir -p {RAY_SESSION} && head -c 300000 /dev/urandom > {RAY_SESSION}/gcs_server.out && "
        f"echo small > {RAY_SESSION}/raylet.out; exit 1"
    )
    start_job(rt, cluster, alice, "raybig", script)
    wait_for(lambda: rt.kept_ray_logs_bytes("rlark-system", "raybig", "raybig-header-0") > 0, 20, what="kept")
    body = b"".join(rt.stream_ray_logs("rlark-system", "raybig", "raybig-header-0", max_bytes=100_000))
    with tarfile.open(fileobj=io.BytesIO(body), mode="r:gz") as tar:
        names = {m.name.rsplit("/", 1)[-1]: m for m in tar.getmembers()}
        left_out = tar.extractfile(names["NOT-INCLUDED.txt"]).read().decode()
    assert "raylet.out" in names and "gcs_server.out" not in names
    assert "gcs_server.out\t300000" in left_out
    rt.delete_task("rlark-system", "raybig-header")
