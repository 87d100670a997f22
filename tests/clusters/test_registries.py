"""Image registries (upstream 14): prefix matching, pull secrets, the wizard warning, API without
passwords."""

from __future__ import annotations

import base64
import json

import pytest

from clusters.models import ImageRegistry
from storage import services

pytestmark = pytest.mark.django_db
PASSWORD = "REGISTRY-PASSWORD-MARKER-91c"


def test_normalize_image():
    assert services.normalize_image("ubuntu:22.04") == "docker.io/library/ubuntu:22.04"
    assert services.normalize_image("rlinf/rlinf:v0.3") == "docker.io/rlinf/rlinf:v0.3"
    assert services.normalize_image("Registry.Example.com/rl/img:1") == "registry.example.com/rl/img:1"
    assert services.normalize_image("localhost:5000/x") == "localhost:5000/x"
    assert services.normalize_registry("https://Registry.Example.com/team/") == "registry.example.com/team"
    with pytest.raises(services.StorageError):
        services.normalize_registry("bad host!")


def test_longest_prefix_match_and_pull_secret():
    services.save_registry({"name": "hub", "registry": "docker.io/library", "public": True})
    services.save_registry(
        {"name": "corp", "registry": "registry.example.com", "username": "bot", "password": PASSWORD}
    )
    services.save_registry(
        {"name": "corp-rl", "registry": "registry.example.com/rl", "username": "rl", "password": PASSWORD + "2"}
    )
    assert services.registry_for_image("ubuntu:22.04").name == "hub"
    assert services.registry_for_image("registry.example.com/rlinf:v0.3.0-cuda12.4").name == "corp"
    assert services.registry_for_image("registry.example.com/rl/trainer:1").name == "corp-rl"
    assert services.registry_for_image("registry.example.com/rlx/trainer:1").name == "corp"  # path boundary
    assert services.registry_for_image("quay.io/x/y:1") is None
    secret = services.pull_secret_for_image("registry.example.com/rlinf:v1")
    auths = json.loads(secret.dockerconfigjson)["auths"]
    assert secret.name == "rlark-registry-corp"
    assert base64.b64decode(auths["registry.example.com"]["auth"]).decode() == f"bot:{PASSWORD}"
    assert services.pull_secret_for_image("ubuntu:22.04") is None


def test_wizard_warning():
    services.save_registry({"name": "hub", "registry": "docker.io/library", "public": True})
    services.save_registry({"name": "nocreds", "registry": "registry.internal"})
    services.save_registry({"name": "creds", "registry": "registry.example.com", "username": "u", "password": "p"})
    assert services.image_pull_warning("nginx:1.27") is None
    assert services.image_pull_warning("registry.example.com/a:1") is None
    warn = services.image_pull_warning("registry.internal/team/img:1")
    assert warn and "registry.internal" in warn
    assert "quay.io" in services.image_pull_warning("quay.io/org/img:2")
    assert "docker.io" in services.image_pull_warning("someone/private:1")  # Docker Hub, not library


def test_api_admin_only_and_password_never_returned(client, alice, admin_user):
    client.force_login(alice)
    assert client.get("/api/v1/image-registries/").status_code == 403
    check = client.get("/api/v1/image-registries/check/?image=quay.io/a/b:1").json()
    assert check["warning"] and check["registry"] is None
    client.force_login(admin_user)
    body = {"name": "corp", "registry": "registry.example.com", "username": "bot", "password": PASSWORD}
    resp = client.post("/api/v1/image-registries/", body, content_type="application/json")
    assert resp.status_code == 201 and PASSWORD not in resp.content.decode()
    assert resp.json()["has_password"] is True
    assert client.post("/api/v1/image-registries/", body, content_type="application/json").status_code == 400
    for url in ("/api/v1/image-registries/", "/api/v1/image-registries/corp/"):
        assert PASSWORD not in client.get(url).content.decode()
    resp = client.put("/api/v1/image-registries/corp/", {"username": "bot2"}, content_type="application/json")
    assert resp.status_code == 200
    reg = ImageRegistry.objects.get(name="corp")
    assert (reg.username, reg.password) == ("bot2", PASSWORD)
    assert client.get("/api/v1/image-registries/nope/").status_code == 404
    assert client.delete("/api/v1/image-registries/corp/").status_code == 204


def test_reserved_name():
    with pytest.raises(services.StorageError) as err:
        services.save_registry({"name": "check", "registry": "r.example.com"})
    assert "name" in err.value.errors
