"""The Experiment tracking account page's form with a W&B entity: kept and shown in the list and in the wizard's
Common Config step, refused with a localized message for SwanLab or for characters W&B does not allow."""

from __future__ import annotations

import json

import pytest

from accounts.models import AuditEvent, TrackingCredential

pytestmark = pytest.mark.django_db

KEY = "page-wandb-key-99887766554433221100ffeeddccbbaa"


def _add(client, **fields):
    data = {"name": "team-wandb", "kind": "wandb", "api_key": KEY, "host": "", "entity": "rl-team.v2"} | fields
    return client.post("/account/tracking/", data)


def test_the_entity_is_kept_and_shown_beside_the_host(client, alice):
    client.force_login(alice)
    client.cookies["django_language"] = "en"
    page = _add(client)
    assert page.status_code == 200
    text = page.content.decode()
    assert 'data-testid="tracking-entity-team-wandb">rl-team.v2<' in text and KEY not in text
    assert 'name="entity"' in text and "WANDB_ENTITY" in text
    assert TrackingCredential.objects.get(user=alice).entity == "rl-team.v2"
    assert AuditEvent.objects.get(action="tracking.create").detail["entity"] == "rl-team.v2"
    assert KEY not in json.dumps(list(AuditEvent.objects.values_list("detail", flat=True)))
    _add(client, name="no-entity", entity="")
    listed = client.get("/account/tracking/").content.decode()
    assert "the key&#x27;s default" in listed or "the key's default" in listed
    wizard = client.get("/jobs/new/").content.decode()
    assert "entity rl-team.v2" in wizard


def test_a_bad_entity_is_refused_in_the_users_language(client, alice):
    client.force_login(alice)
    client.cookies["django_language"] = "en"
    bad = _add(client, entity="rl team")
    assert bad.status_code == 400 and "Enter the W&amp;B entity as letters" in bad.content.decode()
    assert 'value="rl team"' in bad.content.decode()  # the form keeps what was typed (never the key)
    client.cookies["django_language"] = "zh-hans"
    swan = _add(client, kind="swanlab", entity="team")
    assert swan.status_code == 400 and "只有 W&amp;B 凭据可以填写实体" in swan.content.decode()
    assert KEY not in swan.content.decode()
    assert not TrackingCredential.objects.exists()
