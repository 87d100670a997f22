"""Browser: the fleet back office in headless Chromium - the capacity nodes view (pagination, sort by
free GPUs, readiness filter, system nodes hidden), a batch metadata edit on filtered nodes, and the console's
header with its language switch on every changed admin page. Screenshots (zh and en) go to
test-artifacts/fleet-*.png and, when RLARK_SHOTS_DIR is set, there too."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest
from playwright.sync_api import expect

from tests.conftest import ARTIFACTS, E2E_ADMIN_PASSWORD

pytestmark = [pytest.mark.browser, pytest.mark.e2e]

SETUP = """
from clusters.models import Cluster, Node
from clusters.services.inventory import upsert_local_nodes
from django.contrib.auth import get_user_model
from sshkeys.models import SSHPublicKey
from accounts import services as tokens
if not Cluster.objects.filter(name="fleet").exists():
    fleet = Cluster.objects.create(name="fleet", runtime="local", status="online", location="Shenzhen B2",
                                   contact="ops@example.com", description="GPU fleet")
    specs = [{"name": f"f-{i:03d}", "labels": {"pool": "batch" if i < 12 else "bulk"},
              "capacity": {"nvidia.com/gpu": 8, "cpu": 64}} for i in range(130)]
    specs.append({"name": "f-cp", "labels": {"node-role.kubernetes.io/control-plane": ""}, "capacity": {"cpu": 8}})
    upsert_local_nodes(fleet, specs)
    for i, n in enumerate(Node.objects.filter(cluster=fleet).order_by("name")):
        n.used = {"nvidia.com/gpu": i % 9}
        n.online = i % 10 != 3
        n.conditions = [{"type": "Ready", "status": "True"}, {"type": "DiskPressure", "status": str(i == 5)}]
        n.save()
    u = get_user_model().objects.create_user("carol", password="carol-Passw0rd-x")
    SSHPublicKey.objects.create(owner=u, name="carol-laptop", key="ssh-ed25519 AAAA", fingerprint="SHA256:carol")
    tokens.create_token(u, "carol-ci")
print(Cluster.objects.get(name="fleet").pk, get_user_model().objects.get(username="carol").pk,
      Node.objects.get(name="f-005").pk)
"""

SHOTS = [Path(p) for p in [os.environ.get("RLARK_SHOTS_DIR", "")] if p]


@pytest.fixture(scope="module")
def fleet(console_server):
    out = console_server.manage("shell", "-c", SETUP)
    cluster, user, node = (int(x) for x in out.stdout.strip().splitlines()[-1].split())
    return {"cluster": cluster, "user": user, "node": node}


def _login(page, console_server, lang: str) -> None:
    page.context.add_cookies([{"name": "django_language", "value": lang, "url": console_server.url}])
    page.goto(console_server.url + "/admin/")
    if "/login/" in page.url:
        page.fill("input[name=username]", "admin")
        page.fill("input[name=password]", E2E_ADMIN_PASSWORD)
        page.click("button[type=submit]")
        page.wait_for_url("**/admin/")


def _shot(page, name: str) -> None:
    ARTIFACTS.mkdir(exist_ok=True)
    for d in [ARTIFACTS, *SHOTS]:
        d.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(d / f"fleet-{name}.png"), full_page=True)


def _rows(page) -> list[str]:
    return page.locator("#result_list tbody tr th a").all_inner_texts()


@pytest.mark.parametrize("lang", ["zh-hans", "en"])
def test_nodes_view_for_capacity(console_server, fleet, page, lang):
    _login(page, console_server, lang)
    base = f"{console_server.url}/admin/clusters/node/?cluster__id__exact={fleet['cluster']}"
    page.goto(base)
    expect(page.locator(".topbar")).to_be_visible()  # the console's header, with its language switch
    expect(page.locator('[data-testid="language-select"]')).to_be_visible()
    names = _rows(page)
    assert len(names) == 100 and "f-cp" not in names  # paginated; the control-plane node is hidden
    heading = "空闲 GPU" if lang == "zh-hans" else "GPUs free"
    page.locator("#result_list thead th", has_text=heading).locator("div.text a").click()  # sort ascending
    page.locator("#result_list thead th", has_text=heading).locator("div.text a").click()  # then descending
    page.wait_for_load_state()
    first_free = page.locator("#result_list tbody tr td.field-free_gpus").first.inner_text()
    assert first_free == "8", first_free
    _shot(page, f"nodes-{lang}")
    # readiness filter: every row shown has the chosen readiness (the local runtime may report its virtual nodes
    # back as Ready at any sync, so the not-ready set can be empty)
    labels = {
        "ready": "就绪" if lang == "zh-hans" else "Ready",
        "not_ready": "未就绪" if lang == "zh-hans" else "Not ready",
    }
    page.goto(base + "&ready=ready")
    shown = page.locator("#result_list tbody td.field-readiness").all_inner_texts()
    assert shown and all(t.startswith(labels["ready"]) for t in shown), shown
    page.goto(base + "&ready=not_ready")
    shown = page.locator("#result_list tbody td.field-readiness").all_inner_texts()
    assert all(t.startswith(labels["not_ready"]) for t in shown), shown
    page.goto(base + "&system=show")
    page.goto(page.url + "&p=2")
    assert "f-cp" in _rows(page)
    page.goto(f"{console_server.url}/admin/clusters/node/{fleet['node']}/change/")
    expect(page.locator("body")).to_contain_text("f-005")
    _shot(page, f"node-detail-{lang}")


def test_batch_edit_sets_one_field_on_filtered_nodes(console_server, fleet, page):
    _login(page, console_server, "zh-hans")
    page.goto(f"{console_server.url}/admin/clusters/node/?cluster__id__exact={fleet['cluster']}")
    label_box = page.locator('[data-testid="label-filter"] input[name=label]')
    label_box.fill("pool=batch")
    label_box.press("Enter")
    page.wait_for_url(re.compile(r"label=pool%3Dbatch|label=pool=batch"))
    assert f"cluster__id__exact={fleet['cluster']}" in page.url  # the other filters are kept
    rows = _rows(page)
    assert 10 <= len(rows) <= 12 and all(r.startswith("f-0") for r in rows), rows
    n = len(rows)
    page.locator("#action-toggle").check()
    page.select_option("select[name=action]", "set_metadata")
    page.locator("button[name=index]").click()
    expect(page.locator('[data-testid="metadata-count"]')).to_contain_text(f"将修改 {n} 个节点")
    page.select_option("select[name=field]", "gpu_model")
    page.fill("input[name=value]", "H20")
    _shot(page, "batch-form-zh")
    page.locator('[data-testid="metadata-apply"]').click()
    expect(page.locator(".messagelist")).to_contain_text(f"已修改 {n} 个节点")
    page.goto(f"{console_server.url}/admin/clusters/node/?cluster__id__exact={fleet['cluster']}&gpu_model=H20")
    assert sorted(_rows(page)) == sorted(rows)
    page.goto(f"{console_server.url}/admin/accounts/auditevent/?q=node.metadata")
    expect(page.locator("#result_list")).to_contain_text(f"count={n}")
    _shot(page, "batch-audit-zh")
    page.context.add_cookies([{"name": "django_language", "value": "en", "url": console_server.url}])
    page.goto(f"{console_server.url}/admin/clusters/node/?cluster__id__exact={fleet['cluster']}&label=pool%3Dbatch")
    page.locator("#action-toggle").check()
    page.select_option("select[name=action]", "set_metadata")
    page.locator("button[name=index]").click()
    page.select_option("select[name=field]", "gpu_model")
    page.select_option("select[name=operation]", "remove")
    _shot(page, "batch-form-en")
    page.locator('[data-testid="metadata-apply"]').click()
    expect(page.locator(".messagelist")).to_contain_text(f"Metadata changed on {n} nodes")


@pytest.mark.parametrize("lang", ["zh-hans", "en"])
def test_changed_admin_pages_keep_the_console_look(console_server, fleet, page, lang):
    _login(page, console_server, lang)
    pages = [
        ("index", "/admin/"),
        ("clusters", "/admin/clusters/cluster/"),
        ("cluster-detail", f"/admin/clusters/cluster/{fleet['cluster']}/change/"),
        ("users", "/admin/auth/user/"),
        ("user-detail", f"/admin/auth/user/{fleet['user']}/change/"),
        ("ssh-keys", "/admin/sshkeys/sshpublickey/"),
    ]
    expected = {
        "cluster-detail": ("健康历史", "Health history"),
        "user-detail": ("该用户的任务", "obs of this user"),
    }
    for slug, path in pages:
        resp = page.goto(console_server.url + path)
        assert resp.status == 200, (path, resp.status)
        expect(page.locator(".topbar .brand")).to_be_visible()
        expect(page.locator('[data-testid="language-select"]')).to_have_value(lang)
        if slug in expected:
            expect(page.locator("body")).to_contain_text(expected[slug][0 if lang == "zh-hans" else 1])
        _shot(page, f"{slug}-{lang}")
    page.goto(f"{console_server.url}/admin/auth/user/{fleet['user']}/change/")
    for text in ("carol-laptop", "carol-ci"):
        expect(page.locator("body")).to_contain_text(text)
