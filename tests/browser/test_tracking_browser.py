"""Browser: experiment tracking. The Experiment tracking account page keeps a W&B key (never shown again) and its
entity, the wizard's Common Config step offers it with the host and the entity, and the Metrics tab of a job whose
Header's and Worker's logs printed W&B- and SwanLab-style run lines shows both links beside Open in TensorBoard (a
link to another host is not shown), with the resolved RLinf config and its sha256; the run record carries them.
zh and en screenshots."""

from __future__ import annotations

import hashlib

import pytest
from playwright.sync_api import expect

from accounts.models import TrackingCredential
from jobs.models import Job
from jobs.observe.status import log_archive_path
from tests.browser import test_diagnosis_browser
from tests.browser.test_diagnosis_browser import login, set_lang
from tests.conftest import screenshot_dir
from tests.spec_fixtures import base_doc, seed_db

seeded = test_diagnosis_browser.seeded  # job "demo": a header writing TensorBoard events into data/tb, 2 rollouts

pytestmark = [
    pytest.mark.browser,
    pytest.mark.django_db(transaction=True),
    pytest.mark.usefixtures("orm_beside_playwright"),
]

SHOTS = screenshot_dir()
KEY = "wandb-browser-key-7f3e9a1c5b2d4e6f8a0b"
WANDB_URL = "https://wandb.example.com/team/rlinf/runs/abc123"
SWAN_URL = "https://swanlab.cn/@alice/rlinf/runs/xyz789"
RESOLVED = "runner:\n  logger:\n    logger_backends: [tensorboard, wandb, swanlab]\n    project_name: rlinf\n"


def test_account_page_keeps_the_key_and_the_wizard_offers_it(page, live_server, client, alice):
    seed_db(alice)
    Job.objects.create(name="ppo-job", owner=alice, spec=base_doc())  # a valid job to clone into the wizard
    login(page, live_server, client, alice)
    for lang, saved in (("zh-hans", "已保存"), ("en", "saved")):
        set_lang(page, live_server, lang)
        page.goto(f"{live_server.url}/account/tracking/")
        page.fill("[data-testid=tracking-name]", f"team-wandb-{lang[:2]}")
        page.select_option("[data-testid=tracking-kind]", "wandb")
        page.fill("[data-testid=tracking-key]", KEY)
        page.fill("[data-testid=tracking-host]", "https://wandb.example.com")
        page.fill("[data-testid=tracking-entity]", "rl-team")
        page.click("[data-testid=tracking-save]")
        expect(page.locator(f"[data-testid=tracking-row-team-wandb-{lang[:2]}]")).to_contain_text("wandb.example.com")
        expect(page.locator(f"[data-testid=tracking-entity-team-wandb-{lang[:2]}]")).to_have_text("rl-team")
        expect(page.locator("[data-testid=tracking-entity-hint]")).to_contain_text("WANDB_ENTITY")
        expect(page.locator("body")).to_contain_text(saved)
        assert KEY not in page.content()
        page.screenshot(path=f"{SHOTS}/tracking-account-{lang}.png", full_page=True)

        page.goto(f"{live_server.url}/jobs/new/?clone=ppo-job")
        page.click("[data-testid=step-3]")
        expect(page.locator("[data-testid=step-panel-3]")).to_be_visible()
        box = page.locator("[data-testid=tracking-team-wandb-zh]")
        expect(box).to_be_visible()
        box.check()
        expect(page.locator("[data-testid=tracking]")).to_contain_text("W&B · https://wandb.example.com")
        expect(page.locator("[data-testid=tracking]")).to_contain_text(
            "实体 rl-team" if lang == "zh-hans" else "entity rl-team"
        )
        page.screenshot(path=f"{SHOTS}/tracking-wizard-step3-{lang}.png", full_page=True)
    assert TrackingCredential.objects.filter(user=alice).count() == 2


def test_metrics_tab_shows_the_run_links_and_the_resolved_config(page, live_server, client, alice, seeded, tmp_path):
    seeded.owner = alice
    seeded.save(update_fields=["owner"])
    TrackingCredential.objects.create(
        user=alice, name="own", kind="wandb", api_key=KEY, host="https://wandb.example.com"
    )
    header = log_archive_path("demo", "demo-header-0")
    header.write_text(
        header.read_text()
        + "wandb: Currently logged in as: alice\n"
        + "wandb: 🚀 View run ppo at: https://evil.example.net/team/rlinf/runs/abc123\n"
        + f"wandb: 🚀 View run ppo at: {WANDB_URL}\n"
    )
    worker = log_archive_path("demo", "demo-rollout-0")
    worker.write_text(worker.read_text() + f"swanlab: 🚀 View run at {SWAN_URL}\n")
    tb = tmp_path / "data" / "tb" / "tensorboard"
    tb.mkdir(parents=True)
    (tb / "config.yaml").write_text(RESOLVED)
    sha = hashlib.sha256(RESOLVED.encode()).hexdigest()

    login(page, live_server, client, alice)
    for lang, wandb_text in (("zh-hans", "在 W&B 中打开 ↗"), ("en", "Open in W&B ↗")):
        set_lang(page, live_server, lang)
        page.goto(f"{live_server.url}/jobs/demo/metrics/")
        expect(page.locator("[data-testid=open-tensorboard]")).to_be_visible()
        wandb = page.locator("[data-testid=open-wandb]")
        expect(wandb).to_have_text(wandb_text)
        assert wandb.get_attribute("href") == WANDB_URL
        assert page.locator("[data-testid=open-swanlab]").get_attribute("href") == SWAN_URL
        assert "evil.example.net" not in page.content()
        expect(page.locator("[data-testid=resolved-path]")).to_have_text("/data/tb/tensorboard/config.yaml")
        expect(page.locator("[data-testid=resolved-sha256]")).to_have_text(sha)
        assert page.locator("[data-testid=resolved-text]").inner_text() == RESOLVED.rstrip("\n") or (
            page.locator("[data-testid=resolved-text]").text_content() == RESOLVED
        )
        assert KEY not in page.content()
        page.screenshot(path=f"{SHOTS}/tracking-metrics-{lang}.png", full_page=True)

    page.goto(f"{live_server.url}/jobs/demo/run-check/")
    with page.expect_download() as info:
        page.click("[data-testid=export-record]")
    record = open(info.value.path(), encoding="utf-8").read()
    assert WANDB_URL in record and SWAN_URL in record and sha in record
    assert KEY not in record
