"""The wizard's pure mapping (jobs.control.wizard): templates, defaults, role mapping, document round trip."""

from __future__ import annotations

import pytest
from django.http import QueryDict

from jobs.control import wizard as wz

CLUSTERS = ["local", "remote"]


@pytest.mark.parametrize(
    ("name", "kind"),
    [
        ("Actor", "Actor"),
        ("Learner", "Actor"),
        ("Rollout", "Rollout"),
        ("Environment", "Env"),
        ("Camera Worker", "Rollout"),
        ("Environment Sensor", "Env"),
        ("Data Collector", "Actor"),
        ("Planner", "Actor"),
        ("Robot Arm", "Env"),
        ("robot operator 2", "Rollout"),
        ("Metrics Worker", "Env"),
        ("Evaluation", "Actor"),
    ],
)
def test_role_mapping_of_upstream_7_4(name, kind):
    assert wz.role_kind_for(name) == kind


def test_job_type_templates_and_new_role_defaults():
    state = wz.initial_state(CLUSTERS)
    assert state.name == "robot-policy-training"
    assert state.run_script.startswith("python train.py --config /mnt/config/train.yaml")
    assert [r.name for r in state.roles] == ["Actor", "Rollout", "Environment"]
    assert [r.gpu for r in state.roles] == ["4", "0", "0"]
    assert {r.cluster for r in state.roles} == {"local"}
    assert all(r.replicas == "0" and r.selector == "" and r.image == "" for r in state.roles)
    state.roles[2].image = "img:1"
    state.header = 2
    wz.apply_job_type(state, "Evaluation", CLUSTERS)
    assert [r.name for r in state.roles] == ["Rollout", "Environment"]
    assert state.roles[1].image == "img:1"  # kept: same name
    assert state.header == 0
    wz.apply_job_type(state, "Custom", CLUSTERS)
    assert state.roles == []
    wz.add_role(state, CLUSTERS)
    wz.add_role(state, CLUSTERS)
    assert [r.name for r in state.roles] == ["new-role", "new-role-2"]
    assert [r.template_name for r in state.roles] == ["new-role", "new-role-2"]  # no "-20-"
    assert state.roles[0].gpu == "0"


def test_rename_ignores_blank_and_duplicates_and_remove_keeps_header():
    state = wz.initial_state(CLUSTERS)
    wz.rename_role(state, 1, "  ")
    wz.rename_role(state, 1, "Actor")
    assert state.roles[1].name == "Rollout"
    wz.rename_role(state, 1, "Rollout Worker")
    assert state.roles[1].name == "Rollout Worker"
    assert state.roles[1].template_name == "rollout-20-worker"
    state.header = 2
    wz.remove_role(state, 0)
    assert state.header == 1 and state.roles[state.header].name == "Environment"
    wz.remove_role(state, 1)
    assert state.header_index == 0


def _full_state() -> wz.WizardState:
    state = wz.initial_state(CLUSTERS)
    state.name = "ppo-job"
    state.display_name = "PPO 训练"
    actor, rollout, env = state.roles
    actor.selector = "pool=head"
    actor.replicas = "1"
    actor.image = "reg/rlinf:v1"
    actor.cpu, actor.memory, actor.shm = "8", "32Gi", "8Gi"
    actor.prepare_script = "source /opt/venv/bin/activate\necho ready"
    actor.env = [wz.EnvVar("OMP_NUM_THREADS", "8")]
    actor.mounts = [
        wz.Mount("storage", "/mnt/data/", "", "oss-a"),
        wz.Mount("host", "/x", "/data/x", ""),
        wz.Mount("storage", "/", "", "oss-b"),
    ]
    rollout.selector = "kubernetes.io/hostname=local-gpu-1"
    rollout.replicas = "1"
    rollout.gpu = "2"
    rollout.image = "reg/rlinf:v1"
    env.selector = "kubernetes.io/hostname=local-robot-0"
    env.replicas = "1"
    env.image = "reg/rlinf:v1"
    env.devices = [wz.Device("rlinf.io/device-franka", "1")]
    state.domain = "dom-a"
    state.ssh_keys = ["ssh-ed25519 AAAA1", "ssh-ed25519 AAAA2"]
    state.tensorboard_dir = "/data/tb"
    return state


def test_document_mapping_follows_upstream_7_4_and_3_2():
    doc = wz.to_document(_full_state())
    assert doc["apiVersion"] == "rlinf.io/v1alpha1" and doc["kind"] == "Job"
    assert doc["metadata"] == {"name": "ppo-job", "annotations": {"rlark.io/display-name": "PPO 训练"}}
    actor, rollout, env = doc["spec"]["tasks"]
    assert list(actor)[:6] == ["name", "head", "agentType", "role", "cluster", "nodeSelector"]
    assert (actor["name"], actor["head"], actor["role"], actor["cluster"]) == ("actor", True, "Actor", "local")
    assert actor["nodeSelector"] == {"pool": "head"}
    assert actor["runScript"] == wz.DEFAULT_RUN_SCRIPT and actor["tensorBoardDir"] == "/data/tb"
    assert "runScript" not in rollout and "tensorBoardDir" not in env
    assert (rollout["role"], env["role"]) == ("Rollout", "Env")
    workload = actor["kubernetes"]["workload"]
    assert workload["kind"] == "StatefulSet" and workload["replicas"] == 1
    assert workload["pvcStorageMap"] == {"pvc-ppo-job-actor-mnt-data": "oss-a", "pvc-ppo-job-actor-vol": "oss-b"}
    main = workload["template"]["spec"]["containers"][0]
    assert main["name"] == "main"
    assert main["env"] == [
        {"name": "OMP_NUM_THREADS", "value": "8"},
        {"name": "RLARK_TASK_ROLE", "value": "Actor"},
    ]
    assert main["resources"]["requests"] == {"nvidia.com/gpu": 4, "cpu": 8, "memory": "32Gi"}
    assert main["resources"]["limits"] == main["resources"]["requests"]
    assert [m["mountPath"] for m in main["volumeMounts"]] == ["/mnt/data/", "/x", "/", "/dev/shm"]
    volumes = workload["template"]["spec"]["volumes"]
    assert volumes[-1] == {"name": "dshm", "emptyDir": {"medium": "Memory", "sizeLimit": "8Gi"}}
    assert volumes[1] == {"name": "x", "hostPath": {"path": "/data/x"}}
    env_main = env["kubernetes"]["workload"]["template"]["spec"]["containers"][0]
    assert env_main["resources"]["requests"] == {"rlinf.io/device-franka": 1}  # gpu "0" is not requested
    assert doc["spec"]["domain"] == "dom-a"
    assert doc["spec"]["sshPublicKeys"] == ["ssh-ed25519 AAAA1", "ssh-ed25519 AAAA2"]


def test_document_round_trip_keeps_everything_including_cpu_memory_shm():
    state = _full_state()
    doc = wz.to_document(state)
    back = wz.from_document(doc)
    assert wz.to_document(back) == doc
    assert back.roles[0].cpu == "8" and back.roles[0].shm == "8Gi"
    assert back.roles[0].mounts[0].storage_class == "oss-a"
    assert back.header == 0 and back.run_script == wz.DEFAULT_RUN_SCRIPT


def test_clone_prefill_uses_task_names_and_infers_cluster():
    doc = {
        "metadata": {"name": "src"},
        "spec": {
            "sshPublicKey": "ssh-ed25519 K",
            "tasks": [
                {"name": "w", "role": "Env", "nodeSelector": {"pool": "rollout"}},
                {"name": "h", "head": True, "role": "Actor", "runScript": "run", "nodeSelector": {"a": "1"}},
            ],
        },
    }
    state = wz.from_document(doc, infer_cluster=lambda sel: "remote" if sel.get("pool") else "local")
    assert [r.name for r in state.roles] == ["w", "h"]
    assert state.header == 1 and state.run_script == "run"
    assert [r.cluster for r in state.roles] == ["remote", "local"]
    assert state.roles[0].effective_kind == "Env"  # kept although "w" maps to Actor
    assert state.ssh_keys == ["ssh-ed25519 K"]


def test_form_fields_parse_back():
    data = QueryDict(mutable=True)
    data.update(
        {
            "name": "j",
            "display_name": "d",
            "job_type": "Custom",
            "header": "1",
            "step": "2",
            "active_role": "1",
            "role_count": "2",
            "r0-name": "A",
            "r0-selector": " pool=head ",
            "r0-replicas": "1",
            "r0-env_count": "1",
            "r0-env0-name": "X",
            "r0-env0-value": "1",
            "r1-name": "B",
            "r1-mnt_count": "1",
            "r1-mnt0-kind": "storage",
            "r1-mnt0-path": "/data",
            "r1-mnt0-class": "oss",
            "r1-dev_count": "1",
            "r1-dev0-key": "rlinf.io/device-franka",
            "r1-dev0-qty": "1",
            "run_script": "a\r\nb",
        }
    )
    data.setlist("ssh_keys", ["k1", "k2"])
    state = wz.from_post(data)
    assert (state.name, state.header, state.step, state.active_role) == ("j", 1, 2, 1)
    assert state.roles[0].selector == "pool=head" and state.roles[0].env[0].name == "X"
    assert state.roles[1].mounts[0].storage_class == "oss" and state.roles[1].devices[0].quantity == "1"
    assert state.ssh_keys == ["k1", "k2"] and state.run_script == "a\nb"


@pytest.mark.parametrize(
    ("path", "code", "step"),
    [
        ("metadata.name", "job_name_invalid", 1),
        ("spec.tasks", "roles_empty", 1),
        ("spec.tasks[1].name", "role_name_duplicate", 1),
        ("spec.tasks[0].head", "header_missing", 1),
        ("spec.tasks[2].kubernetes.workload.template.spec.containers[0].image", "image_missing", 2),
        ("spec.tasks[0].nodeSelector", "header_match_not_one", 2),
        ("spec.tasks[0].runScript", "run_script_missing", 3),
        ("spec.domain", "domain_unknown", 3),
        ("spec.sshPublicKeys[0]", "ssh_key_unknown", 3),
    ],
)
def test_problems_map_to_steps(path, code, step):
    class P:
        pass

    p = P()
    p.path, p.code = path, code
    assert wz.step_of(p) == step


def test_demo_job_round_trips_through_the_wizard_unchanged():
    from pathlib import Path

    from jobs.jobspec.document import normalize, parse_text, render_yaml

    text = (Path(__file__).resolve().parents[2] / "examples" / "demo" / "job.yaml").read_text()
    document, problems = parse_text(text, "application/yaml")
    assert not problems
    state = wz.from_document(document)
    assert [r.name for r in state.roles] == ["header", "rollout"] and state.header == 0
    assert state.roles[0].mounts[0].host_type == "DirectoryOrCreate"
    assert render_yaml(normalize(wz.to_document(state))) == render_yaml(normalize(document))


RICH = """
apiVersion: rlinf.io/v1alpha1
kind: Job
metadata: {name: rich, labels: {team: a}}
spec:
  tasks:
  - name: head
    head: true
    role: Actor
    cluster: local
    nodeSelector: {pool: head}
    runScript: python run.py
    kubernetes:
      workload:
        kind: StatefulSet
        replicas: 1
        pvcOptions:
          pvc-rich-head-data: {size: 20Gi, accessMode: ReadWriteOnce}
        pvcStorageMap: {pvc-rich-head-data: oss}
        template:
          metadata: {labels: {app: x}}
          spec:
            hostNetwork: true
            containers:
            - name: main
              image: reg/x:1
              command: [bash]
              ports: [{containerPort: 6006}]
              env:
              - {name: A, value: "1"}
              - name: TOKEN_REF
                valueFrom: {secretKeyRef: {name: s, key: k}}
              - {name: RLARK_TASK_ROLE, value: head}
              resources:
                requests: {cpu: 4, memory: 8Gi, ephemeral-storage: 10Gi, nvidia.com/gpu: 1}
                limits: {cpu: 8, memory: 8Gi, nvidia.com/gpu: 1}
              volumeMounts:
              - {name: data, mountPath: /data}
              - {name: scratch, mountPath: /scratch}
            - name: sidecar
              image: busybox:1.36
              volumeMounts: [{name: cfg, mountPath: /cfg}]
            volumes:
            - {name: data, persistentVolumeClaim: {claimName: pvc-rich-head-data}}
            - {name: scratch, emptyDir: {}}
            - {name: cfg, configMap: {name: c}}
"""


def test_fields_the_wizard_does_not_show_survive_an_edit():
    from jobs.jobspec.document import normalize, parse_text, render_yaml

    document, _problems = parse_text(RICH, "application/yaml")
    state = wz.from_document(document)
    role = state.roles[0]
    assert [m.path for m in role.mounts] == ["/data"] and [e.name for e in role.env] == ["A"]
    assert render_yaml(normalize(wz.to_document(state))) == render_yaml(normalize(document))
    role.cpu = "6"  # a changed request replaces the kept limit
    role.env.append(wz.EnvVar("B", "2"))
    main = wz.to_document(state)["spec"]["tasks"][0]["kubernetes"]["workload"]["template"]["spec"]["containers"][0]
    assert main["resources"]["limits"]["cpu"] == 6 and main["resources"]["requests"]["ephemeral-storage"] == "10Gi"
    assert [e["name"] for e in main["env"]] == ["A", "B", "TOKEN_REF", "RLARK_TASK_ROLE"]
    assert main["command"] == ["bash"]
