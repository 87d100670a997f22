"""No secret readable anywhere: the S3 secret, registry password and kubeconfig never
appear in any page or API response (every enumerated route and every back-office page, as an admin) and are
not stored in plain text (every row of every table is searched for the marker strings)."""

from __future__ import annotations

import re

import pytest
from django.contrib import admin
from django.db import connection
from django.urls import reverse

from accounts import audit
from clusters.models import Cluster, ImageRegistry
from storage import services as storage_services
from storage.models import StorageClass
from tests.accounts.test_permissions import _fill, _routes

S3_SECRET = "S3SECRETMARKERq1w2e3"
REGISTRY_PASSWORD = "REGPASSWORDMARKERz9x8"
KUBECONFIG_TOKEN = "KUBECONFIGTOKENMARKERk7"
MARKERS = (S3_SECRET, REGISTRY_PASSWORD, KUBECONFIG_TOKEN)
KUBECONFIG = f"""apiVersion: v1
kind: Config
clusters: [{{name: c, cluster: {{server: "https://127.0.0.1:6443"}}}}]
users: [{{name: u, user: {{token: {KUBECONFIG_TOKEN}}}}}]
contexts: [{{name: c, context: {{cluster: c, user: u}}}}]
current-context: c
"""


@pytest.fixture
def secrets_everywhere(admin_user):
    cluster = Cluster.objects.create(name="secret-cluster", runtime="kubernetes", kubeconfig=KUBECONFIG)
    sc = storage_services.save_storage_class(
        {
            "cluster": cluster,
            "name": "objects",
            "provider": "s3",
            "endpoint": "https://s3.example.com",
            "bucket": "bucket-x",
            "access_key_id": "AKID",
            "secret": S3_SECRET,
        },
        actor=admin_user,
    )
    reg = storage_services.save_registry(
        {"name": "corp", "registry": "registry.example.com", "username": "bot", "password": REGISTRY_PASSWORD},
        actor=admin_user,
    )
    audit.record(admin_user, "cluster.create", "cluster", cluster.name)
    return cluster, sc, reg


def _assert_clean(text: str, where: str) -> None:
    for marker in MARKERS:
        assert marker not in text, f"{marker} readable in {where}"


@pytest.mark.django_db
def test_values_round_trip_but_are_encrypted_at_rest(secrets_everywhere):
    cluster, sc, reg = secrets_everywhere
    assert Cluster.objects.get(pk=cluster.pk).kubeconfig == KUBECONFIG
    assert StorageClass.objects.get(pk=sc.pk).secret == S3_SECRET
    assert ImageRegistry.objects.get(pk=reg.pk).password == REGISTRY_PASSWORD
    with connection.cursor() as cur:
        cur.execute("SELECT secret FROM storage_storageclass")
        assert cur.fetchone()[0].startswith("fernet:")
        cur.execute("SELECT password FROM clusters_imageregistry")
        assert cur.fetchone()[0].startswith("fernet:")
        cur.execute("SELECT kubeconfig FROM clusters_cluster")
        assert cur.fetchone()[0].startswith("fernet:")


@pytest.mark.django_db
def test_database_dump_holds_no_plaintext_secret(secrets_everywhere):
    dumped = 0
    with connection.cursor() as cur:
        for table in connection.introspection.table_names():
            cur.execute(f"SELECT * FROM {connection.ops.quote_name(table)}")
            for row in cur.fetchall():
                text = " ".join(str(v) for v in row)
                _assert_clean(text, f"table {table}")
                dumped += 1
    assert dumped > 0


@pytest.mark.django_db
def test_no_page_or_api_response_shows_a_secret(client, admin_user, secrets_everywhere):
    cluster, sc, reg = secrets_everywhere
    client.force_login(admin_user)
    seen = 0
    for route, _name in _routes():
        if route.startswith(("logout/", "i18n/")):
            continue
        candidates = {_fill(route, "x")}
        # fill object parameters with the real objects holding the secrets
        candidates.add("/" + re.sub(r"<(?:\w+:)?(?:pk|id)>", str(sc.pk), route))
        candidates.add("/" + re.sub(r"<(?:\w+:)?(?:name|cluster|registry)>", cluster.name, route))
        candidates.add("/" + re.sub(r"<(?:\w+:)?name>", reg.name, route))
        for path in candidates:
            if "<" in path:
                continue
            resp = client.get(path)
            _assert_clean(resp.content.decode(errors="replace"), f"GET {path}")
            seen += 1
    for model, model_admin in admin.site._registry.items():
        meta = model._meta
        pages = [reverse(f"admin:{meta.app_label}_{meta.model_name}_changelist")]
        if model_admin.has_add_permission(type("R", (), {"user": admin_user})()):
            pages.append(reverse(f"admin:{meta.app_label}_{meta.model_name}_add"))
        for obj in model.objects.all()[:5]:
            pages.append(reverse(f"admin:{meta.app_label}_{meta.model_name}_change", args=[obj.pk]))
            pages.append(reverse(f"admin:{meta.app_label}_{meta.model_name}_history", args=[obj.pk]))
        for page in pages:
            resp = client.get(page)
            _assert_clean(resp.content.decode(errors="replace"), f"admin {page}")
            seen += 1
    assert seen > 10


@pytest.mark.django_db
def test_runtime_helpers_are_the_only_way_to_the_secret(secrets_everywhere):
    """The runtimes get the values through explicit helpers (never through API serializers)."""
    _cluster, sc, _reg = secrets_everywhere
    assert storage_services.s3_credentials(sc)["secret_access_key"] == S3_SECRET
    pull = storage_services.pull_secret_for_image("registry.example.com/team/img:1")
    assert REGISTRY_PASSWORD in pull.dockerconfigjson
    assert S3_SECRET not in str(storage_services.public_parameters(sc))


@pytest.mark.django_db(transaction=True)
def test_native_database_dump_holds_no_plaintext_secret(secrets_everywhere, tmp_path):
    """The backend's own dump (``sqlite3 .dump`` / ``pg_dump``) of the database, searched for the markers."""
    import shutil
    import subprocess

    if connection.vendor == "sqlite":
        connection.ensure_connection()
        dump = "\n".join(connection.connection.iterdump())
    elif connection.vendor == "postgresql" and shutil.which("pg_dump"):
        s = connection.settings_dict
        cmd = ["pg_dump", "-h", s["HOST"] or "127.0.0.1", "-p", str(s["PORT"] or 5432), "-U", s["USER"], s["NAME"]]
        env = {"PGPASSWORD": s.get("PASSWORD") or "", "PATH": "/usr/bin:/bin:/usr/local/bin"}
        dump = subprocess.run(cmd, check=True, capture_output=True, text=True, timeout=120, env=env).stdout
    else:
        pytest.skip("no native dump tool for this database")
    assert "fernet:" in dump and "secret-cluster" in dump  # the dump really contains the rows
    _assert_clean(dump, "database dump")
