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
    # a pasted private key leaves the field at once, is never sent, and the page says why
    requests = []
    page.on("request", lambda r: requests.append(r) if r.method == "POST" else None)
    page.locator("textarea[name=key]").focus()
    page.evaluate(
        "(text) => { const t = document.querySelector('textarea[name=key]'); const d = new DataTransfer();"
        " d.setData('text/plain', text); t.dispatchEvent(new ClipboardEvent('paste', {clipboardData: d}));"
        " t.value = text; t.dispatchEvent(new Event('input', {bubbles: true})); }",
        private,
    )
    expect(page.locator("textarea[name=key]")).to_have_value("")
    expect(page.locator('[data-testid="ssh-key-private-local"]')).to_be_visible()
    expect(page.locator('[data-testid="ssh-key-private-local"]')).to_contain_text(".pub")
    page.get_by_role("button", name="添加 SSH 公钥").click()
    assert not requests and "PRIVATE KEY" not in page.content()
    page.screenshot(path=str(ARTIFACTS / "sshkeys-private-refused-zh.png"), full_page=True)
    page.screenshot(path=str(ARTIFACTS / "sshkeys-private-cleared-zh.png"), full_page=True)
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
    # the server refuses one too (a form sent around the page's check) and does not echo it back
    page.evaluate(
        "(text) => { const t = document.querySelector('textarea[name=key]'); t.value = text; t.form.submit(); }",
        private,
    )
    page.wait_for_load_state("load")
    expect(page.locator('[data-testid="ssh-key-cleared"]')).to_contain_text("The field was cleared")
    expect(page.locator("textarea[name=key]")).to_have_value("")
    assert "PRIVATE KEY" not in page.content()
    page.screenshot(path=str(ARTIFACTS / "sshkeys-private-cleared-en.png"), full_page=True)
    page.once("dialog", lambda dialog: dialog.accept())
    row.get_by_role("button", name="Delete").click()
    page.wait_for_load_state("load")
    expect(page.locator('[data-testid="ssh-key-row"]').filter(has_text="my-workstation")).to_have_count(0)
