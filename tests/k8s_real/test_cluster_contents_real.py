"""A cluster's page lists the namespaces and StorageClasses the REAL cluster has, through the
runtime interface with the ``rlark-console`` ServiceAccount of ``deploy/rbac.yaml``: which ones the console manages,
which only exist in the cluster, a console record the cluster lacks; an RBAC without the optional list verbs and an
unreachable API server each give a localized sentence instead of the console's own records."""

from __future__ import annotations

import json

import pytest
import yaml
from django.test import Client
from django.utils import translation

from clusters.services import cluster_contents
from storage.models import StorageClass
from tests.conftest import free_port
from tests.k8s_real.conftest import discard_namespace

pytestmark = [pytest.mark.k8s_real, pytest.mark.django_db(transaction=True), pytest.mark.timeout(180)]


@pytest.fixture
def cluster_objects(control_plane, k8s_namespace):
    """A namespace and two StorageClasses of this test in the cluster (removed afterwards)."""
    suffix = k8s_namespace.name
    other, fast, plain = f"{suffix}-other", f"{suffix}-fast", f"{suffix}-plain"
    control_plane.kubectl("create", "namespace", other)
    docs = [
        {
            "apiVersion": "storage.k8s.io/v1",
            "kind": "StorageClass",
            "metadata": {"name": name, "annotations": annotations},
            "provisioner": "example.com/nfs",
        }
        for name, annotations in ((fast, {}), (plain, {"storageclass.kubernetes.io/is-default-class": "true"}))
    ]
    control_plane.kubectl("apply", "-f", "-", input=yaml.safe_dump_all(docs))
    yield {"other": other, "fast": fast, "plain": plain}
    discard_namespace(control_plane, other)
    control_plane.kubectl("delete", "storageclass", fast, plain, "--ignore-not-found")


def _records(cluster, fast: str) -> None:
    StorageClass.objects.create(
        cluster=cluster, name="fast", provider="kubernetes", parameters={"storage_class_name": fast}
    )
    StorageClass.objects.create(
        cluster=cluster, name="gone", provider="kubernetes", parameters={"storage_class_name": "no-such-class"}
    )
    StorageClass.objects.create(cluster=cluster, name="objects", provider="s3", parameters={"bucket": "b"})


def _page(admin_user, cluster, lang: str) -> str:
    client = Client()
    client.force_login(admin_user)
    resp = client.get(f"/admin/clusters/cluster/{cluster.pk}/change/", HTTP_ACCEPT_LANGUAGE=lang)
    assert resp.status_code == 200
    return resp.content.decode()


def test_page_lists_the_clusters_own_namespaces_and_storage_classes(
    k8s_cluster, k8s_namespace, cluster_objects, admin_user
):
    _records(k8s_cluster, cluster_objects["fast"])
    namespaces, classes = cluster_contents.contents(k8s_cluster)
    assert not namespaces.error and not classes.error, (namespaces.error, classes.error)
    where = {r.name: r.where for r in namespaces.rows}
    assert where[k8s_namespace.name] == "managed"  # the console's namespace, really in the cluster
    assert where[cluster_objects["other"]] == "cluster"  # made by someone else: only in the cluster
    assert where["kube-system"] == "cluster" and where["default"] == "cluster"  # the API server's own
    rows = {r.name: r for r in classes.rows}
    assert rows[cluster_objects["fast"]].where == "managed" and rows[cluster_objects["fast"]].records == "fast"
    assert rows[cluster_objects["fast"]].provisioner == "example.com/nfs"
    assert rows[cluster_objects["plain"]].where == "cluster" and rows[cluster_objects["plain"]].default
    assert rows["no-such-class"].where == "missing" and rows["objects"].where == "object"

    en = _page(admin_user, k8s_cluster, "en")
    assert cluster_objects["other"] in en and "only in the cluster" in en and "managed by the console" in en
    assert "console record, missing in the cluster" in en
    zh = _page(admin_user, k8s_cluster, "zh-hans")
    assert cluster_objects["plain"] in zh and "仅在集群中" in zh and "由控制台管理" in zh
    assert "only in the cluster" not in zh


def test_rbac_without_the_list_verbs_says_so(k8s_cluster, k8s_namespace, control_plane, admin_user):
    """An RBAC applied before this page existed (no ``list namespaces`` / ``list storageclasses``)."""
    role = f"rlark-console-nodes-{k8s_namespace.name}"
    body = json.loads(control_plane.kubectl("get", "clusterrole", role, "-o", "json"))
    body["rules"] = [
        r
        for r in body["rules"]
        if r["resources"] != ["storageclasses"] and not (r["resources"] == ["namespaces"] and "list" in r["verbs"])
    ]
    control_plane.kubectl("replace", "-f", "-", input=json.dumps(body))

    with translation.override("en"):
        namespaces, classes = cluster_contents.contents(k8s_cluster)
    assert not namespaces.rows and not classes.rows
    assert "RBAC" in namespaces.error and "namespaces" in namespaces.error
    assert "RBAC" in classes.error and "StorageClasses" in classes.error
    zh = _page(admin_user, k8s_cluster, "zh-hans")
    assert "RBAC 不允许列出集群的命名空间" in zh


def test_unreachable_cluster_is_a_localized_message_not_the_consoles_records(k8s_cluster, admin_user):
    config = yaml.safe_load(k8s_cluster.kubeconfig)
    config["clusters"][0]["cluster"]["server"] = f"https://127.0.0.1:{free_port()}"  # nothing listens there
    k8s_cluster.kubeconfig = yaml.safe_dump(config)
    k8s_cluster.save()

    namespaces, classes = cluster_contents.contents(k8s_cluster)
    assert namespaces.unreachable and classes.unreachable and not namespaces.rows and not classes.rows
    en = _page(admin_user, k8s_cluster, "en")
    assert "The cluster cannot be reached, so its namespaces cannot be listed now." in en
    zh = _page(admin_user, k8s_cluster, "zh-hans")
    assert "无法连接集群，暂时无法列出其命名空间。" in zh
