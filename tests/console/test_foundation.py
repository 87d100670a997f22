"""Foundation: auth everywhere, bilingual shell, overview with the demo cluster, secrets at rest,
production settings, compose topology."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from django.core.management import call_command
from django.db import connection
from django.urls import URLPattern, URLResolver, get_resolver

ROOT = Path(__file__).resolve().parents[2]


def _iter_paths(patterns, prefix=""):
    """Every concrete URL of the project, with dummy values for path parameters."""
    for p in patterns:
        route = prefix + str(p.pattern)
        if isinstance(p, URLResolver):
            yield from _iter_paths(p.url_patterns, route)
        elif isinstance(p, URLPattern):
            path = re.sub(r"<int:(\w+)>", "1", route)
            path = re.sub(r"<(?:\w+:)?(\w+)>", "x1", path).replace("^", "").replace("$", "")
            if "(?P" in path or "\\" in path:
                continue
            yield "/" + path


PUBLIC = {"/login/", "/i18n/setlang/"}


@pytest.mark.django_db
def test_anonymous_gets_login_redirect_or_401_everywhere(client):
    paths = sorted(set(_iter_paths(get_resolver().url_patterns)))
    assert "/" in paths and "/api/v1/jobs/" in paths or "/" in paths
    checked = 0
    for path in paths:
        if path in PUBLIC or path.startswith("/admin/") and "login" in path:
            continue
        response = client.get(path)
        if path.startswith("/api/"):
            assert response.status_code in (401, 403, 404, 405), (path, response.status_code)
            assert response.status_code != 200
        elif path.startswith("/admin/"):
            assert response.status_code in (302, 404), (path, response.status_code)
        else:
            assert response.status_code == 302, (path, response.status_code)
            assert response["Location"].startswith(("/login/", "/admin/login/")), (path, response["Location"])
        checked += 1
    assert checked >= 5


@pytest.mark.django_db
def test_overview_shows_demo_cluster_and_nodes_after_seed(client):
    call_command("seed_demo", "--password", "demo-pass-123", stdout=open(os.devnull, "w"))
    assert client.login(username="admin", password="demo-pass-123")
    response = client.get("/", HTTP_ACCEPT_LANGUAGE="en")
    html = response.content.decode()
    assert response.status_code == 200
    assert 'data-testid="cluster-local"' in html
    for node in ("local-gpu-0", "local-gpu-1", "local-robot-0"):
        assert node in html
    assert "3 nodes" in html
    assert "16 / 16 GPUs free" in html  # 8 + 8 A100s, the robot node has none


@pytest.mark.django_db
def test_seed_demo_is_idempotent():
    out = open(os.devnull, "w")
    call_command("seed_demo", "--password", "pw-123456789", stdout=out)
    call_command("seed_demo", stdout=out)
    from clusters.models import Cluster, Node

    assert Cluster.objects.filter(name="local").count() == 1
    assert Node.objects.filter(cluster__name="local").count() == 3
    node = Node.objects.get(name="local-gpu-0")
    assert node.labels["kubernetes.io/hostname"] == "local-gpu-0"
    assert node.gpu_model == "A100" and node.category == "cloud"


@pytest.mark.django_db
def test_navigation_is_chinese_by_default_and_english_on_request(client, alice):
    client.force_login(alice)
    zh = client.get("/").content.decode()
    assert "概览" in zh and "集群与节点" in zh and 'lang="zh-hans"' in zh
    en = client.get("/", HTTP_ACCEPT_LANGUAGE="en").content.decode()
    assert "Overview" in en and ("Clusters &amp; Nodes" in en or "Clusters & Nodes" in en)
    # Admin link only for staff
    assert "/admin/" not in zh


@pytest.mark.django_db
def test_language_switch_persists(client, alice):
    client.force_login(alice)
    response = client.post("/i18n/setlang/", {"language": "en", "next": "/"})
    assert response.status_code == 302
    assert "Overview" in client.get("/").content.decode()
    client.post("/i18n/setlang/", {"language": "zh-hans", "next": "/"})
    assert "概览" in client.get("/").content.decode()


@pytest.mark.django_db
def test_login_rate_limited(client, alice):
    for _ in range(5):
        assert client.post("/login/", {"username": "alice", "password": "wrong"}).status_code == 200
    locked = client.post("/login/", {"username": "alice", "password": "alice-pass-1"})
    assert locked.status_code == 429
    from django.core.cache import cache

    cache.clear()
    assert client.post("/login/", {"username": "alice", "password": "alice-pass-1"}).status_code == 302


@pytest.mark.django_db(transaction=True)
def test_secrets_are_encrypted_at_rest():
    from clusters.models import Cluster

    marker = "KUBECONFIG-MARKER-5b1e"
    Cluster.objects.create(name="enc", runtime="kubernetes", kubeconfig=f"apiVersion: v1\n# {marker}\n")
    with connection.cursor() as cursor:
        cursor.execute("SELECT kubeconfig FROM clusters_cluster WHERE name = %s", ["enc"])
        (raw,) = cursor.fetchone()
    assert marker not in raw and raw.startswith("fernet:")
    assert marker in Cluster.objects.get(name="enc").kubeconfig


def test_check_deploy_has_no_warnings_with_production_settings():
    env = {
        **os.environ,
        "DEBUG": "0",
        "RLARK_HTTPS": "1",
        "RLARK_SECRET_KEY": "p" * 20 + "-production-secret-key-with-enough-entropy-0123456789",
        "ALLOWED_HOSTS": "console.example.com",
    }
    result = subprocess.run(
        [sys.executable, "manage.py", "check", "--deploy", "--fail-level", "WARNING"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "no issues" in result.stdout


def test_compose_describes_production_topology():
    compose = yaml.safe_load((ROOT / "docker-compose.yml").read_text())
    services = compose["services"]
    assert {"postgres", "redis", "web", "worker", "beat", "watcher", "ssh"} <= set(services)
    assert services["web"]["command"][:3] == ["python", "manage.py", "serve_web"]  # daphne workers on one port
    assert services["ssh"]["command"][:3] == ["python", "manage.py", "sshgate"]
    assert services["worker"]["command"][:4] == ["celery", "-A", "rlark_console", "worker"]
    assert services["beat"]["command"][3] == "beat"
    env = services["web"]["environment"]
    assert env["DATABASE_URL"].startswith("postgres://rlark:${POSTGRES_PASSWORD")
    # Redis needs a password too: local-runtime Workers share a single-host install's network
    assert env["REDIS_URL"].startswith("redis://:${REDIS_PASSWORD") and env["REDIS_URL"].endswith("@redis:6379/0")
    assert "--requirepass" in services["redis"]["command"]
    # secrets come from the environment, never literals in the file
    assert env["RLARK_ENCRYPTION_KEY"].startswith("${") and env["RLARK_SECRET_KEY"].startswith("${")
    if shutil.which("docker") and subprocess.run(["docker", "compose", "version"], capture_output=True).returncode == 0:
        result = subprocess.run(
            ["docker", "compose", "config", "--quiet"],
            cwd=ROOT,
            capture_output=True,
            text=True,
            env={
                **os.environ,
                "POSTGRES_PASSWORD": "x",
                "REDIS_PASSWORD": "r",
                "RLARK_SECRET_KEY": "y",
                "RLARK_ENCRYPTION_KEY": "z",
            },
        )
        assert result.returncode == 0, result.stderr


@pytest.mark.django_db
def test_api_schema_and_docs_need_login(client, alice):
    assert client.get("/api/schema/").status_code in (401, 403)
    client.force_login(alice)
    schema = client.get("/api/schema/")
    assert schema.status_code == 200 and b"openapi" in schema.content
    docs = client.get("/api/docs/")
    assert docs.status_code == 200 and b"swagger" in docs.content.lower()


@pytest.mark.django_db
def test_not_found_page_is_the_consoles_own_in_both_languages(client, alice):
    client.force_login(alice)
    zh = client.get("/jobs/no-such-job/")
    assert zh.status_code == 404
    html = zh.content.decode()
    assert 'data-testid="not-found"' in html and "未找到" in html and "概览" in html  # navigation stays
    en = client.get("/jobs/no-such-job/", HTTP_ACCEPT_LANGUAGE="en").content.decode()
    assert "Not found" in en and "Back to the overview" in en
