"""Unknown keys in a Job document get a warning that names the key and the nearest known one: the API's
``warnings[]`` (zh and en), the YAML page of the wizard, the wizard's YAML preview and ``rlark validate/apply``. The
Pod template's own Kubernetes fields and the user's own maps (labels, annotations, node selectors) stay free."""

from __future__ import annotations

import pytest
import yaml

from accounts.authentication import issue_token
from jobs.jobspec.unknown_keys import problems
from jobs.models import Job
from rlark_cli.main import main
from tests.spec_fixtures import base_doc, pod_spec, seed_db


def typo_doc() -> dict:
    """A valid job with three typos: ``stoped`` (spec), ``tensorboardDir`` (the Header) and ``nodeSelecter``
    (the second role, whose real ``nodeSelector`` is then missing)."""
    doc = base_doc()
    doc["spec"]["stoped"] = True
    doc["spec"]["tasks"][0]["tensorboardDir"] = "/data/tb"
    second = doc["spec"]["tasks"][1]
    second["nodeSelecter"] = second.pop("nodeSelector")
    return doc


def unknown(body: dict) -> dict[str, str]:
    return {w["path"]: w["message"] for w in body["warnings"] if w["code"] == "unknown_key"}


def test_the_pod_templates_own_fields_and_the_users_maps_stay_free():
    doc = base_doc()
    pod_spec(doc, 0)["hostNetwork"] = False
    pod_spec(doc, 0)["containers"][0]["securityContext"] = {"runAsUser": 1000}
    doc["metadata"]["labels"] = {"team": "robotics"}
    doc["metadata"]["resourceVersion"] = "12"  # read back from the API
    doc["spec"]["tasks"][0]["nodeSelector"]["anyKeyAtAll"] = "x"
    assert problems(doc) == []
    doc["spec"]["tasks"][0]["kubernetes"]["workload"]["replica"] = 2
    doc["spec"]["tasks"][0]["kubernetes"]["workload"]["pvcOptions"] = {"data": {"sise": "1Gi"}}
    paths = {p.path: p.params["suggestion"] for p in problems(doc)}
    assert paths == {
        "spec.tasks[0].kubernetes.workload.replica": "replicas",
        "spec.tasks[0].kubernetes.workload.pvcOptions.data.sise": "size",
    }


@pytest.mark.django_db
def test_the_api_warns_of_each_typo_with_the_nearest_key(api):
    body = api.post("/api/v1/jobs/validate/", typo_doc(), format="json", HTTP_ACCEPT_LANGUAGE="en").json()
    found = unknown(body)
    assert found["spec.stoped"].startswith("Unknown key `stoped` in spec: did you mean `stopped`?")
    assert "did you mean `tensorBoardDir`?" in found["spec.tasks[0].tensorboardDir"]
    assert "did you mean `nodeSelector`?" in found["spec.tasks[1].nodeSelecter"]
    # the missing nodeSelector is still an error, but the unknown key is named beside it
    assert "node_selector_empty" in {e["code"] for e in body["errors"]}
    zh = api.post("/api/v1/jobs/validate/", typo_doc(), format="json", HTTP_ACCEPT_LANGUAGE="zh-hans").json()
    assert (
        unknown(zh)["spec.stoped"] == "spec 中有未知的键 `stoped`：是否想写 `stopped`？控制台不读取它，它不起任何作用。"
    )
    doc = typo_doc()
    doc["spec"]["tasks"][1]["nodeSelector"] = doc["spec"]["tasks"][1].pop("nodeSelecter")
    doc["spec"]["tasks"][1]["zzz"] = 1
    r = api.post("/api/v1/jobs/", doc, format="json", HTTP_ACCEPT_LANGUAGE="en")
    assert r.status_code == 201, r.json()
    assert unknown(r.json())["spec.tasks[1].zzz"] == (
        "Unknown key `zzz` in spec.tasks[1]: the console does not read it, so it has no effect."
    )


@pytest.mark.django_db
@pytest.mark.parametrize(
    "lang, words", [("en", "did you mean `tensorBoardDir`?"), ("zh-hans", "是否想写 `tensorBoardDir`")]
)
def test_the_yaml_page_shows_the_warning(client, alice, lang, words):
    seed_db(alice)
    client.force_login(alice)
    client.cookies["django_language"] = lang
    text = yaml.safe_dump(typo_doc(), sort_keys=False)
    page = client.post("/jobs/new/yaml/", {"text": text, "action": "validate"}).content.decode()
    assert words in page and "spec.tasks[0].tensorboardDir" in page


@pytest.mark.django_db(transaction=True)
def test_rlark_validate_and_apply_print_the_warning(live_server, alice, monkeypatch, tmp_path, capsys):
    seed_db(alice)
    _, key = issue_token(alice, "cli")
    for name, value in (("RLARK_URL", live_server.url), ("RLARK_TOKEN", key), ("RLARK_LANG", "en")):
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("RLARK_CONFIG", str(tmp_path / "none.yaml"))
    from jobs.control import controller

    monkeypatch.setattr(controller, "request_reconcile", lambda _job: None)  # the runtime is not under test
    doc = base_doc()
    doc["spec"]["tasks"][0]["tensorboardDir"] = "/data/tb"
    path = tmp_path / "job.yaml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    assert main(["validate", "-f", str(path)]) == 0
    out = capsys.readouterr().out
    assert "warning [unknown_key] spec.tasks[0].tensorboardDir: Unknown key `tensorboardDir`" in out
    assert "did you mean `tensorBoardDir`?" in out
    assert main(["apply", "-f", str(path)]) == 0
    out = capsys.readouterr().out
    assert "job/ppo-job created" in out and "did you mean `tensorBoardDir`?" in out
    assert Job.objects.filter(name="ppo-job").exists()
