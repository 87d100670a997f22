"""Browser: a cluster's back-office page lists what the cluster itself has - a local cluster's
namespaces and StorageClass directories from its real supervisor, marked as managed by the console or only in the
cluster - and an unreachable Kubernetes cluster says so in the page's language. Screenshots (zh and en):
``cluster-contents-*.png`` in test-artifacts/ (and RLARK_SHOTS_DIR)."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import expect

from tests.browser.test_fleet_backoffice_browser import _login
from tests.conftest import free_port, screenshot_dir

pytestmark = [pytest.mark.browser, pytest.mark.e2e]

SETUP = """
import yaml
from clusters.models import Cluster
from clusters.runtime import registry
from clusters.services.inventory import upsert_local_nodes
from storage.models import StorageClass
from tests.clusters.test_local_runtime_support import manifest
c, _ = Cluster.objects.get_or_create(name="cc-local", defaults={"runtime": "local", "status": "online"})
upsert_local_nodes(c, [{"name": "cc-n0", "labels": {}, "capacity": {"cpu": 4}}])
StorageClass.objects.get_or_create(cluster=c, name="oss-a", provider="s3", parameters={"bucket": "b"})
StorageClass.objects.get_or_create(cluster=c, name="unused", provider="s3", parameters={"bucket": "u"})
pvc = {"apiVersion": "v1", "kind": "PersistentVolumeClaim",
       "metadata": {"name": "ckpt", "annotations": {"rlark.io/storage-class": "oss-a"}},
       "spec": {"storageClassName": "oss-a"}}
registry.runtime_for(c).apply_task(manifest(
    "ccjob", "header", head=True, namespace="team-b",
    volumes=[{"name": "ckpt", "persistentVolumeClaim": {"claimName": "ckpt"}}],
    mounts=[{"name": "ckpt", "mountPath": "/ckpt"}], extra_objects=(pvc,),
    command=["bash", "-c", "trap 'exit 0' TERM; sleep 600 & wait"]))
config = {"apiVersion": "v1", "kind": "Config", "current-context": "x",
          "clusters": [{"name": "x", "cluster": {"server": "https://127.0.0.1:PORT"}}],
          "users": [{"name": "x", "user": {"token": "t"}}],
          "contexts": [{"name": "x", "context": {"cluster": "x", "user": "x"}}]}
k, _ = Cluster.objects.get_or_create(name="cc-down", defaults={"runtime": "kubernetes", "status": "offline",
                                                                "kubeconfig": yaml.safe_dump(config)})
print(c.pk, k.pk)
"""
TEARDOWN = """
from clusters.models import Cluster
from clusters.runtime import registry
registry.runtime_for(Cluster.objects.get(name="cc-local")).delete_task("team-b", "ccjob-header", delete_storage=True)
"""


@pytest.fixture(scope="module")
def clusters(console_server):
    out = console_server.manage("shell", "-c", SETUP.replace("PORT", str(free_port())))
    local, down = (int(x) for x in out.stdout.strip().splitlines()[-1].split())
    yield {"local": local, "down": down}
    console_server.manage("shell", "-c", TEARDOWN, check=False)


WORDS = {
    "zh-hans": {
        "managed": "由控制台管理",
        "cluster": "仅在集群中",
        "object": "对象存储",
        "claim": "1 个卷声明",
        "down": "无法连接集群，暂时无法列出其命名空间。",
    },
    "en": {
        "managed": "managed by the console",
        "cluster": "only in the cluster",
        "object": "object storage",
        "claim": "1 claim",
        "down": "The cluster cannot be reached, so its namespaces cannot be listed now.",
    },
}


@pytest.mark.parametrize("lang", ["zh-hans", "en"])
def test_cluster_page_lists_what_the_cluster_has(console_server, clusters, page, lang):
    words = WORDS[lang]
    _login(page, console_server, lang)
    url = f"{console_server.url}/admin/clusters/cluster/{clusters['local']}/change/"
    page.goto(url)
    tables = page.locator("table.rl-contents")
    # the claim directory appears once the Worker has mounted it (the supervisor starts it asynchronously)
    for _ in range(40):
        if page.get_by_text(words["claim"]).count():
            break
        page.wait_for_timeout(500)
        page.reload()
    ns, sc = tables.nth(0), tables.nth(1)
    expect(ns.locator('tr[data-where="cluster"]', has_text="team-b")).to_contain_text(words["cluster"])
    expect(sc.locator('tr[data-where="managed"]', has_text="oss-a")).to_contain_text(words["claim"])
    expect(sc.locator('tr[data-where="managed"]', has_text="oss-a")).to_contain_text(words["managed"])
    expect(sc.locator('tr[data-where="object"]', has_text="unused")).to_contain_text(words["object"])
    page.screenshot(path=str(screenshot_dir() / f"cluster-contents-local-{lang}.png"), full_page=True)

    page.goto(f"{console_server.url}/admin/clusters/cluster/{clusters['down']}/change/")
    error = page.locator(".rl-contents-error").first
    expect(error).to_have_text(words["down"])
    assert not page.locator("table.rl-contents").count()  # no console records dressed up as the cluster's
    if lang == "zh-hans":
        assert not re.search(r"cannot be reached|only in the cluster", page.content())
    page.screenshot(path=str(screenshot_dir() / f"cluster-contents-down-{lang}.png"), full_page=True)
