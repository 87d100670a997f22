"""Storage classes per cluster (upstream 13): validation, secret write-only, API filtered by
cluster, the user page without secrets, the local-runtime directory and the back-office form."""

from __future__ import annotations

from pathlib import Path

import pytest
from django.conf import settings

from clusters.models import Cluster
from storage import services
from storage.models import StorageClass

pytestmark = pytest.mark.django_db
SECRET = "S3-SECRET-MARKER-7f3a"


@pytest.fixture
def clusters():
    return Cluster.objects.create(name="beijing"), Cluster.objects.create(name="shanghai", allow_host_path=True)


def _s3(cluster, name="ckpt", **extra):
    data = {
        "cluster": cluster.name,
        "name": name,
        "provider": "s3",
        "endpoint": "https://s3.example.com",
        "bucket": "rl-checkpoints",
        "region": "cn-north-1",
        "access_key_id": "AKIDEXAMPLE",
        "secret": SECRET,
        **extra,
    }
    return services.save_storage_class(data)


def test_s3_class_secret_encrypted_and_kept_on_update(clusters):
    sc = _s3(clusters[0])
    assert sc.secret == SECRET and "secret" not in str(sc.parameters).lower()
    assert StorageClass.objects.get(pk=sc.pk).secret == SECRET
    sc = services.save_storage_class({"description": "checkpoints", "secret": ""}, sc)
    assert sc.secret == SECRET and sc.description == "checkpoints"
    sc = services.save_storage_class({"secret": "NEW-SECRET"}, sc)
    assert StorageClass.objects.get(pk=sc.pk).secret == "NEW-SECRET"
    with pytest.raises(services.StorageError) as err:
        services.save_storage_class({"name": "renamed"}, sc)
    assert "name" in err.value.errors


def test_validation_errors(clusters):
    with pytest.raises(services.StorageError) as err:
        services.save_storage_class({"cluster": "nope", "name": "Bad_Name", "provider": "s3", "bucket": "x"})
    assert set(err.value.errors) >= {"cluster", "name", "bucket", "endpoint", "access_key_id", "secret"}
    with pytest.raises(services.StorageError) as err:
        _s3(clusters[0], endpoint="ftp://user:pw@host")
    assert "endpoint" in err.value.errors
    with pytest.raises(services.StorageError) as err:
        services.save_storage_class({"cluster": "beijing", "name": "k", "provider": "kubernetes"})
    assert "storage_class_name" in err.value.errors
    _s3(clusters[0])
    with pytest.raises(services.StorageError):
        _s3(clusters[0])  # same name on the same cluster
    _s3(clusters[1])  # same name on another cluster is fine


def test_kubernetes_class_and_queries(clusters):
    k = services.save_storage_class(
        {"cluster": clusters[1], "name": "fast", "provider": "kubernetes", "storage_class_name": "local-nvme"}
    )
    _s3(clusters[0])
    assert [sc.name for sc in services.classes_for_cluster(clusters[1])] == ["fast"]
    assert [sc.name for sc in services.classes_for_cluster("beijing")] == ["ckpt"]
    assert k.secret == "" and k.parameters == {"storage_class_name": "local-nvme"}
    assert services.local_path(k) == Path(settings.RLARK_LOCAL_ROOT) / "storage" / "shanghai" / "fast"


def test_api_list_filter_and_no_secret(client, clusters, alice, admin_user):
    _s3(clusters[0])
    services.save_storage_class(
        {"cluster": "shanghai", "name": "fast", "provider": "kubernetes", "storage_class_name": "nvme"}
    )
    client.force_login(alice)
    rows = client.get("/api/v1/storage-classes/?cluster=beijing").json()
    assert [(r["cluster"], r["name"], r["has_secret"]) for r in rows] == [("beijing", "ckpt", True)]
    assert len(client.get("/api/v1/storage-classes/").json()) == 2
    assert SECRET not in client.get("/api/v1/storage-classes/").content.decode()
    assert client.post("/api/v1/storage-classes/", {"cluster": "beijing"}).status_code == 403
    client.force_login(admin_user)
    body = {
        "cluster": "shanghai",
        "name": "obj",
        "provider": "s3",
        "endpoint": "http://minio:9000",
        "bucket": "data",
        "access_key_id": "minio",
        "secret": SECRET,
        "path_style": True,
    }
    resp = client.post("/api/v1/storage-classes/", body, content_type="application/json")
    assert resp.status_code == 201, resp.content
    assert SECRET not in resp.content.decode() and resp.json()["parameters"]["path_style"] is True
    missing = client.post(
        "/api/v1/storage-classes/", {**body, "name": "o2", "secret": ""}, content_type="application/json"
    )
    assert missing.status_code == 400 and "secret" in missing.json()["detail"]
    pk = resp.json()["id"]
    resp = client.put(f"/api/v1/storage-classes/{pk}/", {"description": "d"}, content_type="application/json")
    assert resp.status_code == 200 and StorageClass.objects.get(pk=pk).secret == SECRET
    assert client.delete(f"/api/v1/storage-classes/{pk}/").status_code == 204


def test_user_page_lists_classes_without_secret(client, clusters, alice):
    _s3(clusters[0])
    client.force_login(alice)
    html = client.get("/storage/").content.decode()
    assert "ckpt" in html and "rl-checkpoints" in html and SECRET not in html and "AKIDEXAMPLE" not in html


def test_admin_form_secret_write_only(client, clusters, admin_user):
    client.force_login(admin_user)
    data = {
        "cluster": clusters[0].pk,
        "name": "adm",
        "provider": "s3",
        "description": "",
        "endpoint": "https://s3.example.com",
        "bucket": "bucket-a",
        "region": "",
        "access_key_id": "AK",
        "secret_input": SECRET,
        "storage_class_name": "",
    }
    resp = client.post("/admin/storage/storageclass/add/", data)
    assert resp.status_code == 302, resp.content.decode()[:2000]
    sc = StorageClass.objects.get(name="adm")
    assert sc.secret == SECRET and sc.parameters["bucket"] == "bucket-a"
    page = client.get(f"/admin/storage/storageclass/{sc.pk}/change/").content.decode()
    assert SECRET not in page and "bucket-a" in page
    resp = client.post(
        f"/admin/storage/storageclass/{sc.pk}/change/", {**data, "secret_input": "", "bucket": "bucket-b"}
    )
    assert resp.status_code == 302
    sc.refresh_from_db()
    assert sc.secret == SECRET and sc.parameters["bucket"] == "bucket-b"
