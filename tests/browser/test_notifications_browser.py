"""Browser: the Notifications page (add a signed webhook channel and a default rule, the SSRF refusal in words)
and a job's Notifications tab (a rule for the job; a receiver on 127.0.0.1 that answers 503 shows "Delivery
failed" with the last error; one that answers shows "Delivered"); zh and en screenshots."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from jobs.models import Job
from notifications import dispatch, tasks
from tests.browser.test_diagnosis_browser import login, set_lang
from tests.conftest import ARTIFACTS
from tests.fake_runtime import job_document
from tests.notifications.receiver import Receiver

pytestmark = [
    pytest.mark.browser,
    pytest.mark.django_db(transaction=True),
    pytest.mark.usefixtures("orm_beside_playwright"),
]


def test_notifications_pages(page, live_server, client, alice, settings):
    settings.RLARK_NOTIFY_ALLOWED_HOSTS = ["127.0.0.1"]
    settings.RLARK_NOTIFY_TIMEOUT = 2.0
    settings.CELERY_TASK_ALWAYS_EAGER = True
    ARTIFACTS.mkdir(exist_ok=True)
    job = Job.objects.create(name="demo", owner=alice, spec=job_document("demo"))
    login(page, live_server, client, alice)
    set_lang(page, live_server, "zh-hans")
    with Receiver([503] * 4) as failing, Receiver() as ok:
        page.goto(f"{live_server.url}/account/notifications/")
        expect(page.get_by_role("heading", name="通知", exact=True)).to_be_visible()
        # the metadata address is refused, in words, and nothing is stored
        page.fill("[data-testid=notify-channel-name]", "meta")
        page.select_option("[data-testid=notify-channel-kind]", "slack")
        page.fill("[data-testid=notify-channel-url]", "https://169.254.169.254/latest/meta-data/")
        page.click("[data-testid=notify-channel-add]")
        expect(page.locator("[data-testid=notify-error]")).to_contain_text("169.254.169.254")
        expect(page.locator("[data-testid=notify-error]")).to_contain_text("已拒绝")
        page.screenshot(path=str(ARTIFACTS / "notifications-refused-zh.png"), full_page=True)
        for name, url in (("team-hook", failing.url), ("ok-hook", ok.url)):
            page.fill("[data-testid=notify-channel-name]", name)
            page.select_option("[data-testid=notify-channel-kind]", "webhook")
            page.fill("[data-testid=notify-channel-url]", url)
            page.fill("[data-testid=notify-channel-secret]", "browser-secret")
            page.click("[data-testid=notify-channel-add]")
            expect(page.locator("[data-testid=notify-channel]").filter(has_text=name)).to_be_visible()
        assert "browser-secret" not in page.content()
        page.select_option("[data-testid=notify-rule-channel]", label="team-hook (Webhook（签名）)")
        page.check("[data-testid=notify-event-Failed]")
        page.check("[data-testid=notify-event-restart]")
        page.click("[data-testid=notify-rule-add]")
        expect(page.locator("[data-testid=notify-rule]")).to_have_count(1)
        expect(page.locator("[data-testid=notify-rule-status]")).to_contain_text("尚未发送")
        page.screenshot(path=str(ARTIFACTS / "notifications-zh.png"), full_page=True)
        set_lang(page, live_server, "en")
        page.reload()
        expect(page.get_by_role("heading", name="Notifications", exact=True)).to_be_visible()
        page.screenshot(path=str(ARTIFACTS / "notifications-en.png"), full_page=True)

        # the job's tab: a rule for this job on the receiver that answers
        page.goto(f"{live_server.url}/jobs/demo/")
        page.click("[data-testid=tab-notifications]")
        page.select_option("[data-testid=notify-rule-channel]", label="ok-hook (Webhook (signed))")
        page.check("[data-testid=notify-event-Failed]")
        page.click("[data-testid=notify-rule-add]")
        expect(page.locator("[data-testid=notify-rule]")).to_have_count(2)
        for delivery_id in dispatch.record([{"job": job.pk, "kind": "phase", "phase": "Failed", "attempt": 1}]):
            tasks.deliver.delay(delivery_id)
        assert len(failing.requests) == 4 and len(ok.requests) == 1
        page.reload()
        failed = page.locator("[data-testid=notify-rule][data-status=failed]")
        expect(failed.locator("[data-testid=notify-rule-status]")).to_contain_text("Delivery failed")
        expect(failed.locator("[data-testid=notify-rule-error]")).to_have_text("the receiver answered HTTP 503")
        sent = page.locator("[data-testid=notify-rule][data-status=sent]")
        expect(sent.locator("[data-testid=notify-rule-status]")).to_contain_text("Delivered")
        expect(page.locator("[data-testid=notify-delivery]")).to_have_count(2)
        page.screenshot(path=str(ARTIFACTS / "notifications-job-en.png"), full_page=True)
        set_lang(page, live_server, "zh-hans")
        page.reload()
        expect(failed.locator("[data-testid=notify-rule-status]")).to_contain_text("投递失败")
        expect(sent.locator("[data-testid=notify-rule-status]")).to_contain_text("已送达")
        page.screenshot(path=str(ARTIFACTS / "notifications-job-zh.png"), full_page=True)
