"""Inventory.from_db (few queries, plain data) and the submission service (create/update/clone)."""

from __future__ import annotations

import pytest
import yaml

from clusters.models import Node
from jobs.control import submission
from jobs.jobspec.inventory import Inventory
from jobs.models import Job, Pod, Task
from tests.spec_fixtures import SSH_KEY, base_doc, invalid_doc, seed_db

pytestmark = pytest.mark.django_db


def test_from_db_is_a_constant_number_of_queries(alice, django_assert_max_num_queries):
    seed_db(alice)
    with django_assert_max_num_queries(6):
        inv = Inventory.from_db(alice)
    assert set(inv.clusters) == {"local", "other"}
    assert {n.name for n in inv.nodes} == {"gpu-0", "gpu-1", "gpu-2", "o-0"}
    assert inv.clusters["local"].allow_host_path is True
    assert ("local", "oss-a") in inv.storage_classes and inv.domains == {"d1"}
    assert [k.name for k in inv.ssh_keys] == ["laptop"]
    gpu0 = next(n for n in inv.nodes if n.name == "gpu-0")
    assert gpu0.labels["pool"] == "head" and gpu0.free("nvidia.com/gpu") == 8


def test_other_users_keys_are_not_in_the_inventory(alice, bob):
    seed_db(alice)
    assert Inventory.from_db(bob).ssh_keys == []


def test_create_from_text_and_invalid_and_exists(alice):
    seed_db(alice)
    doc = base_doc()
    doc["spec"]["sshPublicKeys"] = [SSH_KEY]
    job = submission.create_job(alice, yaml.safe_dump(doc, allow_unicode=True), content_type="application/yaml")
    assert job.name == "ppo-job" and job.display_name == "PPO 训练" and job.owner == alice
    assert job.spec["spec"]["sshPublicKeys"] == [SSH_KEY]
    with pytest.raises(submission.JobExists):
        submission.create_job(alice, doc)
    with pytest.raises(submission.JobInvalid) as exc:
        submission.create_job(alice, invalid_doc())
    assert "header_replicas_not_one" in exc.value.result.codes()
    assert Job.objects.count() == 1


def test_update_does_not_count_own_workers_and_keeps_name(alice):
    seed_db(alice)
    job = submission.create_job(alice, base_doc())
    # The job's Workers now hold the GPUs on their nodes (as a sync would report).
    node = Node.objects.get(name="gpu-0")
    node.used = {"nvidia.com/gpu": 4}
    node.save()
    for n in ("gpu-1", "gpu-2"):
        Node.objects.filter(name=n).update(used={"nvidia.com/gpu": 8})
    cluster = node.cluster
    head = Task.objects.create(job=job, template_name="actor", name="ppo-job-actor", cluster=cluster, namespace="x")
    Pod.objects.create(task=head, name="ppo-job-actor-0", node="gpu-0", phase="Running")
    rollout = Task.objects.create(
        job=job, template_name="rollout", name="ppo-job-rollout", cluster=cluster, namespace="x", order=1
    )
    Pod.objects.create(task=rollout, name="ppo-job-rollout-0", node="gpu-1", phase="Running")
    Pod.objects.create(task=rollout, name="ppo-job-rollout-1", ordinal=1, node="gpu-2", phase="Running")
    doc = base_doc()
    doc["spec"]["tasks"][1]["prepareScript"] = "echo v2"
    # gpu-1/2 report 8 of 8 GPUs used, 2 of them by this job's own rollout Workers: an edit still fits ...
    assert not Inventory.from_db(alice).nodes[1].free("nvidia.com/gpu")
    updated = submission.update_job(alice, job, doc)
    assert updated.spec["spec"]["tasks"][1]["prepareScript"] == "echo v2"
    # ... but the same requests from another job do not.
    other = base_doc()
    other["metadata"]["name"] = "second"
    with pytest.raises(submission.JobInvalid) as exc:
        submission.create_job(alice, other)
    assert "gpu_exceeds_node" in exc.value.result.codes()
    # Renaming through update is refused.
    doc["metadata"]["name"] = "renamed"
    with pytest.raises(submission.JobInvalid) as exc:
        submission.update_job(alice, job, doc)
    assert "job_name_mismatch" in exc.value.result.codes()


def test_clone_document(alice):
    seed_db(alice)
    job = submission.create_job(alice, base_doc())
    clone = submission.clone_document(job)
    assert clone["metadata"]["name"] == "ppo-job-copy"
    assert clone["metadata"]["annotations"]["rlark.io/display-name"] == "PPO 训练"
    assert clone["spec"]["stopped"] is False
    long = Job(name="a" * 63)
    assert submission.clone_name(long.name) == "a" * 58 + "-copy"


def test_merge_patch():
    assert submission.merge_patch({"a": {"b": 1, "c": 2}}, {"a": {"b": None, "d": 3}}) == {"a": {"c": 2, "d": 3}}
