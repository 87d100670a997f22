"""The same cross-cluster job without a network domain does not form, the Diagnosis names the
cause, and the validator warns before submit.

Real part (root, real namespaces, real Ray): Header on isolated cluster A, rollout x2 on isolated cluster B, no
``spec.domain``. The workers wait for ``<head>-ray-head``, which nothing in cluster B resolves or routes to; the
head's cluster check gives up and the run script sees 1 alive node. The Workers' real logs then go through the
Diagnosis of a stored job whose Tasks are in the two clusters: one ``cross_cluster_no_domain`` error, in zh and en.
"""

from __future__ import annotations

import re

import pytest

from clusters.models import Cluster
from jobs.explain import diagnosis
from jobs.jobspec.validator import validate
from jobs.models import Job, Pod, Task
from tests.clusters.test_local_runtime_support import SupervisorProcess, manifest, nodes_spec, wait_for
from tests.domains.support import cleanup_networks, isolated_runtime, needs_root
from tests.spec_fixtures import base_doc, inventory

NODES = nodes_spec(("n1", {}, {"cpu": 4}), ("n2", {}, {"cpu": 4}))
RUN = (
    "python -c \"import ray; ray.init(address='auto'); "
    "print('ALIVE', len([n for n in ray.nodes() if n['Alive']]))\"; sleep 600"
)


def test_validator_warns_when_roles_span_clusters_without_a_domain():
    doc = base_doc()
    doc["spec"]["tasks"][1]["cluster"] = "other"
    doc["spec"]["tasks"][1]["nodeSelector"] = {"pool": "other"}
    doc["spec"]["tasks"][1]["kubernetes"]["workload"]["replicas"] = 1
    result = validate(doc, inventory())
    warning = next(p for p in result.warnings if p.code == "domain_needed_across_clusters")
    assert warning.path == "spec.domain"
    assert (
        "local, other" in warning.to_dict("en")["message"] and "no network domain" in warning.to_dict("en")["message"]
    )
    assert "网络域" in warning.to_dict("zh-hans")["message"]
    doc["spec"]["domain"] = "d1"
    assert "domain_needed_across_clusters" not in validate(doc, inventory()).codes()
    one = base_doc()  # every role in one cluster: no warning
    assert "domain_needed_across_clusters" not in validate(one, inventory()).codes()


@pytest.fixture
def sup(tmp_path):
    s = SupervisorProcess(tmp_path / "root", RLARK_LOCAL_STOP_GRACE="3").start()
    yield s
    s.stop()
    cleanup_networks("nod-a", "nod-b")


@needs_root
@pytest.mark.ray
@pytest.mark.django_db
def test_cross_cluster_job_without_domain_does_not_form_and_diagnosis_names_the_cause(sup, admin_user):
    a = isolated_runtime(sup, "nod-a", NODES)
    b = isolated_runtime(sup, "nod-b", NODES)
    a.ping()
    b.ping()
    check = [{"name": "RLARK_RAY_CHECK_TIMEOUT", "value": "15"}]
    a.apply_task(manifest("nj", "header", head=True, total=3, run=RUN, env=check))
    b.apply_task(manifest("nj", "rollout", head=False, replicas=2, rank_start=1, total=3))
    try:
        head_log = wait_for(
            lambda: "ALIVE" in (t := a.read_log("rlark-system", "nj-header-0")) and t, 240, interval=1, what="run"
        )
        assert re.search(r"^ALIVE 1$", head_log, re.M), head_log  # it did not form
        logs = {p: b.read_log("rlark-system", p) for p in ("nj-rollout-0", "nj-rollout-1")}
        for text in logs.values():
            assert "Waiting for head to be reachable at nj-header-ray-head:" in text
            assert "Head is reachable" not in text

        ca = Cluster.objects.create(name="nod-a", runtime="local", status="online", isolated_network=True)
        cb = Cluster.objects.create(name="nod-b", runtime="local", status="online", isolated_network=True)
        job = Job.objects.create(name="nj", owner=admin_user, spec={"spec": {"tasks": []}}, phase="Running")
        th = Task.objects.create(
            job=job,
            template_name="header",
            name="nj-header",
            cluster=ca,
            namespace="rlark-system",
            head=True,
            replicas=1,
        )
        tr = Task.objects.create(
            job=job,
            template_name="rollout",
            name="nj-rollout",
            cluster=cb,
            namespace="rlark-system",
            replicas=2,
            rank_start=1,
            order=1,
        )
        Pod.objects.create(task=th, name="nj-header-0", phase="Running")
        for i in (0, 1):
            Pod.objects.create(task=tr, name=f"nj-rollout-{i}", phase="Running", ordinal=i)
        workers = diagnosis.worker_inputs(job, with_logs=False)
        for w in workers:
            w.log = head_log if w.pod == "nj-header-0" else logs[w.pod]
        result = diagnosis.diagnose_job(job, workers)
        found = [f for f in result.job_findings if f.code == "cross_cluster_no_domain"]
        assert len(found) == 1, [f.code for f in result.job_findings]
        en = found[0].to_dict("en")
        assert "different clusters" in en["title"] and "no network domain" in en["title"], en
        assert "nj-header-ray-head:" in en["detail"] and "nod-a, nod-b" in en["detail"], en
        assert "网络域" in found[0].to_dict("zh-hans")["title"]
        # with a domain the same waiting is not blamed on the missing domain
        job.spec = {"spec": {"domain": "d1", "tasks": []}}
        job.save()
        assert not [f for f in diagnosis.diagnose_job(job, workers).job_findings if f.code == "cross_cluster_no_domain"]
    finally:
        a.delete_task("rlark-system", "nj-header")
        b.delete_task("rlark-system", "nj-rollout")
