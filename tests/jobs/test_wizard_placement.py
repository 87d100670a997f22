"""One selector story (seeds 03 Step 3 and 05): a job's selector has one value per key and a role has as many
Workers as it matches nodes. When a role needs N of M nodes the wizard says how (a console-owned label set in the
back office's batch edit) and links there for staff; the YAML preview lists where each role's Workers can land; the
Clusters page's "any of" filter says that a job cannot use it. zh and en."""

from __future__ import annotations

import re

import pytest

from jobs.control.wizard_placement import suggested_label
from tests.jobs.test_wizard_views import current_step, demo, post, rl_state  # noqa: F401 - demo is a fixture

pytestmark = pytest.mark.django_db


def placement(html: str, i: int) -> str:
    m = re.search(rf'data-testid="placement-{i}"[^>]*>(.*?)</div>', html, re.S)
    return m.group(1) if m else ""


def test_the_suggested_label_is_a_valid_label_value():
    assert suggested_label("ppo-demo", "Rollout") == "rlark.io/pool=ppo-demo-rollout"
    value = suggested_label("j" * 60, "训练").split("=", 1)[1]
    assert len(value) <= 63 and value[0].isalnum() and value[-1].isalnum()


@pytest.mark.parametrize(
    "lang, words",
    [("en", "This role has 1 Worker, but its selector matches 2 nodes"), ("zh-hans", "该角色有 1 个 Worker")],
)
def test_n_of_m_nodes_says_how_and_links_to_the_back_office(client, admin_user, demo, lang, words):  # noqa: F811
    client.force_login(admin_user)
    client.cookies["django_language"] = lang
    state = rl_state()
    state.roles[1].selector, state.roles[1].replicas = "pool=rollout", "1"
    state.step, state.active_role = 2, 1
    html = post(client, state, "tab:1").content.decode()
    hint = placement(html, 1)
    assert words in hint and "rlark.io/pool=ppo-demo-rollout" in hint
    assert 'href="/admin/clusters/node/?label=pool%3Drollout"' in hint
    assert placement(html, 0) == "" and placement(html, 2) == ""  # the Header and a fitting role get none
    state.roles[1].replicas = "2"
    assert placement(post(client, state, "tab:1").content.decode(), 1) == ""


def test_a_comma_value_says_a_job_cannot_use_it_and_a_user_asks_staff(client, alice, demo):  # noqa: F811
    client.force_login(alice)
    client.cookies["django_language"] = "en"
    state = rl_state()
    state.roles[1].selector = "kubernetes.io/hostname=local-gpu-1,local-robot-0"
    state.step, state.active_role = 2, 1
    hint = placement(post(client, state, "tab:1").content.decode(), 1)
    assert "one value per key: a comma (any of) is refused" in hint
    assert "Ask a staff user to do it." in hint and "/admin/" not in hint


@pytest.mark.parametrize("lang, title", [("en", "Where each role's Workers can land"), ("zh-hans", "各角色的 Worker")])
def test_the_preview_shows_where_each_roles_workers_can_land(client, admin_user, demo, lang, title):  # noqa: F811
    client.force_login(admin_user)
    client.cookies["django_language"] = lang
    state = rl_state()
    state.step = 3
    html = post(client, state, "next").content.decode()
    assert current_step(html) == 4 and title in html
    rows = re.findall(
        r'data-testid="landing-(\d)">\s*<td>([^<]+)</td>\s*<td>(\d+)[^<]*</td>\s*<td[^>]*>([^<]*)</td>', html
    )
    assert [(r[1], r[2], r[3]) for r in rows] == [
        ("Actor", "1", "local/local-gpu-0"),
        ("Rollout", "1", "local/local-gpu-1"),
        ("Environment", "1", "local/local-robot-0"),
    ]


@pytest.mark.parametrize(
    "lang, words", [("en", "A job cannot use this selector"), ("zh-hans", "任务不能使用这个选择器")]
)
def test_the_clusters_page_filter_says_a_job_cannot_use_any_of(client, alice, demo, lang, words):  # noqa: F811
    client.force_login(alice)
    client.cookies["django_language"] = lang
    page = client.get("/clusters/?selector=pool=head,rollout").content.decode()
    assert words in page and "local/local-gpu-0" in page  # browsing still matches "any of"
    single = client.get("/clusters/match/?selector=pool=rollout").content.decode()
    assert 'data-testid="match-multivalue"' not in single
    help_words = "a job cannot use it" if lang == "en" else "任务不能这样写"
    assert help_words in page
