"""Ray token authentication in the manifests and the controller (``clusters.ray_auth``): every Task carries the
job's token in its own Secret, ``main`` reads it through ``secretKeyRef``, and the token is nowhere else."""

from __future__ import annotations

import base64
import json

import pytest

from clusters import ray_auth
from jobs.jobspec.manifests import build_task_manifests, redacted
from tests.jobs.test_manifests import CLUSTERS, JOB, KEYS, REGISTRY

TOKEN = ray_auth.job_token(7, "2026-01-01T00:00:00+00:00")


def build(token: str = TOKEN):
    return build_task_manifests(
        "robot-policy-training", JOB, clusters=CLUSTERS, registries=[REGISTRY], ssh_keys=KEYS, ray_auth_token=token
    )


def test_job_token_is_per_job_stable_and_hex():
    assert len(TOKEN) == 64 and int(TOKEN, 16) >= 0
    assert ray_auth.job_token(7, "2026-01-01T00:00:00+00:00") == TOKEN
    assert ray_auth.job_token(8, "2026-01-01T00:00:00+00:00") != TOKEN
    assert ray_auth.job_token(7, "2026-01-02T00:00:00+00:00") != TOKEN  # same name re-created: another token


def test_every_task_has_its_secret_and_main_reads_the_token_from_it():
    manifests = build()
    assert len(manifests) == 3
    for m in manifests:
        secrets = [o for o in m.extra_objects if o["kind"] == "Secret" and o["metadata"]["name"].endswith("-ray-auth")]
        assert len(secrets) == 1
        secret = secrets[0]
        assert secret["metadata"]["name"] == f"{m.task}-ray-auth"
        assert secret["metadata"]["namespace"] == m.namespace
        assert secret["metadata"]["labels"] == {
            "rlinf.io/job": "robot-policy-training",
            "rlinf.io/task": m.task,
            "app.kubernetes.io/managed-by": "rlark-console",
            "rlark.io/ray-auth": "true",
        }
        assert base64.b64decode(secret["data"]["token"]).decode() == TOKEN
        assert ray_auth.token_of(secret) == TOKEN
        main = next(c for c in m.workload["spec"]["template"]["spec"]["containers"] if c["name"] == "main")
        env = {e["name"]: e for e in main["env"]}
        assert env["RAY_AUTH_MODE"] == {"name": "RAY_AUTH_MODE", "value": "token"}
        assert env["RAY_AUTH_TOKEN"]["valueFrom"] == {"secretKeyRef": {"name": f"{m.task}-ray-auth", "key": "token"}}
        # after the user's env, so a user's RAY_AUTH_MODE cannot turn it off
        names = [e["name"] for e in main["env"]]
        assert names.index("RAY_AUTH_MODE") > names.index("RLARK_RAY_PORT")


def test_the_token_is_only_in_the_secret_and_redacted_hides_it():
    for m in build():
        assert TOKEN not in json.dumps(m.workload)
        encoded = base64.b64encode(TOKEN.encode()).decode()
        others = [o for o in m.extra_objects if ray_auth.token_of(o) is None]
        assert TOKEN not in json.dumps(others) and encoded not in json.dumps(others)
        shown = json.dumps([redacted(o) for o in m.extra_objects])
        assert TOKEN not in shown and encoded not in shown


def test_without_a_token_nothing_is_added():
    for m in build(token=""):
        assert not any(o["metadata"]["name"].endswith("-ray-auth") for o in m.extra_objects)
        assert "RAY_AUTH_MODE" not in json.dumps(m.workload)


@pytest.mark.django_db
def test_controller_gives_each_job_its_own_token_and_stores_none(django_user_model):
    from types import SimpleNamespace

    from jobs.control import controller
    from jobs.models import Job

    owner = django_user_model.objects.create(username="alice")
    jobs = [Job.objects.create(name=name, owner=owner, spec=JOB) for name in ("job-a", "job-b")]
    clusters = {"gpu-a": SimpleNamespace(name="gpu-a", namespace="rlark-gpu")}
    tokens = []
    for job in jobs:
        built = controller._manifests(job, clusters)
        found = {ray_auth.token_of(o) for m in built.values() for o in m.extra_objects} - {None}
        assert len(found) == 1  # one token for every Task of the job
        token = found.pop()
        assert token == ray_auth.job_token(job.pk, job.created_at.isoformat())
        job.refresh_from_db()
        assert token not in json.dumps(job.spec)
        tokens.append(token)
    assert tokens[0] != tokens[1]
