"""The job wizard over HTTP (Django test client, htmx requests): step validation, the same codes as the one
validator, RLinf import, clone/edit/restart prefill, the live global match count, YAML paste and permissions."""

from __future__ import annotations

import re

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.core.management import call_command

from clusters.models import Cluster
from clusters.services.inventory import upsert_local_nodes
from jobs.control import submission
from jobs.control import wizard as wz
from jobs.jobspec.document import normalize, render_yaml
from jobs.jobspec.inventory import Inventory
from jobs.jobspec.validator import validate
from jobs.models import Job
from tests.shared_spec import RLINF_CONFIGS

RLINF = RLINF_CONFIGS
CHARGER = RLINF / "emb_realworld_charger_sac_cnn_async.yaml"
HX = {"HTTP_HX_REQUEST": "true"}


@pytest.fixture
def demo(db):
    call_command("seed_demo", "--password", "demo-pass-1", stdout=open("/dev/null", "w"))  # noqa: SIM115
    return Cluster.objects.get(name="local")


def fields(state: wz.WizardState) -> dict:
    """The POST body the wizard form sends for ``state`` (same field names as the template)."""
    data = {
        "name": state.name,
        "display_name": state.display_name,
        "job_type": state.job_type,
        "header": state.header,
        "step": state.step,
        "active_role": state.active_role,
        "role_count": len(state.roles),
        "run_script": state.run_script,
        "tensorboard_dir": state.tensorboard_dir,
        "checkpoint_dir": state.checkpoint_dir,
        "domain": state.domain,
        "rlinf_config": state.rlinf_config,
        "ssh_keys": state.ssh_keys,
    }
    for i, r in enumerate(state.roles):
        p = f"r{i}-"
        data.update(
            {
                p + "name": r.name,
                p + "kind": r.kind,
                p + "cluster": r.cluster,
                p + "selector": r.selector,
                p + "replicas": r.replicas,
                p + "gpu": r.gpu,
                p + "cpu": r.cpu,
                p + "memory": r.memory,
                p + "shm": r.shm,
                p + "image": r.image,
                p + "prepare": r.prepare_script,
                p + "env_count": len(r.env),
                p + "dev_count": len(r.devices),
                p + "mnt_count": len(r.mounts),
            }
        )
        for j, e in enumerate(r.env):
            data.update({f"{p}env{j}-name": e.name, f"{p}env{j}-value": e.value})
        for j, d in enumerate(r.devices):
            data.update({f"{p}dev{j}-key": d.key, f"{p}dev{j}-qty": d.quantity})
        for j, m in enumerate(r.mounts):
            data.update(
                {
                    f"{p}mnt{j}-kind": m.kind,
                    f"{p}mnt{j}-path": m.path,
                    f"{p}mnt{j}-host": m.host_path,
                    f"{p}mnt{j}-class": m.storage_class,
                }
            )
    return data


def rl_state() -> wz.WizardState:
    """A valid 3-role RL job on the demo local cluster."""
    state = wz.initial_state(["local"])
    state.name = "ppo-demo"
    actor, rollout, env = state.roles
    actor.selector, actor.replicas, actor.image = "pool=head", "1", "reg.example.com/rlinf:v1"
    actor.cpu, actor.memory, actor.shm = "4", "8Gi", "2Gi"
    rollout.selector, rollout.replicas, rollout.gpu = "kubernetes.io/hostname=local-gpu-1", "1", "2"
    rollout.image = "reg.example.com/rlinf:v1"
    env.selector, env.replicas, env.image = "rlinf.io/node-group=franka", "1", "reg.example.com/rlinf:v1"
    env.devices = [wz.Device("rlinf.io/device-franka", "1")]
    return state


def banner_codes(html: str) -> list[str]:
    """Codes in the wizard's error banner (each error exactly once)."""
    m = re.search(r'data-testid="wizard-errors">(.*?)</div>', html, re.S)
    return re.findall(r'data-code="([a-z_]+)"', m.group(1)) if m else []


def current_step(html: str) -> int:
    return int(re.search(r'data-step="(\d)"', html).group(1))


def post(client, state, action, url="/jobs/new/", **extra):
    return client.post(url, {**fields(state), "action": action, **extra}, **HX)


@pytest.mark.django_db
def test_page_labels_in_both_languages(client, admin_user, demo):
    client.force_login(admin_user)
    html = client.get("/jobs/new/", HTTP_ACCEPT_LANGUAGE="zh-hans").content.decode()
    for text in ("创建任务", "角色和资源", "Worker 配置", "公共配置", "YAML 预览", "强化学习任务", "添加角色"):
        assert text in html
    assert 'value="robot-policy-training"' in html
    client.cookies["django_language"] = "en"
    html = client.get("/jobs/new/").content.decode()
    for text in ("Create job", "Roles &amp; Resources", "Worker Config", "Common Config", "YAML Preview", "RL job"):
        assert text in html


@pytest.mark.django_db
def test_next_validates_earlier_steps_and_jumps_to_the_first_failing_one(client, admin_user, demo):
    client.force_login(admin_user)
    state = wz.initial_state(["local"])
    state.name = "My-Job"
    html = post(client, state, "next").content.decode()
    assert current_step(html) == 1 and banner_codes(html) == ["job_name_invalid"]
    state.name = "ok"
    html = post(client, state, "next").content.decode()
    assert current_step(html) == 2 and banner_codes(html) == []  # step-2 problems wait for step 2
    state.step = 2
    html = post(client, state, "goto:4").content.decode()
    assert current_step(html) == 2
    assert {"image_missing", "node_selector_empty", "replicas_zero"} <= set(banner_codes(html))
    state.step = 2
    html = post(client, state, "prev").content.decode()  # going back is free and clears the error
    assert current_step(html) == 1 and banner_codes(html) == []


@pytest.mark.django_db
def test_wizard_submits_what_the_preview_showed(client, admin_user, demo):
    client.force_login(admin_user)
    state = rl_state()
    state.step = 3
    html = post(client, state, "next").content.decode()
    assert current_step(html) == 4, banner_codes(html)
    preview = re.search(r'data-testid="yaml-preview">(.*?)</pre>', html, re.S).group(1)
    state.step = 4
    response = post(client, state, "submit")
    assert response.status_code == 204 and response["HX-Redirect"] == "/jobs/ppo-demo/"
    job = Job.objects.get(name="ppo-demo")
    import html as htmllib

    assert render_yaml(job.spec) == htmllib.unescape(preview)
    assert [t["name"] for t in job.spec["spec"]["tasks"]] == ["actor", "rollout", "environment"]
    again = post(client, state, "submit").content.decode()  # same name again -> step 1
    assert current_step(again) == 1 and banner_codes(again) == ["job_exists"]


@pytest.mark.django_db
def test_same_codes_through_wizard_validator_and_yaml_page(client, admin_user, demo):
    client.force_login(admin_user)
    state = rl_state()
    state.name = "Bad_Name"
    state.roles[1].name = "actor "  # duplicate of Actor after trim + lower-case
    state.roles[0].selector = "rlark.io/node-category=cloud"  # header matches 2 nodes
    state.roles[2].image = "ubuntu: 22.04"
    state.roles[2].env = [wz.EnvVar("DB_PASSWORD", "hunter2")]
    state.run_script = ""
    document = normalize(wz.to_document(state))
    expected = validate(document, Inventory.from_db(admin_user)).codes()
    assert {"job_name_invalid", "role_name_duplicate", "header_match_not_one", "image_whitespace"} <= set(expected)
    state.step = 4
    wizard_codes = banner_codes(post(client, state, "submit").content.decode())
    assert sorted(wizard_codes) == sorted(expected)
    assert not Job.objects.exists()
    yaml_page = client.post("/jobs/new/yaml/", {"text": render_yaml(document), "action": "submit"})
    assert yaml_page.status_code == 400
    yaml_codes = re.findall(r'data-code="([a-z_]+)"', yaml_page.content.decode().split("yaml-errors")[1])
    assert sorted(yaml_codes[: len(expected)]) == sorted(expected)


@pytest.mark.django_db
def test_rlinf_import_proposes_a_placeable_two_worker_job(client, admin_user, demo):
    client.force_login(admin_user)
    state = wz.initial_state(["local"])
    upload = SimpleUploadedFile("charger.yaml", CHARGER.read_bytes())
    html = post(client, state, "import_rlinf", rlinf_file=upload).content.decode()
    assert 'data-testid="wizard-notice"' in html and banner_codes(html) == []
    roles = dict(re.findall(r'name="(r\d-(?:name|selector|replicas|gpu|dev0-key))" value="([^"]*)"', html))
    assert roles["r0-name"] == "4090" and roles["r0-selector"] == "rlinf.io/node-group=4090"
    assert roles["r1-name"] == "franka" and roles["r1-selector"] == "rlinf.io/node-group=franka"
    assert roles["r0-replicas"] == roles["r1-replicas"] == "1"
    assert int(roles["r0-gpu"]) >= 1 and roles["r1-dev0-key"] == "rlinf.io/device-franka"
    assert CHARGER.read_text()[:40] in html  # the config stays attached (hidden field)
    # The user adds the images; the job is then valid and placeable on the demo cluster.
    data = {k: v for k, v in re.findall(r'name="([^"]+)" value="([^"]*)"', html) if not k.startswith("csrf")}
    data.update({"r0-image": "reg.example.com/rlinf:v1", "r1-image": "reg.example.com/rlinf:v1"})
    data.update({"r0-cluster": "local", "r1-cluster": "local", "run_script": "bash run.sh", "step": "3"})
    data["rlinf_config"] = CHARGER.read_text()
    # The config ships robot_ip: ROBOT_IP, which RLinf refuses: step 1 offers the acknowledgement, unticked.
    assert 'data-testid="acknowledge-rlinf_robot_ip_invalid"' in html
    assert data.pop("acknowledged") == "rlinf_robot_ip_invalid"  # the checkbox's value, not ticked
    assert 'name="acknowledged" value="rlinf_robot_ip_invalid" >' in html
    html = client.post("/jobs/new/", {**data, "action": "next"}, **HX).content.decode()
    assert current_step(html) == 1 and banner_codes(html) == ["rlinf_robot_ip_invalid"]
    assert "cluster.node_groups[1].hardware.configs[0].robot_ip" in html and "ROBOT_IP" in html
    data["acknowledged"] = "rlinf_robot_ip_invalid"  # the user ticks it
    html = client.post("/jobs/new/", {**data, "action": "next"}, **HX).content.decode()
    assert current_step(html) == 4, banner_codes(html)
    assert 'data-code="rlinf_robot_ip_invalid"' in html  # still shown among the warnings
    assert client.post("/jobs/new/", {**data, "step": "4", "action": "submit"}, **HX).status_code == 204
    job = Job.objects.get(name="robot-policy-training")
    assert job.spec["metadata"]["annotations"]["rlark.io/acknowledged-checks"] == "rlinf_robot_ip_invalid"
    # Editing shows the box ticked; unticking it withdraws the acknowledgement, so the change is refused.
    html = client.get("/jobs/robot-policy-training/edit/").content.decode()
    assert 'name="acknowledged" value="rlinf_robot_ip_invalid" checked' in html
    data = {k: v for k, v in re.findall(r'name="([^"]+)" value="([^"]*)"', html) if not k.startswith("csrf")}
    assert data.pop("acknowledged") == "rlinf_robot_ip_invalid"
    data.update({"r0-cluster": "local", "r1-cluster": "local", "rlinf_config": CHARGER.read_text()})
    data.update({"run_script": "bash run.sh", "step": "4", "action": "submit"})
    html = client.post("/jobs/robot-policy-training/edit/", data, **HX).content.decode()
    assert banner_codes(html) == ["rlinf_robot_ip_invalid"]
    tasks = job.spec["spec"]["tasks"]
    assert [(t["name"], t["head"], t["kubernetes"]["workload"]["replicas"]) for t in tasks] == [
        ("4090", True, 1),
        ("franka", False, 1),
    ]
    assert job.rlinf_config.startswith("defaults:")


@pytest.mark.django_db
def test_clone_edit_and_restart_reuse_the_wizard(client, alice, bob, demo):
    client.force_login(alice)
    job = submission.create_job(alice, wz.to_document(rl_state()))
    html = client.get("/jobs/new/?clone=ppo-demo").content.decode()
    assert 'value="ppo-demo-copy"' in html and 'value="2Gi"' in html  # shm kept on clone
    html = client.get("/jobs/ppo-demo/edit/").content.decode()
    assert "编辑任务" in html and 'name="name" value="ppo-demo"' in html and "readonly" in html
    state = wz.from_document(job.spec)
    state.roles[1].gpu = "1"
    state.step = 4
    # The job drives a robot (device rlinf.io/device-franka), so it was stored stopped until a safety approval; the
    # edit form carries that state (its hidden "stopped" field) and the edit keeps the job stopped.
    assert job.stopped is True
    assert post(client, state, "submit", url="/jobs/ppo-demo/edit/", stopped="1").status_code == 204
    job.refresh_from_db()
    rollout = job.spec["spec"]["tasks"][1]["kubernetes"]["workload"]["template"]["spec"]["containers"][0]
    assert rollout["resources"]["requests"]["nvidia.com/gpu"] == 1
    html = client.get("/jobs/ppo-demo/edit/?restart=1").content.decode()
    assert "编辑并重启任务" in html and "编辑后重启" in html, re.findall(r"<h1>.*?</h1>", html, re.S)
    client.force_login(bob)
    assert client.get("/jobs/ppo-demo/edit/").status_code == 404
    assert client.get("/jobs/new/?clone=ppo-demo").status_code == 404


@pytest.mark.django_db
def test_live_match_count_is_global_with_per_cluster_breakdown(client, admin_user, demo):
    other = Cluster.objects.create(name="edge", runtime="local", status="online")
    upsert_local_nodes(other, [{"name": "edge-0", "labels": {"pool": "rollout"}, "capacity": {"cpu": 4}}])
    client.force_login(admin_user)
    client.cookies["django_language"] = "en"
    html = client.post("/jobs/new/match/1/", {"r1-selector": "pool=rollout", "header": "0"}).content.decode()
    assert "Matches 3 nodes globally" in html and "local: 2" in html and "edge: 1" in html
    assert "more than one cluster" in html
    html = client.post("/jobs/new/match/0/", {"r0-selector": "pool=rollout", "header": "0"}).content.decode()
    assert "must match exactly 1 node" in html
    html = client.post("/jobs/new/match/0/", {"r0-selector": "pool=head", "header": "0"}).content.decode()
    assert "Matches 1 node globally" in html and "local/local-gpu-0" in html


@pytest.mark.django_db
def test_label_chip_sets_selector_and_replicas_from_the_global_match(client, admin_user, demo):
    client.force_login(admin_user)
    state = rl_state()
    state.roles[1].selector = ""
    state.step = 2
    html = post(client, state, "add_label:1:pool=rollout").content.decode()
    assert 'name="r1-selector" value="pool=rollout"' in html
    assert 'name="r1-replicas" value="2"' in html
    html = post(client, state, "add_role").content.decode()
    assert 'name="r3-name" value="' in html and 'name="role_count" value="4"' in html


@pytest.mark.django_db
def test_yaml_page_validates_and_opens_in_the_wizard(client, admin_user, demo):
    client.force_login(admin_user)
    text = render_yaml(normalize(wz.to_document(rl_state())))
    html = client.post("/jobs/new/yaml/", {"text": text, "action": "validate"}).content.decode()
    assert 'data-testid="yaml-valid"' in html
    html = client.post("/jobs/new/yaml/", {"text": text, "action": "wizard"}).content.decode()
    assert 'name="r2-selector" value="rlinf.io/node-group=franka"' in html
    bad = client.post("/jobs/new/yaml/", {"text": "a: [", "action": "validate"})
    assert bad.status_code == 400 and 'data-code="yaml_invalid"' in bad.content.decode()
    upload = SimpleUploadedFile("job.yaml", text.encode())
    assert client.post("/jobs/new/yaml/", {"file": upload, "action": "submit"}).status_code == 302
    assert Job.objects.filter(name="ppo-demo").exists()


def _ed25519_line() -> str:
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import ed25519

    key = ed25519.Ed25519PrivateKey.generate().public_key()
    return key.public_bytes(serialization.Encoding.OpenSSH, serialization.PublicFormat.OpenSSH).decode()


@pytest.mark.django_db
def test_common_config_domain_preselected_and_several_ssh_keys(client, alice, demo):
    from domains.services import create_domain
    from sshkeys.services import add_key

    create_domain("net-a", "10.100.0.0/16")
    k1 = add_key(alice, "laptop", _ed25519_line())
    k2 = add_key(alice, "desktop", _ed25519_line())
    client.force_login(alice)
    client.cookies["django_language"] = "en"
    html = client.get("/jobs/new/").content.decode()
    assert '<option value="net-a" selected>' in html
    assert 'data-testid="domain-preselected"' in html and "only network domain" in html
    state = rl_state()
    state.domain = "net-a"
    state.ssh_keys = [k1.key, k2.key]
    state.step = 4
    assert post(client, state, "submit").status_code == 204
    spec = Job.objects.get(name="ppo-demo").spec["spec"]
    assert spec["domain"] == "net-a" and spec["sshPublicKeys"] == [k1.key, k2.key]
    create_domain("net-b", "10.101.0.0/16")
    html = client.get("/jobs/new/").content.decode()
    assert 'data-testid="domain-preselected"' not in html  # two domains: none preselected


@pytest.mark.django_db
def test_preview_shows_warnings_and_demo_template_loads(client, admin_user, demo):
    client.force_login(admin_user)
    client.cookies["django_language"] = "en"
    state = rl_state()
    state.roles[1].image = "ubuntu"  # no tag: a warning, not an error
    state.step = 3
    html = post(client, state, "next").content.decode()
    assert current_step(html) == 4
    assert re.search(r'data-testid="wizard-warnings".*data-code="image_mutable_tag"', html, re.S)
    html = client.get("/jobs/new/?type=Demo").content.decode()
    assert 'name="name" value="cartpole-demo"' in html and 'name="r1-selector" value="pool=rollout"' in html
    state = wz.initial_state(["local"])
    state.job_type = "Demo"
    html = post(client, state, "template").content.decode()
    assert 'name="r0-name" value="header"' in html and 'name="r1-replicas" value="2"' in html


def form_fields(html: str) -> list[tuple[str, str]]:
    """The fields a browser would submit from the wizard form (inputs, checked boxes, textareas, selects)."""
    from html.parser import HTMLParser

    class Parser(HTMLParser):
        def __init__(self):
            super().__init__(convert_charrefs=True)
            self.fields: list[tuple[str, str]] = []
            self.textarea: list | None = None
            self.select: str | None = None
            self.option: list | None = None

        def handle_starttag(self, tag, attrs):
            a = dict(attrs)
            if tag == "input" and a.get("name") and a.get("type") not in ("file", "submit"):
                if a.get("type") != "checkbox" or "checked" in a:
                    self.fields.append((a["name"], a.get("value") or ""))
            elif tag == "textarea" and a.get("name"):
                self.textarea = [a["name"], ""]
            elif tag == "select":
                self.select = a.get("name")
            elif tag == "option" and self.select and "selected" in a:
                self.fields.append((self.select, a.get("value") or ""))

        def handle_data(self, data):
            if self.textarea is not None:
                self.textarea[1] += data

        def handle_endtag(self, tag):
            if tag == "textarea" and self.textarea is not None:
                value = self.textarea[1][1:] if self.textarea[1].startswith("\n") else self.textarea[1]
                self.fields.append((self.textarea[0], value))
                self.textarea = None
            elif tag == "select":
                self.select = None

    parser = Parser()
    parser.feed(html)
    return [(k, v) for k, v in parser.fields if k != "csrfmiddlewaretoken"]


@pytest.mark.django_db
def test_unchanged_edit_through_the_form_keeps_the_stored_document(client, admin_user, demo):
    from django.http import QueryDict

    document = normalize(wz.to_document(rl_state()))
    main = document["spec"]["tasks"][1]["kubernetes"]["workload"]["template"]["spec"]
    main["containers"][0]["env"].insert(0, {"name": "REF", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}})
    main["containers"][0]["volumeMounts"] = [{"name": "scratch", "mountPath": "/scratch"}]
    main["containers"].append({"name": "sidecar", "image": "busybox:1.36", "command": ["sleep", "inf"]})
    main["volumes"] = [{"name": "scratch", "emptyDir": {}}]
    document["spec"]["tasks"][0]["prepareScript"] = 'echo "a <b> & c"\nexport X=1'
    job = submission.create_job(admin_user, document)
    before = render_yaml(job.spec)
    client.force_login(admin_user)
    html = client.get("/jobs/ppo-demo/edit/").content.decode()
    data = QueryDict(mutable=True)
    for key, value in form_fields(html):
        data.appendlist(key, value)
    data["step"] = "4"
    data["action"] = "submit"
    response = client.post("/jobs/ppo-demo/edit/", data, **HX)
    assert response.status_code == 204, banner_codes(response.content.decode())
    job.refresh_from_db()
    assert render_yaml(job.spec) == before


@pytest.mark.django_db
def test_name_generated_from_the_display_name_is_fixed_before_the_preview(client, admin_user, demo):
    client.force_login(admin_user)
    state = rl_state()
    state.name = ""
    state.display_name = "PPO 训练"
    state.step = 3
    html = post(client, state, "next").content.decode()
    assert current_step(html) == 4
    name = re.search(r'name="name" value="([^"]+)"', html).group(1)
    assert name.startswith("ppo-") and f"name: {name}" in html
    state.name, state.step = name, 4
    assert post(client, state, "submit")["HX-Redirect"] == f"/jobs/{name}/"


@pytest.mark.django_db
def test_rlinf_import_shows_the_configs_own_problems(client, admin_user, demo):
    client.force_login(admin_user)
    text = (RLINF / "emb_realworld_dual_franka_dagger_openpi.yaml").read_text()
    html = post(client, wz.initial_state(["local"]), "import_rlinf", rlinf_text=text).content.decode()
    assert "node_ranks_mismatch" in banner_codes(html)
    assert 'name="role_count" value="2"' in html  # header [0] + franka x2 [1-2] still proposed
    assert re.search(r'name="r1-replicas" value="2"', html)
    empty = post(client, wz.initial_state(["local"]), "import_rlinf").content.decode()
    assert 'data-testid="wizard-notice"' in empty


def test_demo_template_proposes_a_free_job_name(client, admin_user, demo):
    from jobs.models import Job

    client.force_login(admin_user)
    Job.objects.create(name="cartpole-demo", owner=admin_user, spec={})
    Job.objects.create(name="cartpole-demo-2", owner=admin_user, spec={})
    html = client.get("/jobs/new/?type=Demo").content.decode()
    assert 'value="cartpole-demo-3"' in html


@pytest.mark.django_db
def test_checkpoint_dir_beside_the_tensorboard_dir(client, admin_user, demo):
    """The common step has a checkpoint directory: written on the Header as checkpointDir, loaded on edit, filled
    from an attached RLinf config whose log path is absolute, and a relative one is refused in both languages."""
    client.force_login(admin_user)
    state = rl_state()
    state.step = 3
    state.checkpoint_dir = "checkpoints"  # not a container path
    for lang, words in (("en", "is not valid: give an absolute container path"), ("zh-hans", "绝对路径")):
        client.cookies["django_language"] = lang
        html = post(client, state, "next").content.decode()
        assert current_step(html) == 3 and banner_codes(html) == ["checkpoint_dir_invalid"] and words in html
    state.checkpoint_dir = "/data/results/ppo/checkpoints"
    state.step = 4
    assert post(client, state, "submit").status_code == 204
    header = Job.objects.get(name="ppo-demo").spec["spec"]["tasks"][0]
    assert header["head"] is True and header["checkpointDir"] == "/data/results/ppo/checkpoints"
    html = client.get("/jobs/ppo-demo/edit/").content.decode()
    assert 'name="checkpoint_dir" value="/data/results/ppo/checkpoints"' in html

    # an attached RLinf config (embodied layout: runner.logger.log_path/experiment_name/checkpoints) fills it
    config = CHARGER.read_text().replace('log_path: "../results"', 'log_path: "/mnt/results"')
    fresh = rl_state()
    fresh.name, fresh.step, fresh.rlinf_config = "ppo-two", 3, config
    html = post(client, fresh, "").content.decode()
    assert 'name="checkpoint_dir" value="/mnt/results/sac_mlp/checkpoints"' in html
    assert "/mnt/results/sac_mlp/checkpoints" in html.split('data-testid="checkpoint-dir-hint"')[1][:300]
