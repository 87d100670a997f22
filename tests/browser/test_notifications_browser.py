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
        edit_rules_and_send_a_test(page, live_server, ok)


def edit_rules_and_send_a_test(page, live_server, ok: Receiver) -> None:
    """Edit a default rule (zh) and the job's rule from its tab (en), open a channel's edit form in both
    languages, send a test on the channel that answers; screenshots of each form."""
    # edit the default rule (zh): Stopped instead of Worker restart; the stored secret is not in the form
    page.goto(f"{live_server.url}/account/notifications/")
    default = page.locator("[data-testid=notify-rule]").filter(has_text="team-hook")
    default.locator("[data-testid=notify-rule-edit]").click()
    expect(page.get_by_role("heading", name="编辑规则", exact=True)).to_be_visible()
    expect(page.locator("[data-testid=notify-event-restart]")).to_be_checked()
    page.uncheck("[data-testid=notify-event-restart]")
    page.check("[data-testid=notify-event-Stopped]")
    page.screenshot(path=str(ARTIFACTS / "notifications-edit-rule-zh.png"), full_page=True)
    page.click("[data-testid=notify-save]")
    expect(page.locator(".messages")).to_contain_text("已保存规则")
    edited = page.locator("[data-testid=notify-rule]").filter(has_text="team-hook")
    expect(edited).to_contain_text("已停止")
    expect(edited).not_to_contain_text("Worker 重启")

    # edit the job's rule from the job's tab (en): switch it off; a bad pattern is refused first, in words
    set_lang(page, live_server, "en")
    page.goto(f"{live_server.url}/jobs/demo/notifications/")
    mine = page.locator("[data-testid=notify-rule]").filter(has_text="This job")
    mine.locator("[data-testid=notify-rule-edit]").click()
    expect(page.get_by_role("heading", name="Edit rule", exact=True)).to_be_visible()
    page.check("[data-testid=notify-event-log_match]")
    page.fill("[data-testid=notify-rule-pattern]", "(unclosed")
    page.click("[data-testid=notify-save]")
    expect(page.locator("[data-testid=notify-error]")).to_contain_text("Invalid log pattern")
    page.fill("[data-testid=notify-rule-pattern]", "loss=nan")
    page.uncheck("[data-testid=notify-rule-enabled]")
    page.screenshot(path=str(ARTIFACTS / "notifications-edit-rule-en.png"), full_page=True)
    page.click("[data-testid=notify-save]")
    expect(page).to_have_url(f"{live_server.url}/jobs/demo/notifications/")
    mine = page.locator("[data-testid=notify-rule]").filter(has_text="This job")
    expect(mine.locator("[data-testid=notify-rule-off]")).to_have_text("Off")
    expect(mine).to_contain_text("loss=nan")

    # the channel's edit form shows the URL masked and never the secret, in both languages
    page.goto(f"{live_server.url}/account/notifications/")
    page.locator("[data-testid=notify-channel]").filter(has_text="ok-hook").locator(
        "[data-testid=notify-channel-edit]"
    ).click()
    expect(page.locator("[data-testid=notify-url-current]")).to_contain_text("http://127.0.0.1:")
    assert "browser-secret" not in page.content() and ok.url not in page.content()
    page.screenshot(path=str(ARTIFACTS / "notifications-edit-channel-en.png"), full_page=True)
    set_lang(page, live_server, "zh-hans")
    page.reload()
    expect(page.get_by_role("heading", name="编辑渠道", exact=True)).to_be_visible()
    page.screenshot(path=str(ARTIFACTS / "notifications-edit-channel-zh.png"), full_page=True)

    # send a test on the channel that answers: its status in the channel list
    page.goto(f"{live_server.url}/account/notifications/")
    row = page.locator("[data-testid=notify-channel]").filter(has_text="ok-hook")
    row.locator("[data-testid=notify-channel-test]").click()
    row = page.locator("[data-testid=notify-channel]").filter(has_text="ok-hook")
    expect(row.locator("[data-testid=notify-channel-test-status]")).to_contain_text("已送达")
    assert len(ok.requests) == 2
    page.screenshot(path=str(ARTIFACTS / "notifications-test-sent-zh.png"), full_page=True)
