"""The local runtime's per-job Ray token files (``clusters.runtime.local.ray_auth``), without starting Ray."""

from __future__ import annotations

import dataclasses
import json
import os

import pytest

from clusters import ray_auth as job_auth
from clusters.runtime.local import ray_auth
from clusters.runtime.local.supervision import Supervisor
from tests.clusters.test_local_runtime_support import manifest

TOKEN = "ab" * 32


def with_secret(job: str, token: str = TOKEN) -> dict:
    m = manifest(job, "header", head=True)
    labels = {"rlinf.io/job": job, "rlinf.io/task": m.task}
    secret = job_auth.secret(m.task, m.namespace, labels, token)
    return dataclasses.asdict(dataclasses.replace(m, extra_objects=(secret,)))


def test_take_token_drops_the_secret_data_and_leaves_the_manifest_alone():
    wire = with_secret("j1")
    stripped, token = ray_auth.take_token(wire)
    assert token == TOKEN
    assert TOKEN not in json.dumps(stripped)
    assert stripped["extra_objects"][0]["metadata"]["name"] == "j1-header-ray-auth"
    assert job_auth.token_of(wire["extra_objects"][0]) == TOKEN  # the caller's copy is unchanged
    plain = dataclasses.asdict(manifest("j2", "header", head=True))
    assert ray_auth.take_token(plain) == (plain, None)


def test_store_keeps_a_token_makes_one_and_takes_the_consoles(tmp_path):
    made = ray_auth.store(tmp_path, "j1")
    assert len(made) == 64 and ray_auth.store(tmp_path, "j1") == made
    assert ray_auth.store(tmp_path, "j1", TOKEN) == TOKEN
    path = tmp_path / "ray-auth" / "j1.token"
    assert path.read_text() == TOKEN and path.stat().st_mode & 0o777 == 0o600
    assert (tmp_path / "ray-auth").stat().st_mode & 0o777 == 0o700
    assert ray_auth.store(tmp_path, "j2") != made
    with pytest.raises(ValueError):
        ray_auth.store(tmp_path, "../x")


def test_worker_copy_is_the_jobs_read_only_file_and_forget_removes_both(tmp_path):
    ray_auth.store(tmp_path, "j1", TOKEN)
    uid = 100000 + 7 if os.geteuid() == 0 else None
    mount = ray_auth.worker_mount(tmp_path, "j1", (uid, 65536) if uid else None)
    assert (mount.target, mount.read_only, mount.kind) == ("/rlark/ray-auth", True, "bind")
    copy = tmp_path / "ray-auth" / "j1" / str(uid or os.geteuid()) / "token"  # one copy per host uid of the job
    assert mount.source == str(copy.parent)
    assert copy.read_text() == TOKEN and copy.stat().st_mode & 0o777 == 0o400
    if uid:
        assert copy.stat().st_uid == uid
    assert ray_auth.worker_env() == {"RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN_PATH": "/rlark/ray-auth/token"}
    other = ray_auth.worker_mount(tmp_path, "j1", (uid + 65536, 65536) if uid else None)  # its Workers elsewhere
    if uid:
        assert other.source != mount.source and copy.stat().st_uid == uid  # neither copy locks the other uid out
    ray_auth.forget(tmp_path, "j1")
    assert not copy.parent.exists() and not (tmp_path / "ray-auth" / "j1.token").exists()


def test_supervisor_keeps_the_token_out_of_its_state_and_forgets_it_with_the_job(tmp_path):
    sup = Supervisor(tmp_path / "root")
    sup.op_set_nodes("c1", [{"name": "n1", "labels": {}, "capacity": {"cpu": 4}}])
    sup.op_apply_task("c1", with_secret("j1"))
    sup._dirty = True
    sup._save()
    assert TOKEN not in (tmp_path / "root" / "state.json").read_text()
    assert (tmp_path / "root" / "ray-auth" / "j1.token").read_text() == TOKEN
    sup.op_apply_task("c1", with_secret("j1"))  # re-applied unchanged: the stored Task stays equal
    assert not sup._dirty or TOKEN not in json.dumps(sup.state)
    sup.op_delete_task("c1", "j1-header")
    assert not (tmp_path / "root" / "ray-auth" / "j1.token").exists()
    for base in list(sup.ports.locks):
        sup.ports.unlock(base)
