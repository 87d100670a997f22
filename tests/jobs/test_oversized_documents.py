"""A 6 MB Job YAML is refused with "larger than 1 MiB" before anything parses it: through the API (YAML body and
multipart upload), the YAML page of the wizard (upload and paste) and the ``rlark`` CLI (``validate``, ``apply``,
a file or standard input), in the language of the request."""

from __future__ import annotations

import io
import sys

import pytest
import yaml
from django.core.files.uploadedfile import SimpleUploadedFile

from accounts.authentication import issue_token
from jobs.models import Job
from rlark_cli.main import main
from tests.spec_fixtures import base_doc, seed_db

SIX_MB = 6 * 2**20


def big_yaml() -> str:
    """A well-formed Job YAML of about 6 MB: a real job padded with a long list under one annotation."""
    head = yaml.safe_dump(base_doc(), sort_keys=False)
    line = "  - " + "a" * 60 + "\n"
    return head + "padding:\n" + line * (SIX_MB // len(line) + 1)


@pytest.fixture(scope="module")
def text() -> str:
    doc = big_yaml()
    assert len(doc.encode()) > SIX_MB
    return doc


def messages(body: dict) -> list[str]:
    return [e["message"] for e in body["errors"]]


@pytest.mark.django_db
@pytest.mark.parametrize("lang, words", [("en", "larger than 1 MiB"), ("zh-hans", "larger than 1 MiB")])
def test_the_api_refuses_a_6_mb_yaml_body(api, text, lang, words):
    for url in ("/api/v1/jobs/validate/", "/api/v1/jobs/"):
        r = api.post(url, text.encode(), content_type="application/yaml", HTTP_ACCEPT_LANGUAGE=lang)
        assert r.status_code == 400, r.content[:300]
        assert r.json()["errors"][0]["code"] == "document_invalid"
        assert any(words in m for m in messages(r.json())), messages(r.json())
    assert not Job.objects.exists()


@pytest.mark.django_db
def test_the_api_refuses_a_6_mb_uploaded_file(api, text):
    upload = SimpleUploadedFile("job.yaml", text.encode(), content_type="application/yaml")
    r = api.post("/api/v1/jobs/validate/", {"file": upload}, format="multipart", HTTP_ACCEPT_LANGUAGE="en")
    assert r.status_code == 400
    assert messages(r.json()) == ["The job document is invalid: larger than 1 MiB"]


@pytest.mark.django_db
@pytest.mark.parametrize("lang, words", [("en", "The job document is invalid"), ("zh-hans", "Job 文档格式无效")])
def test_the_yaml_page_refuses_a_6_mb_upload_and_does_not_echo_it(client, alice, text, lang, words):
    client.force_login(alice)
    client.cookies["django_language"] = lang
    upload = SimpleUploadedFile("job.yaml", text.encode(), content_type="application/yaml")
    r = client.post("/jobs/new/yaml/", {"file": upload, "action": "validate"})
    page = r.content.decode()
    assert r.status_code == 400 and words in page and "larger than 1 MiB" in page
    assert "padding:" not in page and len(page) < 200_000  # the 6 MB text is not sent back into the text area


@pytest.mark.django_db(transaction=True)
def test_the_cli_refuses_a_6_mb_file_and_stdin_before_sending_it(live_server, alice, monkeypatch, tmp_path, capsys):
    seed_db(alice)
    _, key = issue_token(alice, "cli")
    for name, value in (("RLARK_URL", live_server.url), ("RLARK_TOKEN", key), ("RLARK_LANG", "en")):
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("RLARK_CONFIG", str(tmp_path / "none.yaml"))
    path = tmp_path / "big.yaml"
    path.write_text(big_yaml())
    for command in ("validate", "apply"):
        assert main([command, "-f", str(path)]) == 1
        err = capsys.readouterr().err
        assert "big.yaml is larger than 1 MiB" in err, err
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(big_yaml().encode())))
    assert main(["validate", "-f", "-"]) == 1
    assert "- is larger than 1 MiB" in capsys.readouterr().err
    assert not Job.objects.exists()
