"""A local cluster's page lists what the local runtime really has: the namespaces of the Tasks
its supervisor holds and the StorageClass directories its Workers' claims made, marked against the console's
records; a stopped supervisor is a localized "cannot be reached", not the console's records."""

from __future__ import annotations

import pytest
from django.utils import translation

from clusters.models import Cluster
from clusters.runtime import registry
from clusters.services import cluster_contents
from storage.models import StorageClass
from tests.clusters.test_local_runtime_support import SupervisorProcess, manifest, nodes_spec, wait_for

pytestmark = pytest.mark.django_db

NODES = nodes_spec(("n-a", {"pool": "a"}, {"cpu": 4}))


@pytest.fixture
def sup(tmp_path):
    s = SupervisorProcess(tmp_path / "root").start()
    yield s
    s.stop()


def test_local_runtime_reports_its_namespaces_and_claim_directories(sup, monkeypatch, client, admin_user):
    cluster = Cluster.objects.create(name="c1", runtime="local", status="online", namespace="rlark-system")
    rt = sup.runtime(NODES)
    monkeypatch.setattr(registry, "runtime_for", lambda c: rt)
    pvc = {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": {"name": "ckpt-claim", "annotations": {"rlark.io/storage-class": "oss-a"}},
        "spec": {"storageClassName": "oss-a"},
    }
    rt.apply_task(
        manifest(
            "cc",
            "header",
            head=True,
            namespace="team-b",
            volumes=[{"name": "ckpt", "persistentVolumeClaim": {"claimName": "ckpt-claim"}}],
            mounts=[{"name": "ckpt", "mountPath": "/ckpt"}],
            extra_objects=(pvc,),
            command=["bash", "-c", "echo ok > /ckpt/x; trap 'exit 0' TERM; sleep 600 & wait"],
        )
    )
    wait_for(lambda: (sup.root / "storage" / "c1" / "oss-a" / "ckpt-claim" / "x").exists(), 20, what="claim")
    StorageClass.objects.create(cluster=cluster, name="oss-a", provider="s3", parameters={"bucket": "b"})
    StorageClass.objects.create(cluster=cluster, name="never-used", provider="s3", parameters={"bucket": "c"})

    namespaces, classes = cluster_contents.contents(cluster)
    # the Task runs in team-b (only the runtime knows); the console's own namespace has no Task there
    assert {(r.name, r.where) for r in namespaces.rows} == {("rlark-system", "missing"), ("team-b", "cluster")}
    rows = {r.name: r for r in classes.rows}
    assert not classes.error, classes.error
    assert rows["oss-a"].where == "managed" and rows["oss-a"].claims == 1
    assert rows["never-used"].where == "object"
    client.force_login(admin_user)
    zh = client.get(f"/admin/clusters/cluster/{cluster.pk}/change/").content.decode()
    assert "team-b" in zh and "仅在集群中" in zh and "1 个卷声明" in zh
    en = client.get(f"/admin/clusters/cluster/{cluster.pk}/change/", HTTP_ACCEPT_LANGUAGE="en").content.decode()
    assert "1 claim" in en and "only in the cluster" in en
    rt.delete_task("team-b", "cc-header")

    sup.stop()
    with translation.override("en"):
        namespaces, classes = cluster_contents.contents(cluster)
    assert namespaces.unreachable and not namespaces.rows and not classes.rows
    assert classes.error == "The cluster cannot be reached, so its StorageClasses cannot be listed now."
