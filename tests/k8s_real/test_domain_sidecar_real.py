"""Against the REAL control plane: a Kubernetes job with ``spec.domain`` gets the network agent as
a native sidecar (an init container with ``restartPolicy: Always``), with ``NET_ADMIN`` only, not privileged, no
``hostNetwork``, the cluster's configured agent image, and the member Secret mounted; the real API server accepts the
StatefulSets, the real StatefulSet controller creates Pods that carry it, and they run (kwok)."""

from __future__ import annotations

import base64
import json

import pytest
from rest_framework.test import APIClient

from domains import sidecar as network_sidecar
from domains.models import Domain
from tests.k8s_real.conftest import wait_for
from tests.k8s_real.jobs import document, running, synced, task

pytestmark = [pytest.mark.k8s_real, pytest.mark.django_db(transaction=True), pytest.mark.timeout(180)]


def test_domain_job_pods_carry_the_network_sidecar(k8s_cluster, k8s_namespace, alice, monkeypatch):
    ns = k8s_namespace
    monkeypatch.setenv("RLARK_DOMAIN_RELAY_PUBLIC_HOST", "console.example.com")
    Domain.objects.create(name="d1", cidr="10.100.0.0/16")
    k8s_cluster.network_agent_image = "registry.example.com/rlark/netagent:13"
    k8s_cluster.save(update_fields=["network_agent_image"])
    doc = document(
        "dj",
        task("header", head=True, replicas=1, selector={"kubernetes.io/hostname": "gpu-0"}, role="Actor"),
        task("rollout", head=False, replicas=3, selector={"pool": "gpu"}, role="Rollout"),
    )
    doc["spec"]["domain"] = "d1"
    api = APIClient()
    api.force_authenticate(alice)
    resp = api.post("/api/v1/jobs/", doc, format="json")
    assert resp.status_code == 201, resp.content

    wait_for(lambda: ns.names("statefulsets") == ["dj-header", "dj-rollout"], 20, "both StatefulSets")
    assert {"dj-header-rlark-net", "dj-rollout-rlark-net"} <= set(ns.names("secrets"))
    pods = wait_for(lambda: running(ns, 4), 60, "4 Running Pods")
    for name, pod in pods.items():
        spec = pod["spec"]
        assert not spec.get("hostNetwork"), name
        sidecar = spec["initContainers"][0]
        assert sidecar["name"] == network_sidecar.NAME and sidecar["restartPolicy"] == "Always", sidecar
        assert sidecar["image"] == "registry.example.com/rlark/netagent:13"
        ctx = sidecar["securityContext"]
        assert ctx["capabilities"] == {"add": ["NET_ADMIN"], "drop": ["ALL"]} and ctx["privileged"] is False
        assert ctx["allowPrivilegeEscalation"] is False
        task_name = name.rsplit("-", 1)[0]
        volumes = {v["name"]: v for v in spec["volumes"]}
        assert volumes["rlark-net"]["secret"]["secretName"] == f"{task_name}-rlark-net"
        assert volumes["rlark-net-tun"]["hostPath"] == {"path": "/dev/net/tun", "type": "CharDevice"}
        main = next(c for c in spec["containers"] if c["name"] == "main")
        assert main["securityContext"].get("privileged") is False  # the Worker itself gains nothing
        assert "capabilities" not in main["securityContext"]
        env = {e["name"]: e.get("value") for e in main["env"]}
        if name.startswith("dj-rollout"):
            assert env["RLARK_HEAD_ADDRESS"] == "dj-header-0.rlark-domain"
        else:
            assert env["RLARK_DOMAIN"] == "d1"
        # the runtime reports the sidecar as such
        statuses = {s["name"] for s in pod["status"].get("initContainerStatuses") or []}
        assert network_sidecar.NAME in statuses, pod["status"]

    # The status sync allocates the domain IPs and writes each member's config, key and certificate into its Task's
    # Secret (the real API server's server-side apply, a field manager of its own).
    synced("dj", lambda j: j.tasks.filter(pods__domain_ip__startswith="10.100.").count() >= 4, 60, "domain IPs")

    def secret_data():
        data = (ns.get("secret", "dj-rollout-rlark-net").get("data")) or {}
        return data if "dj-rollout-2.json" in data else None

    data = wait_for(secret_data, 30, "member configs in the Secret")
    config = json.loads(base64.b64decode(data["dj-rollout-0.json"]))
    assert config["ip"].startswith("10.100.") and config["prefix"] == 16
    assert config["relay_host"] == "console.example.com" and config["hosts_file"] == "/etc/hosts"
    assert set(config["hosts"]) == set(pods)
    assert config["username"] == f"rlark-domain:d1:{config['ip']}"
    assert base64.b64decode(data["dj-rollout-0-cert.pub"]).startswith(b"ssh-ed25519-cert-v01@openssh.com")
    assert b"PRIVATE KEY" in base64.b64decode(data["dj-rollout-0.key"])
    header = ns.get("secret", "dj-header-rlark-net").get("data") or {}
    assert "dj-header-0.json" in header and "dj-rollout-0.json" not in header
