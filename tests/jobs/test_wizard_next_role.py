"""Step 2's "Next Role" opens the next role's tab (Header first, then the others); step 3 comes after the last."""

from __future__ import annotations

import re

import pytest

from jobs.control import wizard as wz
from jobs.control.wizard_roles import next_role, role_order
from tests.jobs.test_wizard_views import current_step, demo, post, rl_state  # noqa: F401 - demo is a fixture


def active_tab(html: str) -> int:
    return int(re.search(r'name="active_role" value="(\d+)"', html).group(1))


def next_label(html: str) -> str:
    return re.search(r'data-testid="next">([^<]+)</button>', html).group(1)


def test_the_order_starts_at_the_header_and_keeps_the_others_as_listed():
    state = wz.initial_state(["local"])
    state.roles.append(wz.new_role("critic", ["local"]))
    state.header = 2
    assert role_order(state) == [2, 0, 1, 3]
    state.active_role = 2
    assert next_role(state) == 0
    state.active_role = 1
    assert next_role(state) == 3
    state.active_role = 3
    assert next_role(state) is None


@pytest.mark.django_db
def test_next_role_walks_every_role_tab_before_step_3(client, admin_user, demo):  # noqa: F811
    client.force_login(admin_user)
    client.cookies["django_language"] = "en"
    state = rl_state()
    state.step, state.active_role = 2, 0
    seen = []
    for _ in range(3):
        html = post(client, state, "next").content.decode()
        if current_step(html) != 2:
            break
        state.active_role = active_tab(html)
        seen.append((state.active_role, next_label(html)))
    assert seen == [(1, "Next Role"), (2, "Next")]
    assert current_step(html) == 3


@pytest.mark.django_db
def test_the_open_roles_problems_keep_the_user_on_its_tab(client, admin_user, demo):  # noqa: F811
    client.force_login(admin_user)
    state = rl_state()
    state.roles[0].image = ""
    state.roles[2].image = ""  # a later role's problem waits until its own tab
    state.step, state.active_role = 2, 0
    html = post(client, state, "next").content.decode()
    assert current_step(html) == 2 and active_tab(html) == 0
    banner = re.search(r'data-testid="wizard-errors">(.*?)</div>', html, re.S).group(1)
    assert 'data-code="image_missing"' in banner and "tasks[0]" in banner and "tasks[2]" not in banner
    state.roles[0].image = "reg.example.com/rlinf:v1"
    html = post(client, state, "next").content.decode()
    assert current_step(html) == 2 and active_tab(html) == 1
