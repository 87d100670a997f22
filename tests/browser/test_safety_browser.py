"""Browser: the Safety approval section of a robot job's page (jobs.control.safety) in zh and en: the reasons, the
owner's note, a safety approver's form with the five items of seed 03 and the stop plan, a refused partial
approval saying what is missing, then the approval with its approver and stop plan; screenshots of each."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import Permission
from playwright.sync_api import expect

from clusters.models import Node
from jobs.control import controller, submission
from tests.browser.test_diagnosis_browser import login, set_lang
from tests.conftest import screenshot_dir
from tests.spec_fixtures import base_doc, seed_db

pytestmark = [
    pytest.mark.browser,
    pytest.mark.django_db(transaction=True),
    pytest.mark.usefixtures("orm_beside_playwright"),
]

PLAN = "Operator Wang stays at the pendant; e-stop, then power off the arm; reset by the device team only."


def test_safety_section_and_approve_form(page, live_server, client, alice, django_user_model, monkeypatch):
    monkeypatch.setattr(controller, "request_reconcile", lambda _job: None)  # no Workers run in this test
    SHOTS = screenshot_dir()
    seed_db(alice)
    Node.objects.filter(name__in=["gpu-1", "gpu-2"]).update(category="robot")
    job = submission.create_job(alice, base_doc())
    assert job.stopped
    carol = django_user_model.objects.create_user("carol", "", "carol-pass-1")
    carol.user_permissions.add(Permission.objects.get(codename="approve_robot_job"))

    login(page, live_server, client, alice)
    for lang, missing in (("zh-hans", "未审批"), ("en", "Not approved")):
        set_lang(page, live_server, lang)
        page.goto(f"{live_server.url}/jobs/ppo-job/")
        section = page.locator("[data-testid=safety]")
        expect(section.locator("[data-testid=safety-status]")).to_contain_text(missing)
        expect(section.locator("[data-testid=safety-reasons]")).to_contain_text("local/gpu-2")
        expect(section.locator("[data-testid=safety-owner-note]")).to_be_visible()
        expect(section.locator("[data-testid=safety-form]")).to_have_count(0)
        page.screenshot(path=str(SHOTS / f"safety-owner-{lang}.png"), full_page=True)

    page.context.clear_cookies()
    login(page, live_server, client, carol)
    set_lang(page, live_server, "zh-hans")
    page.goto(f"{live_server.url}/jobs/ppo-job/")
    form = page.locator("[data-testid=safety-form]")
    expect(form).to_contain_text("设备、固件、驱动、SDK、控制模式和镜像版本的兼容性。")
    expect(form).to_contain_text("现场操作员、隔离区域、人员进入控制和明确的安全责任人。")
    expect(form).to_contain_text("已测试的急停、断能、复位和通信中断处理。")
    expect(form).to_contain_text("速度、力、行程和工作空间限制，以及异常动作的停止条件。")
    expect(form).to_contain_text("数据和控制命令的审批、审计与恢复方案。")
    expect(page.locator("[data-testid=action-start]")).to_have_count(0)  # the approver changes nothing else
    page.screenshot(path=str(SHOTS / "safety-approver-zh-hans.png"), full_page=True)

    set_lang(page, live_server, "en")
    page.goto(f"{live_server.url}/jobs/ppo-job/")
    for key in ("compatibility", "site", "stop"):
        page.check(f"[data-testid=safety-item-{key}]")
    page.fill("[data-testid=safety-stop-plan-input]", PLAN)
    page.click("[data-testid=safety-approve]")
    page.wait_for_url(f"{live_server.url}/jobs/ppo-job/")
    expect(page.locator("body")).to_contain_text("Not confirmed yet")
    expect(page.locator("body")).to_contain_text("Speed, force, travel and workspace limits")
    page.screenshot(path=str(SHOTS / "safety-approver-refused-en.png"), full_page=True)
    for key in ("compatibility", "site", "stop"):  # nothing typed was lost
        expect(page.locator(f"[data-testid=safety-item-{key}]")).to_be_checked()
    expect(page.locator("[data-testid=safety-item-limits]")).not_to_be_checked()
    expect(page.locator("[data-testid=safety-stop-plan-input]")).to_have_value(PLAN)
    for key in ("limits", "data"):
        page.check(f"[data-testid=safety-item-{key}]")
    page.click("[data-testid=safety-approve]")
    page.wait_for_url(f"{live_server.url}/jobs/ppo-job/")
    section = page.locator("[data-testid=safety]")
    expect(section.locator("[data-testid=safety-status][data-status=approved]")).to_contain_text("Approved by carol")
    expect(section.locator("[data-testid=safety-stop-plan]")).to_have_text(PLAN)
    expect(section.locator("[data-testid=safety-form]")).to_have_count(0)
    page.screenshot(path=str(SHOTS / "safety-approved-en.png"), full_page=True)
    set_lang(page, live_server, "zh-hans")
    page.goto(f"{live_server.url}/jobs/ppo-job/")
    expect(page.locator("[data-testid=safety-status]")).to_contain_text("已由 carol 批准")
    page.screenshot(path=str(SHOTS / "safety-approved-zh-hans.png"), full_page=True)
