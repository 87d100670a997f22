"""An attached RLinf config reaches every Worker at /rlark/rlinf/config.yaml (both runtimes use these manifests)."""

from __future__ import annotations

from jobs.jobspec.manifests import build_task_manifests
from tests.jobs.test_manifests import CLUSTERS, JOB
from tests.shared_spec import RLINF_CONFIGS

CONFIG = RLINF_CONFIGS / "emb_realworld_charger_sac_cnn_async.yaml"
CONFIG_TEXT = CONFIG.read_text() if CONFIG.exists() else "cluster:\n  num_nodes: 2\n"


def _main(manifest):
    return next(c for c in manifest.workload["spec"]["template"]["spec"]["containers"] if c["name"] == "main")


def test_attached_config_is_mounted_in_every_worker():
    manifests = build_task_manifests(
        "robot-policy-training", JOB, clusters=CLUSTERS, registries=[], ssh_keys=[], rlinf_config=CONFIG_TEXT
    )
    assert manifests
    for m in manifests:
        main = _main(m)
        assert {"name": "RLARK_RLINF_CONFIG", "value": "/rlark/rlinf/config.yaml"} in main["env"]
        mount = next(v for v in main["volumeMounts"] if v["mountPath"] == "/rlark/rlinf")
        volumes = {v["name"]: v for v in m.workload["spec"]["template"]["spec"]["volumes"]}
        cm_name = volumes[mount["name"]]["configMap"]["name"]
        cm = next(o for o in m.extra_objects if o["kind"] == "ConfigMap" and o["metadata"]["name"] == cm_name)
        assert cm["data"]["config.yaml"] == CONFIG_TEXT
        assert cm["metadata"]["namespace"] == m.namespace


def test_no_config_no_mount():
    for m in build_task_manifests("robot-policy-training", JOB, clusters=CLUSTERS, registries=[], ssh_keys=[]):
        main = _main(m)
        assert not any(e["name"] == "RLARK_RLINF_CONFIG" for e in main["env"])
        assert not any(v["mountPath"] == "/rlark/rlinf" for v in main["volumeMounts"])
