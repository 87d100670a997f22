"""Browser: seed 04 第二步 on the running console: add a key, see its fingerprint (as ssh-keygen prints it), a
private key is refused with the .pub hint, delete with confirmation; zh and en screenshots."""

from __future__ import annotations

import shutil
import subprocess

import pytest
from playwright.sync_api import expect

from tests.conftest import ARTIFACTS, E2E_ADMIN_PASSWORD

pytestmark = [pytest.mark.browser, pytest.mark.e2e]


@pytest.fixture(scope="module")
def keypair(tmp_path_factory):
    if shutil.which("ssh-keygen") is None:
        pytest.skip("ssh-keygen not installed")
    path = tmp_path_factory.mktemp("bkeys") / "id_ed25519"
    subprocess.run(
        ["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "rlark-training", "-f", str(path)], check=True, timeout=60
    )
    fp = subprocess.run(
        ["ssh-keygen", "-lf", f"{path}.pub"], check=True, capture_output=True, text=True, timeout=30
    ).stdout.split()[1]
    return path.with_suffix(".pub").read_text(), path.read_text(), fp


def test_ssh_key_page(console_server, page, keypair):
    public, private, fingerprint = keypair
    page.context.add_cookies([{"name": "django_language", "value": "zh-hans", "url": console_server.url}])
    page.goto(console_server.url + "/login/?next=/ssh-keys/")
    page.fill("input[name=username]", "admin")
    page.fill("input[name=password]", E2E_ADMIN_PASSWORD)
    page.click("button[type=submit]")
    page.wait_for_url("**/ssh-keys/")
    expect(page.get_by_role("heading", name="SSH 公钥管理")).to_be_visible()
    page.fill("input[name=name]", "my-workstation")
    page.fill("textarea[name=key]", private)
    page.get_by_role("button", name="添加 SSH 公钥").click()
    expect(page.locator('[data-testid="ssh-key-error"]')).to_contain_text(".pub")
    page.screenshot(path=str(ARTIFACTS / "sshkeys-private-refused-zh.png"), full_page=True)
    page.fill("textarea[name=key]", public)
    page.get_by_role("button", name="添加 SSH 公钥").click()
    row = page.locator('[data-testid="ssh-key-row"]').filter(has_text="my-workstation")
    expect(row).to_contain_text(fingerprint)
    expect(row).to_contain_text("ssh-ed25519")
    expect(row).to_contain_text("256")
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / "sshkeys-zh.png"), full_page=True)
    page.select_option('[data-testid="language-select"]', "en")
    page.wait_for_load_state("load")
    expect(page.get_by_role("heading", name="SSH Key Management")).to_be_visible()
    page.screenshot(path=str(ARTIFACTS / "sshkeys-en.png"), full_page=True)
    page.once("dialog", lambda dialog: dialog.accept())
    row.get_by_role("button", name="Delete").click()
    page.wait_for_load_state("load")
    expect(page.locator('[data-testid="ssh-key-row"]').filter(has_text="my-workstation")).to_have_count(0)
