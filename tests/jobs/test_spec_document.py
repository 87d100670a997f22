"""parse_text / normalize / render_yaml (upstream-rlark 3.2, 7.4)."""

from __future__ import annotations

import time

import yaml

from jobs.jobspec.document import normalize, parse_text, render_yaml
from tests.spec_fixtures import base_doc, container, pod_spec


def test_parse_errors():
    assert parse_text("a: [", "application/yaml")[1][0].code == "yaml_invalid"
    assert parse_text("{", "application/json")[1][0].code == "document_invalid"
    assert parse_text("- 1\n- 2")[1][0].code == "document_invalid"
    assert parse_text("")[1][0].code == "document_invalid"
    doc, problems = parse_text('{"apiVersion": "rlinf.io/v1alpha1"}', "application/json")
    assert problems == [] and doc == {"apiVersion": "rlinf.io/v1alpha1"}


def test_billion_laughs_is_rejected():
    text = "a: &a [x, x, x, x, x, x, x, x, x, x]\n"
    for i in range(1, 8):
        text += f"{chr(97 + i)}: &{chr(97 + i)} [" + ", ".join([f"*{chr(96 + i)}"] * 10) + "]\n"
    doc, problems = parse_text(text)
    assert doc is None and problems[0].code == "document_invalid"


def test_normalize_defaults_and_pvc_recompute():
    doc = base_doc()
    del doc["apiVersion"]
    t = doc["spec"]["tasks"][0]
    del t["agentType"]
    del t["kubernetes"]["workload"]["kind"]
    # Upstream 3.2: storage oss-a at /mnt/data/, host /x, storage oss-b at / -> two PVC entries (job renamed later).
    pod_spec(doc, 0)["volumes"] = [
        {"name": "mnt-data", "persistentVolumeClaim": {"claimName": "pvc-old-name-actor-mnt-data"}},
        {"name": "x", "hostPath": {"path": "/x"}},
        {"name": "vol", "persistentVolumeClaim": {"claimName": "pvc-old-name-actor-vol"}},
    ]
    t["kubernetes"]["workload"]["pvcStorageMap"] = {
        "pvc-old-name-actor-mnt-data": "oss-a",
        "pvc-old-name-actor-vol": "oss-b",
    }
    doc["spec"]["sshPublicKey"] = "ssh-ed25519 AAAA k"
    container(doc, 0)["resources"] = {"requests": {"nvidia.com/gpu": "4", "rlinf.io/device-franka": "0"}}
    n = normalize(doc)
    nt = n["spec"]["tasks"][0]
    assert n["apiVersion"] == "rlinf.io/v1alpha1" and nt["agentType"] == "Kubernetes"
    assert nt["kubernetes"]["workload"]["kind"] == "StatefulSet"
    assert nt["kubernetes"]["workload"]["pvcStorageMap"] == {
        "pvc-ppo-job-actor-mnt-data": "oss-a",
        "pvc-ppo-job-actor-vol": "oss-b",
    }
    claims = [
        v["persistentVolumeClaim"]["claimName"] for v in pod_spec(n, 0)["volumes"] if "persistentVolumeClaim" in v
    ]
    assert claims == ["pvc-ppo-job-actor-mnt-data", "pvc-ppo-job-actor-vol"]
    assert n["spec"]["sshPublicKeys"] == ["ssh-ed25519 AAAA k"] and "sshPublicKey" not in n["spec"]
    assert container(n, 0)["resources"] == {"requests": {"nvidia.com/gpu": "4"}, "limits": {"nvidia.com/gpu": "4"}}
    assert normalize(n) == n  # idempotent
    assert (
        doc["spec"]["tasks"][0]["kubernetes"]["workload"]["pvcStorageMap"]
        != n["spec"]["tasks"][0]["kubernetes"]["workload"]["pvcStorageMap"]
    )  # input untouched


def test_render_order_and_omits_empty():
    doc = normalize(base_doc())
    doc["spec"]["domain"] = "d1"
    doc["spec"]["sshPublicKeys"] = ["ssh-ed25519 AAAA"]
    doc["spec"]["tasks"][1]["prepareScript"] = ""
    doc["spec"]["tasks"][0]["runScript"] = "cd /x\npython train.py"
    text = render_yaml(doc)
    lines = [line for line in text.splitlines() if not line.startswith(" ")]
    assert lines == ["apiVersion: rlinf.io/v1alpha1", "kind: Job", "metadata:", "spec:"]
    task_keys = [line.strip().split(":")[0].lstrip("- ") for line in text.splitlines() if line.startswith("  - ")]
    assert task_keys[:2] == ["name", "name"]
    first = text.split("  - name: actor")[1].split("  - name: rollout")[0]
    order = [k for k in ("head:", "agentType:", "role:", "cluster:", "nodeSelector:", "prepareScript:", "runScript:")]
    positions = [first.index(k) for k in order]
    assert positions == sorted(positions)
    assert "runScript: |-\n" in text
    spec_tail = text.split("\n  domain:")[1]
    assert spec_tail.index("sshPublicKeys") < spec_tail.index("stopped: false")
    rollout = text.split("  - name: rollout")[1]
    assert "prepareScript" not in rollout
    assert "head: false" in rollout
    assert yaml.safe_load(text)["spec"]["tasks"][1]["kubernetes"]["workload"]["replicas"] == 2
    assert render_yaml(doc) == render_yaml(normalize(yaml.safe_load(text)))  # stable round trip


def test_render_is_fast():
    doc = normalize(base_doc())
    start = time.perf_counter()
    for _ in range(50):
        render_yaml(doc)
    assert (time.perf_counter() - start) / 50 < 0.02


TRICKY = [
    *"yes no on off Y n ~ null Null 1 1.5 0x1F 1e3 1_000 - = << ... --- 12:30 0o17 +1 -1 .5 a:b a: 500m 64Gi".split(),
    *["- x", "a: b", "a #b", "#x", "@x", "`x", "*x", "&x", "!x", "%x", "|x", ">x", "'x", '"x', "{x", "[x", ", x"],
    *["", " lead", "trail ", "PPO 训练", "emoji 😀", "2001-01-01", "2001-01-01T10:00:00Z", "a\\b", "x" * 300],
    *["multi\nline", "multi\nline\n", "\nlead newline", "  indented\nx", "x\n\n", "\n", "tab\tx", "a\tb\nc"],
    *["\x07bell", "\u2028", "a\u2029b\nc", "\x85", "x\x85y", "a\r\nb", "line \nx", "\ufffe", "- a\n- b", "k: v\nk2: v"],
]


def test_render_round_trips_tricky_scalars():
    doc = {
        "apiVersion": "rlinf.io/v1alpha1",
        "spec": {
            "tasks": [
                {
                    "name": t,
                    "nodeSelector": {t or "k": t or "v"},
                    "env": [{"name": "X", "value": t}, t],
                    "n": [1, 1.5, 1e-05, float("inf"), True, None, [1, [2, t]], {}],
                }
                for t in TRICKY
            ]
        },
    }
    text = render_yaml(doc)
    from jobs.jobspec.document import clean

    assert yaml.safe_load(text) == clean(doc)
    assert render_yaml(doc) == text
