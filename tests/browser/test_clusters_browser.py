"""Browser: an admin registers a Kubernetes cluster (the fake API server) in the back office by pasting its
kubeconfig, sees its nodes on the Clusters & Nodes page, uses the match box, cordons a node; zh and en
screenshots. The kubeconfig's marker token never shows up again."""

from __future__ import annotations

import pytest
import yaml
from playwright.sync_api import expect

from tests.conftest import ARTIFACTS, E2E_ADMIN_PASSWORD
from tests.fake_k8s import FakeKubernetes
from tests.fake_k8s.fixtures import MARKER_TOKEN

pytestmark = [pytest.mark.browser, pytest.mark.e2e]


@pytest.fixture
def fake_cluster():
    fake = FakeKubernetes(token=MARKER_TOKEN).start()
    fake.add_node(
        "gpu-a-0",
        {"pool": "fake-head", "rlark.io/gpu-model": "NVIDIA A100", "rlark.io/node-category": "cloud"},
        {"nvidia.com/gpu": 8, "cpu": 64, "memory": "512Gi"},
    )
    fake.add_node(
        "gpu-a-1",
        {"pool": "fake-rollout", "rlark.io/gpu-model": "NVIDIA A100"},
        {"nvidia.com/gpu": 8, "cpu": 64, "memory": "512Gi"},
    )
    fake.add_node(
        "franka-a-1",
        {"pool": "fake-rollout", "rlark.io/node-category": "robot", "rlark.io/device-model": "Franka"},
        {"rlinf.io/device-franka": 1, "cpu": 8, "memory": "16Gi"},
    )
    yield fake
    fake.stop()


def login(page, url):
    page.goto(url + "/login/")
    page.fill("input[name=username]", "admin")
    page.fill("input[name=password]", E2E_ADMIN_PASSWORD)
    page.click("button[type=submit]")
    page.wait_for_load_state("load")


def test_register_cluster_see_nodes_match_and_cordon(console_server, page, fake_cluster):
    ARTIFACTS.mkdir(exist_ok=True)
    login(page, console_server.url)
    page.goto(console_server.url + "/admin/clusters/cluster/add/")
    page.fill("input[name=name]", "gpu-a")
    page.select_option("select[name=runtime]", "kubernetes")
    page.fill("input[name=pod_cidr]", "10.244.0.0/16")
    page.fill("textarea[name=kubeconfig_text]", yaml.safe_dump(fake_cluster.kubeconfig()))
    page.click("input[name=_save]")
    page.wait_for_load_state("load")
    assert MARKER_TOKEN not in page.content()
    link = page.locator("#result_list").get_by_role("link", name="gpu-a", exact=True)
    expect(link).to_be_visible()
    link.click()
    page.wait_for_load_state("load")
    assert MARKER_TOKEN not in page.content()
    page.screenshot(path=str(ARTIFACTS / "clusters-admin-change-zh.png"), full_page=True)

    page.goto(console_server.url + "/clusters/")
    block = page.locator('[data-testid="cluster-block"][data-cluster="gpu-a"]')
    expect(block.locator('[data-testid="node-row"]')).to_have_count(3)
    expect(block.get_by_text("云算力").first).to_be_visible()
    page.fill('[data-testid="match-input"]', "pool=fake-rollout")
    expect(page.locator('[data-testid="match-count"]')).to_have_text("2")
    expect(page.locator('[data-testid="match-clusters"]')).to_contain_text("gpu-a")
    page.once("dialog", lambda d: d.accept())
    block.locator('[data-node="gpu-a-1"] button', has_text="封锁").click()
    page.wait_for_load_state("load")
    expect(page.locator('[data-node="gpu-a-1"] [data-testid="node-cordoned"]')).to_be_visible()
    assert fake_cluster.get("nodes", "", "gpu-a-1")["spec"]["unschedulable"] is True
    page.fill('[data-testid="match-input"]', "pool=fake-rollout")
    cells = page.locator('[data-testid="match-clusters"] tbody tr td')
    expect(cells.nth(0)).to_have_text("gpu-a")
    expect(cells.nth(1)).to_have_text("2")
    expect(cells.nth(2)).to_have_text("1")  # the cordoned node is not schedulable
    assert MARKER_TOKEN not in page.content()
    page.screenshot(path=str(ARTIFACTS / "clusters-nodes-zh.png"), full_page=True)

    page.select_option('[data-testid="language-select"]', "en")
    page.wait_for_load_state("load")
    expect(page.locator("h1")).to_have_text("Clusters & Nodes")
    page.fill('[data-testid="match-input"]', "pool=fake-rollout")
    expect(page.locator('[data-testid="match-count"]')).to_have_text("2")
    page.screenshot(path=str(ARTIFACTS / "clusters-nodes-en.png"), full_page=True)

    # the cluster's API goes away: next sync shows it disconnected with the reason
    fake_cluster.refuse_connections()
    page.goto(console_server.url + "/admin/clusters/cluster/")
    page.locator("#result_list tr", has_text="gpu-a").locator("input[name=_selected_action]").check()
    page.select_option("select[name=action]", "sync_nodes")
    page.click("button[name=index]")
    page.wait_for_load_state("load")
    page.goto(console_server.url + "/clusters/")
    expect(page.locator('[data-cluster="gpu-a"] [data-testid="cluster-reason"]')).to_contain_text("connection refused")
    page.screenshot(path=str(ARTIFACTS / "clusters-offline-en.png"), full_page=True)
    page.select_option('[data-testid="language-select"]', "zh-hans")
    page.wait_for_load_state("load")
    fake_cluster.accept_connections()
