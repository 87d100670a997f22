"""Secrets at rest: dumpdata never prints plaintext, loaddata round-trips without double encryption."""

from __future__ import annotations

import io
import json

import pytest
from django.core import serializers
from django.core.management import call_command

from clusters.models import ImageRegistry

MARKER = "REGISTRY-PASSWORD-MARKER-77c1"


@pytest.mark.django_db
def test_dumpdata_holds_only_ciphertext_and_loaddata_round_trips(tmp_path):
    ImageRegistry.objects.create(name="corp", registry="registry.corp.example", username="u", password=MARKER)
    out = io.StringIO()
    call_command("dumpdata", "clusters.imageregistry", stdout=out)
    dumped = out.getvalue()
    assert MARKER not in dumped
    stored = json.loads(dumped)[0]["fields"]["password"]
    assert stored.startswith("fernet:")

    ImageRegistry.objects.all().delete()
    fixture = tmp_path / "registries.json"
    fixture.write_text(dumped)
    call_command("loaddata", str(fixture), stdout=io.StringIO())
    assert ImageRegistry.objects.get(name="corp").password == MARKER


@pytest.mark.django_db
def test_serializer_and_plain_values_starting_with_prefix():
    reg = ImageRegistry.objects.create(name="odd", registry="r.example", password="fernet:not-really-a-token")
    reg.refresh_from_db()
    assert reg.password == "fernet:not-really-a-token"
    assert "not-really-a-token" not in serializers.serialize("json", [reg])
