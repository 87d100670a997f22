"""The job creation wizard's state and its pure mapping to and from a Job document.

Source: upstream-rlark 7 (steps, templates, defaults, role mapping 7.4, clone/edit prefill 7.5).
The wizard never validates or renders by itself: ``to_document`` builds the plain Job document and the
caller hands it to ``jobs.jobspec.validator.validate`` / ``jobs.jobspec.document.render_yaml`` /
``jobs.control.submission`` (the single source of truth). Names of templates, volumes and PVCs come from
``jobs.jobspec.naming``.

Shapes
- ``WizardState``: everything the four steps hold; serialised as flat form fields (``to_fields``) and parsed
  back from a POST (``from_post``), so no half-written job is ever stored.
- ``RoleState``: one role = one Task template. Quantities are kept as the strings the user typed
  (``gpu="4"``, ``cpu="8"``, ``memory="32Gi"``, ``shm="8Gi"``); empty means "not requested".
"""

from __future__ import annotations

import copy
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from clusters.selectors import SelectorError, format_selector, parse_selector
from jobs.control import tracking
from jobs.jobspec.document import ACKNOWLEDGED, TASK_KEY_ORDER
from jobs.jobspec.layout import main_container
from jobs.jobspec.naming import pvc_name, to_resource_name, volume_name

API_VERSION = "rlinf.io/v1alpha1"
DISPLAY_NAME_ANNOTATION = "rlark.io/display-name"
ROLE_ENV = "RLARK_TASK_ROLE"
GPU_KEY = "nvidia.com/gpu"
DEVICE_PREFIX = "rlinf.io/"
SHM_VOLUME = "dshm"
SHM_PATH = "/dev/shm"

DEFAULT_JOB_NAME = "robot-policy-training"
DEFAULT_RUN_SCRIPT = "python train.py --config /mnt/config/train.yaml --dataset /mnt/dataset --output /mnt/checkpoints"
# Default names are valid template names as they are (``new-role``, not ``new-20-role``); names the
# user types keep upstream's encoding (jobs.jobspec.naming.to_resource_name).
NEW_ROLE_NAME = "new-role"  # the same in both languages

# 7.1: job types and their role templates (labels translated in the template layer).
JOB_TYPES: dict[str, list[str]] = {
    "RL": ["Actor", "Rollout", "Environment"],
    "DataCollection": ["Environment"],
    "Evaluation": ["Rollout", "Environment"],
    "Custom": [],
}
DEMO_TYPE = "Demo"

STEPS = (1, 2, 3, 4)

# 7.4 role mapping: exact names first, then case-insensitive substrings in order, default Actor.
_EXACT_ROLE = {
    **dict.fromkeys(
        [
            "Actor",
            "Learner",
            "Evaluator",
            "Scenario Runner",
            "Metrics Aggregator",
            "Collector",
            "Calibration Driver",
        ],
        "Actor",
    ),
    **dict.fromkeys(["Rollout", "Rollout Worker", "Robot Operator", "Camera Worker"], "Rollout"),
    **dict.fromkeys(
        ["Environment", "Env Worker", "Uploader", "Quality Checker", "Robot Worker", "Metrics Worker"], "Env"
    ),
}
_SUBSTRING_ROLE = [
    (("env", "uploader", "quality", "metrics worker"), "Env"),
    (("rollout", "camera", "robot operator"), "Rollout"),
    (("robot",), "Env"),
    (("collect", "eval"), "Actor"),
]
ROLE_KINDS = ("Actor", "Rollout", "Env")


def role_kind_for(name: str) -> str:
    """Upstream 7.4 ``role`` for a role display name.

    ``Camera Worker`` -> ``Rollout``; ``Environment Sensor`` -> ``Env``; ``Data Collector`` -> ``Actor``;
    ``Planner`` -> ``Actor``.
    """
    if name in _EXACT_ROLE:
        return _EXACT_ROLE[name]
    low = name.lower()
    for needles, kind in _SUBSTRING_ROLE:
        if any(n in low for n in needles):
            return kind
    return "Actor"


@dataclass
class EnvVar:
    name: str = ""
    value: str = ""


@dataclass
class Device:
    key: str = ""  # e.g. rlinf.io/device-franka
    quantity: str = ""


@dataclass
class Mount:
    kind: str = "host"  # host | storage
    path: str = ""  # mount path in the worker
    host_path: str = ""  # host directory (kind == host)
    storage_class: str = ""  # StorageClass name of the role's cluster (kind == storage)
    read_only: bool = False  # volumeMounts[].readOnly
    host_type: str = ""  # hostPath.type kept from a loaded document (e.g. DirectoryOrCreate)


@dataclass
class RoleState:
    name: str = ""
    kind: str = ""  # Actor | Rollout | Env; "" -> mapped from the name (7.4)
    cluster: str = ""
    selector: str = ""  # "k=v,k2=v2"
    replicas: str = "0"
    gpu: str = "0"
    cpu: str = ""
    memory: str = ""
    shm: str = ""
    image: str = ""
    prepare_script: str = ""
    env: list[EnvVar] = field(default_factory=list)
    devices: list[Device] = field(default_factory=list)
    mounts: list[Mount] = field(default_factory=list)
    # The template this role was loaded from (edit, clone, pasted YAML): fields the wizard does not show
    # (other containers, valueFrom env, other volume kinds, pvcOptions, limits above requests, ...) are kept.
    base: dict = field(default_factory=dict)

    @property
    def effective_kind(self) -> str:
        return self.kind if self.kind in ROLE_KINDS else role_kind_for(self.name.strip())

    @property
    def template_name(self) -> str:
        return to_resource_name(self.name.strip())


@dataclass
class WizardState:
    name: str = DEFAULT_JOB_NAME
    display_name: str = ""
    job_type: str = "RL"
    roles: list[RoleState] = field(default_factory=list)
    header: int = 0  # index into roles
    domain: str = ""
    ssh_keys: list[str] = field(default_factory=list)
    run_script: str = DEFAULT_RUN_SCRIPT
    tensorboard_dir: str = ""
    checkpoint_dir: str = ""  # Header's checkpointDir; empty: the attached RLinf config's (jobs.jobspec.checkpoints)
    rlinf_config: str = ""  # attached RLinf YAML text (validated against the layout)
    step: int = 1
    active_role: int = 0
    annotations: dict[str, str] = field(default_factory=dict)  # extra annotations kept on edit
    labels: dict[str, str] = field(default_factory=dict)  # metadata.labels kept on edit
    stopped: bool = False  # kept on edit: editing a stopped job does not start it
    acknowledged: list[str] = field(default_factory=list)  # codes of annotation rlark.io/acknowledged-checks
    tracking: list[str] = field(default_factory=list)  # the owner's tracking credentials picked (names)

    @property
    def header_index(self) -> int:
        """Effective header (7.1 rule 6): the chosen one if still present, else the first role."""
        return self.header if 0 <= self.header < len(self.roles) else 0


# --------------------------------------------------------------------------- defaults and templates


def new_role(name: str, clusters: list[str], *, gpu: str = "0") -> RoleState:
    """7.1 new-role defaults: cluster = first available, selector "", replicas 0, gpu as given, rest empty."""
    return RoleState(name=name, cluster=clusters[0] if clusters else "", gpu=gpu)


def apply_job_type(state: WizardState, job_type: str, clusters: list[str]) -> None:
    """7.1: changing the type replaces the roles by the template's, header = first role, and keeps the
    configuration of roles whose names match. GPU default ``4`` for the first template role, ``0`` else."""
    if job_type not in JOB_TYPES:
        return
    by_name = {r.name: r for r in state.roles}
    roles = []
    for i, name in enumerate(JOB_TYPES[job_type]):
        roles.append(by_name.get(name) or new_role(name, clusters, gpu="4" if i == 0 else "0"))
    state.job_type = job_type
    state.roles = roles
    state.header = 0
    state.active_role = 0


def initial_state(clusters: list[str], job_type: str = "RL") -> WizardState:
    """A fresh wizard: default job name and run script, RL template roles."""
    state = WizardState()
    apply_job_type(state, job_type, clusters)
    return state


def rename_role(state: WizardState, index: int, new_name: str) -> None:
    """7.1 inline rename: ignored if blank or an exact duplicate of another role's name."""
    new_name = new_name.strip()
    if not new_name or not (0 <= index < len(state.roles)):
        return
    if any(r.name == new_name for i, r in enumerate(state.roles) if i != index):
        return
    state.roles[index].name = new_name


def add_role(state: WizardState, clusters: list[str]) -> None:
    """``添加角色 / Add Role`` adds ``new-role`` (``new-role-2``, ...; gpu 0)."""
    base = NEW_ROLE_NAME
    taken = {r.name for r in state.roles}
    name, n = base, 2
    while name in taken:
        name, n = f"{base}-{n}", n + 1
    state.roles.append(new_role(name, clusters))
    state.active_role = len(state.roles) - 1


def remove_role(state: WizardState, index: int) -> None:
    """Remove a role; the header index follows the role it pointed at (first role if it was removed)."""
    if not (0 <= index < len(state.roles)):
        return
    del state.roles[index]
    if state.header == index:
        state.header = 0
    elif state.header > index:
        state.header -= 1
    state.active_role = min(state.active_role, max(len(state.roles) - 1, 0))


# --------------------------------------------------------------------------- state -> document


def _quantity(value: str) -> str | int:
    """Keep what the user typed; whole numbers become ints so the YAML reads ``gpu: 4``."""
    text = str(value).strip()
    return int(text) if text.isdigit() else text


def _nonzero(value: str) -> bool:
    text = str(value).strip()
    return bool(text) and text not in {"0", "0.0"}


_MANAGED_TASK_KEYS = tuple(k for k in TASK_KEY_ORDER if k != "kubernetes")  # the workload is kept apart
_MANAGED_CONTAINER_KEYS = ("name", "image", "env", "resources", "volumeMounts")


def _wizard_volume(volume: Mapping, mount_path: str) -> bool:
    """Volumes the wizard edits: hostPath, PVC, and the ``/dev/shm`` emptyDir."""
    return (
        "hostPath" in volume
        or "persistentVolumeClaim" in volume
        or ("emptyDir" in volume and mount_path == SHM_PATH)
        or not volume
    )


def _managed_resource(key: str) -> bool:
    return key in (GPU_KEY, "cpu", "memory") or key.startswith(DEVICE_PREFIX)


def _dict(value: Any) -> dict:
    return value if isinstance(value, dict) else {}


def _merge_base(base: Mapping, task: dict) -> dict:
    """Overlay the wizard's ``task`` on the template it was loaded from, keeping what the wizard does not edit."""
    base = copy.deepcopy(dict(base))
    out = {k: v for k, v in task.items() if k != "kubernetes"}
    out.update({k: v for k, v in base.items() if k not in _MANAGED_TASK_KEYS and k not in out and k != "kubernetes"})
    b_k8s = _dict(base.get("kubernetes"))
    b_wl = _dict(b_k8s.get("workload"))
    n_wl = task["kubernetes"]["workload"]
    wl = {k: n_wl[k] for k in ("kind", "replicas", "pvcStorageMap") if k in n_wl}
    wl.update({k: v for k, v in b_wl.items() if k not in ("kind", "replicas", "pvcStorageMap", "template")})
    b_tpl = _dict(b_wl.get("template"))
    b_spec = _dict(b_tpl.get("spec"))
    n_spec = n_wl["template"]["spec"]
    n_main = n_spec["containers"][0]
    containers = [c for c in b_spec.get("containers") or [] if isinstance(c, dict)]
    main_at = next((i for i, c in enumerate(containers) if c.get("name") == "main"), 0 if containers else None)
    b_main = containers[main_at] if main_at is not None else {}
    b_vols = {v.get("name"): v for v in b_spec.get("volumes") or [] if isinstance(v, dict)}
    main = dict(n_main)
    # env: keep valueFrom entries (secret references the wizard cannot show) before RLARK_TASK_ROLE
    kept_env = [e for e in b_main.get("env") or [] if isinstance(e, dict) and "valueFrom" in e]
    if kept_env:
        main["env"] = [*n_main["env"][:-1], *kept_env, n_main["env"][-1]]
    # resources: keep keys the wizard does not manage; keep a cpu/memory limit when the request is unchanged
    b_res = _dict(b_main.get("resources"))
    n_res = _dict(n_main.get("resources"))
    res = {k: v for k, v in b_res.items() if k not in ("requests", "limits")}
    for part in ("requests", "limits"):
        merged = {k: v for k, v in _dict(b_res.get(part)).items() if not _managed_resource(str(k))}
        merged.update(_dict(n_res.get(part)))
        if part == "limits":
            for key in ("cpu", "memory"):
                b_req, b_lim = _dict(b_res.get("requests")).get(key), _dict(b_res.get("limits")).get(key)
                if b_lim is not None and str(_dict(n_res.get("requests")).get(key)) == str(b_req):
                    merged[key] = b_lim
        if merged:
            res[part] = merged
    if res:
        main["resources"] = res
    else:
        main.pop("resources", None)
    # mounts and volumes: the wizard's, then the base's other ones
    kept_mounts = [
        m
        for m in b_main.get("volumeMounts") or []
        if isinstance(m, dict) and not _wizard_volume(_dict(b_vols.get(m.get("name"))), str(m.get("mountPath")))
    ]
    if kept_mounts:
        main["volumeMounts"] = [*(n_main.get("volumeMounts") or []), *kept_mounts]
    main.update({k: v for k, v in b_main.items() if k not in _MANAGED_CONTAINER_KEYS})
    if main_at is None:
        containers = [main]
    else:
        containers[main_at] = main
    managed_names = {
        m.get("name")
        for m in b_main.get("volumeMounts") or []
        if isinstance(m, dict) and _wizard_volume(_dict(b_vols.get(m.get("name"))), str(m.get("mountPath")))
    }
    new_vols = list(n_spec.get("volumes") or [])
    taken = {v["name"] for v in new_vols} | managed_names
    volumes = new_vols + [v for name, v in b_vols.items() if name not in taken]
    spec = {"containers": containers}
    if volumes:
        spec["volumes"] = volumes
    spec.update({k: v for k, v in b_spec.items() if k not in ("containers", "volumes")})
    template = {**{k: v for k, v in b_tpl.items() if k != "spec"}, "spec": spec}
    wl["template"] = template
    out["kubernetes"] = {**{k: v for k, v in b_k8s.items() if k != "workload"}, "workload": wl}
    return out


def role_template(state: WizardState, index: int) -> dict[str, Any]:
    """One ``spec.tasks[]`` item for role ``index`` (field order of upstream 7.4 plus ``cluster``)."""
    role = state.roles[index]
    head = index == state.header_index
    template_name = role.template_name
    try:
        selector: Any = parse_selector(role.selector)
    except SelectorError:
        selector = role.selector  # left as text: the validator reports it
    env = [{"name": e.name.strip(), "value": e.value} for e in role.env if e.name.strip() or e.value]
    env.append({"name": ROLE_ENV, "value": role.name.strip()})
    requests: dict[str, Any] = {}
    if _nonzero(role.gpu):
        requests[GPU_KEY] = _quantity(role.gpu)
    for dev in role.devices:
        if dev.key.strip() and _nonzero(dev.quantity):
            requests[dev.key.strip()] = _quantity(dev.quantity)
    if role.cpu.strip():
        requests["cpu"] = _quantity(role.cpu)
    if role.memory.strip():
        requests["memory"] = role.memory.strip()
    container: dict[str, Any] = {"name": "main", "image": role.image, "env": env}
    if requests:
        container["resources"] = {"requests": dict(requests), "limits": dict(requests)}
    mounts, volumes, pvc_map = [], [], {}
    job_name = state.name.strip()
    for m in role.mounts:
        vol = volume_name(m.path.strip())
        mount: dict[str, Any] = {"name": vol, "mountPath": m.path.strip()}
        if m.read_only:
            mount["readOnly"] = True
        mounts.append(mount)
        if m.kind == "storage":
            claim = pvc_name(job_name, template_name, vol)
            volumes.append({"name": vol, "persistentVolumeClaim": {"claimName": claim}})
            pvc_map[claim] = m.storage_class.strip()
        else:
            host: dict[str, Any] = {"path": m.host_path.strip()}
            if m.host_type:
                host["type"] = m.host_type
            volumes.append({"name": vol, "hostPath": host})
    if role.shm.strip():
        mounts.append({"name": SHM_VOLUME, "mountPath": SHM_PATH})
        volumes.append({"name": SHM_VOLUME, "emptyDir": {"medium": "Memory", "sizeLimit": role.shm.strip()}})
    if mounts:
        container["volumeMounts"] = mounts
    pod_spec: dict[str, Any] = {"containers": [container]}
    if volumes:
        pod_spec["volumes"] = volumes
    try:
        replicas: Any = int(str(role.replicas).strip())
    except ValueError:
        replicas = str(role.replicas).strip()
    workload: dict[str, Any] = {"kind": "StatefulSet", "replicas": replicas}
    if pvc_map:
        workload["pvcStorageMap"] = pvc_map
    workload["template"] = {"spec": pod_spec}
    task: dict[str, Any] = {
        "name": template_name,
        "head": head,
        "agentType": "Kubernetes",
        "role": role.effective_kind,
        "cluster": role.cluster,
        "nodeSelector": selector,
    }
    if role.prepare_script.strip():
        task["prepareScript"] = role.prepare_script
    if head:
        task["runScript"] = state.run_script
        if state.tensorboard_dir.strip():
            task["tensorBoardDir"] = state.tensorboard_dir.strip()
        if state.checkpoint_dir.strip():
            task["checkpointDir"] = state.checkpoint_dir.strip()
    task["kubernetes"] = {"workload": workload}
    return _merge_base(role.base, task) if role.base else task


def to_document(state: WizardState) -> dict[str, Any]:
    """The Job document the wizard submits. One task per role in role order; nothing dropped (an empty
    image is reported by the validator instead of silently dropping the role as upstream does)."""
    metadata: dict[str, Any] = {"name": state.name.strip()}
    annotations = {k: v for k, v in state.annotations.items() if k not in (DISPLAY_NAME_ANNOTATION, ACKNOWLEDGED)}
    if state.display_name.strip():
        annotations[DISPLAY_NAME_ANNOTATION] = state.display_name.strip()
    if state.acknowledged or state.rlinf_config.strip():  # "" (dropped when stored) withdraws an earlier one on edit
        annotations[ACKNOWLEDGED] = ",".join(sorted(set(state.acknowledged)))
    if annotations:
        metadata["annotations"] = annotations
    if state.labels:
        metadata["labels"] = dict(state.labels)
    spec: dict[str, Any] = {"tasks": [role_template(state, i) for i in range(len(state.roles))]}
    if state.domain:
        spec["domain"] = state.domain
    if state.ssh_keys:
        spec["sshPublicKeys"] = list(state.ssh_keys)
    tracking.to_spec(spec, state.tracking)
    if state.stopped:
        spec["stopped"] = True
    return {"apiVersion": API_VERSION, "kind": "Job", "metadata": metadata, "spec": spec}


# --------------------------------------------------------------------------- document -> state (7.5)


def _str(value: Any) -> str:
    return "" if value is None else str(value)


def role_from_template(template: Mapping, pvc_maps: Mapping | None = None) -> RoleState:
    """Prefill one role from a task template (upstream 7.5; RLark Console keeps CPU, memory and shm).

    Role name = the ``RLARK_TASK_ROLE`` display name when its slug equals the template name (so an unchanged
    round trip gives the same YAML), else the template name.
    """
    container = main_container(template)
    workload = ((template.get("kubernetes") or {}).get("workload") or {}) if isinstance(template, Mapping) else {}
    pvc_map = dict(workload.get("pvcStorageMap") or {})
    if pvc_maps:
        pvc_map.update(pvc_maps)
    tname = _str(template.get("name"))
    display = ""
    env: list[EnvVar] = []
    for item in container.get("env") or []:
        if not isinstance(item, dict):
            continue
        if item.get("name") == ROLE_ENV:
            display = _str(item.get("value"))
            continue
        if "valueFrom" in item:
            continue  # kept from ``base``
        env.append(EnvVar(_str(item.get("name")), _str(item.get("value"))))
    name = display if display and to_resource_name(display) == tname else tname
    requests = ((container.get("resources") or {}).get("requests") or {}) if container else {}
    devices = [Device(k, _str(v)) for k, v in requests.items() if str(k).startswith(DEVICE_PREFIX)]
    volumes = {}
    try:
        for v in workload["template"]["spec"].get("volumes") or []:
            if isinstance(v, dict):
                volumes[v.get("name")] = v
    except (KeyError, TypeError, AttributeError):
        pass
    mounts: list[Mount] = []
    shm = ""
    for vm in container.get("volumeMounts") or []:
        if not isinstance(vm, dict):
            continue
        vol = volumes.get(vm.get("name")) or {}
        path = _str(vm.get("mountPath"))
        if path == SHM_PATH and "emptyDir" in vol:
            shm = _str((vol.get("emptyDir") or {}).get("sizeLimit"))
            continue
        if not _wizard_volume(vol, path):
            continue  # emptyDir, configMap, ...: kept from ``base``
        read_only = vm.get("readOnly") is True
        if "persistentVolumeClaim" in vol:
            claim = _str((vol.get("persistentVolumeClaim") or {}).get("claimName"))
            mounts.append(Mount("storage", path, "", _str(pvc_map.get(claim)), read_only))
        else:
            host = vol.get("hostPath") or {}
            mounts.append(Mount("host", path, _str(host.get("path")), "", read_only, _str(host.get("type"))))
    selector = template.get("nodeSelector")
    try:
        selector_text = format_selector(parse_selector(selector)) if selector else ""
    except SelectorError:
        selector_text = _str(selector)
    kind = _str(template.get("role"))
    return RoleState(
        name=name,
        kind=kind if kind in ROLE_KINDS and kind != role_kind_for(name) else "",
        cluster=_str(template.get("cluster")),
        selector=selector_text,
        replicas=_str(workload.get("replicas", 1)),
        gpu=_str(requests.get(GPU_KEY, "0")),
        cpu=_str(requests.get("cpu", "")),
        memory=_str(requests.get("memory", "")),
        shm=shm,
        image=_str(container.get("image")),
        prepare_script=_str(template.get("prepareScript")),
        env=env,
        devices=devices,
        mounts=mounts,
        base=copy.deepcopy(dict(template)),
    )


def from_document(document: Mapping, *, infer_cluster=None) -> WizardState:
    """Prefill the wizard from a Job document (clone, edit, demo template, pasted YAML).

    ``infer_cluster(selector_dict) -> str`` fills a template without ``cluster`` (7.5: the cluster of the first
    node matching every selector key, else the first cluster).
    """
    document = copy.deepcopy(dict(document or {}))
    metadata = document.get("metadata") or {}
    spec = document.get("spec") or {}
    annotations = {str(k): _str(v) for k, v in (metadata.get("annotations") or {}).items()}
    state = WizardState(
        name=_str(metadata.get("name")),
        display_name=annotations.pop(DISPLAY_NAME_ANNOTATION, ""),
        acknowledged=[c.strip() for c in annotations.pop(ACKNOWLEDGED, "").split(",") if c.strip()],
        job_type="Custom",
        annotations=annotations,
        domain=_str(spec.get("domain")),
        run_script="",
        tensorboard_dir="",
        stopped=spec.get("stopped") is True,
        labels={str(k): _str(v) for k, v in (metadata.get("labels") or {}).items()},
        tracking=tracking.from_spec(spec),
    )
    keys = spec.get("sshPublicKeys")
    if keys is None and spec.get("sshPublicKey"):
        keys = [spec["sshPublicKey"]]
    state.ssh_keys = [_str(k) for k in keys or []]
    templates = [t for t in spec.get("tasks") or [] if isinstance(t, Mapping)]
    header = None
    for i, t in enumerate(templates):
        role = role_from_template(t)
        if not role.cluster and infer_cluster is not None:
            try:
                role.cluster = infer_cluster(parse_selector(t.get("nodeSelector")))
            except SelectorError:
                role.cluster = infer_cluster({})
        state.roles.append(role)
        if t.get("head") is True and header is None:
            header = i
            state.run_script = _str(t.get("runScript"))
            state.tensorboard_dir = _str(t.get("tensorBoardDir"))
            state.checkpoint_dir = _str(t.get("checkpointDir"))
    state.header = header or 0
    return state


# --------------------------------------------------------------------------- form fields <-> state


def _get(data: Mapping, key: str, default: str = "") -> str:
    value = data.get(key, default)
    return default if value is None else str(value)


def _int(value: Any, default: int = 0) -> int:
    try:
        return int(str(value).strip())
    except (TypeError, ValueError):
        return default


def _count(data: Any, key: str) -> int:
    """A ``*_count`` form field, clamped to ``[0, number of submitted fields]``: every counted item posts at
    least one field, so a typed ``role_count=1000000000`` never loops (or allocates) beyond the request's own
    size."""
    return min(max(_int(data.get(key), 0), 0), len(data))


def _json_dict(text: str) -> dict:
    if not text.strip():
        return {}
    try:
        value = json.loads(text)
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


def from_post(data) -> WizardState:
    """Parse the flat wizard fields of a POST (a ``QueryDict`` or plain dict; lists via ``getlist``)."""
    getlist = data.getlist if hasattr(data, "getlist") else (lambda k: list(data.get(k) or []))
    state = WizardState(
        name=_get(data, "name"),
        display_name=_get(data, "display_name"),
        job_type=_get(data, "job_type", "Custom"),
        header=_int(data.get("header"), 0),
        domain=_get(data, "domain"),
        ssh_keys=[k for k in getlist("ssh_keys") if k],
        run_script=_get(data, "run_script").replace("\r\n", "\n"),
        tensorboard_dir=_get(data, "tensorboard_dir"),
        checkpoint_dir=_get(data, "checkpoint_dir"),
        rlinf_config=_get(data, "rlinf_config").replace("\r\n", "\n"),
        step=min(max(_int(data.get("step"), 1), 1), 4),
        active_role=_int(data.get("active_role"), 0),
        stopped=_get(data, "stopped") == "1",
        acknowledged=[c for c in getlist("acknowledged") if c],
        tracking=tracking.picked(data),
    )
    for key in data:
        if key.startswith("ann:") and key[4:] != ACKNOWLEDGED:
            state.annotations[key[4:]] = _get(data, key)
        elif key.startswith("lbl:"):
            state.labels[key[4:]] = _get(data, key)
    for i in range(_count(data, "role_count")):
        p = f"r{i}-"
        role = RoleState(
            name=_get(data, p + "name"),
            kind=_get(data, p + "kind"),
            cluster=_get(data, p + "cluster"),
            selector=_get(data, p + "selector").strip(),
            replicas=_get(data, p + "replicas", "0"),
            gpu=_get(data, p + "gpu", "0"),
            cpu=_get(data, p + "cpu").strip(),
            memory=_get(data, p + "memory").strip(),
            shm=_get(data, p + "shm").strip(),
            image=_get(data, p + "image"),
            prepare_script=_get(data, p + "prepare").replace("\r\n", "\n"),
            base=_json_dict(_get(data, p + "base")),
        )
        for j in range(_count(data, p + "env_count")):
            role.env.append(EnvVar(_get(data, f"{p}env{j}-name"), _get(data, f"{p}env{j}-value")))
        for j in range(_count(data, p + "dev_count")):
            role.devices.append(Device(_get(data, f"{p}dev{j}-key"), _get(data, f"{p}dev{j}-qty")))
        for j in range(_count(data, p + "mnt_count")):
            role.mounts.append(
                Mount(
                    _get(data, f"{p}mnt{j}-kind", "host"),
                    _get(data, f"{p}mnt{j}-path"),
                    _get(data, f"{p}mnt{j}-host"),
                    _get(data, f"{p}mnt{j}-class"),
                    _get(data, f"{p}mnt{j}-ro") == "1",
                    _get(data, f"{p}mnt{j}-htype"),
                )
            )
        state.roles.append(role)
    state.active_role = min(max(state.active_role, 0), max(len(state.roles) - 1, 0))
    return state


# --------------------------------------------------------------------------- validator problems -> steps

_STEP1_CODES = {
    "job_name_invalid",
    "display_name_too_long",
    "roles_empty",
    "role_name_empty",
    "role_name_duplicate",
    "header_missing",
    "header_multiple",
    "num_nodes_mismatch",
    "node_ranks_mismatch",
    "job_exists",
    "job_name_unavailable",
    "task_name_too_long",
}
_STEP3_CODES = {"run_script_missing", "run_script_not_on_header", "domain_unknown", "ssh_key_unknown", *tracking.CODES}
_STEP1_PATH = re.compile(r"spec\.tasks(\[\d+\]\.(name|head))?")
_STEP3_FIELDS = ("runScript", "tensorBoardDir", "checkpointDir", "domain", "sshPublicKey")


def task_index(path: str) -> int | None:
    """Role index in a problem path: ``spec.tasks[2].image`` or ``spec.tasks.2.image`` -> 2; else ``None``."""
    text = str(path or "")
    marker = "tasks"
    pos = text.find(marker)
    if pos < 0:
        return None
    rest = text[pos + len(marker) :].lstrip("[.")
    digits = ""
    for ch in rest:
        if not ch.isdigit():
            break
        digits += ch
    return int(digits) if digits else None


def step_of(problem) -> int:
    """The wizard step where a validator problem is fixed (by code, then by path)."""
    code = getattr(problem, "code", "")
    path = str(getattr(problem, "path", "") or "")
    if code in _STEP1_CODES or path.startswith("metadata") or _STEP1_PATH.fullmatch(path):
        return 1
    if code in _STEP3_CODES or any(f in path for f in _STEP3_FIELDS):
        return 3
    if task_index(path) is not None:
        return 2
    if code in {"roles_empty"}:
        return 1
    return 2 if "tasks" in path else 1


# --------------------------------------------------------------------------- RLinf plan -> roles

NODE_GROUP_LABEL = "rlinf.io/node-group"


def apply_plan(state: WizardState, plan, nodes, clusters: list[str]) -> None:
    """Replace the roles by the roles an ``RLinfPlan`` proposes (header = rank 0 = first role).

    Per role: replicas and role kind from the plan; node selector ``rlinf.io/node-group=<group label>`` when a
    node carries that label (the convention of the demo cluster and of seed 03's "admin-verified labels"), else
    left empty for the user; cluster = the cluster of the first matching node; GPUs per worker = the plan's
    ``gpus``; a role with a ``hardware`` config requests one ``rlinf.io/device-<type>`` when the matched nodes
    offer that device. ``nodes``: objects with ``.labels``, ``.capacity`` and ``.cluster.name``.
    """
    roles: list[RoleState] = []
    for item in plan.roles:
        labels = [str(x) for x in item.get("labels") or []]
        selector = ""
        matched = []
        if len(labels) == 1:
            matched = [n for n in nodes if (n.labels or {}).get(NODE_GROUP_LABEL) == labels[0]]
            if matched:
                selector = f"{NODE_GROUP_LABEL}={labels[0]}"
        cluster = matched[0].cluster.name if matched else (clusters[0] if clusters else "")
        gpus = item.get("gpus")
        if gpus is None:
            gpus = inventory_gpus(matched if selector else [n for n in nodes if n.cluster.name == cluster])
        role = RoleState(
            name=str(item.get("name") or "worker"),
            cluster=cluster,
            selector=selector,
            replicas=str(item.get("replicas") or 0),
            gpu="" if gpus is None else str(gpus),  # unknown stays visibly empty, never a silent 0
        )
        kind = str(item.get("role") or "")
        if kind in ROLE_KINDS and kind != role_kind_for(role.name):
            role.kind = kind
        hardware = item.get("hardware") or {}
        if hardware.get("type"):
            key = f"rlinf.io/device-{str(hardware['type']).lower()}"
            if any(key in (n.capacity or {}) for n in matched):
                role.devices.append(Device(key, "1"))
        roles.append(role)
    state.roles = roles
    state.header = 0
    state.active_role = 0
    state.job_type = "Custom"


def inventory_gpus(nodes) -> int | None:
    """GPUs per node the nodes a role would land on offer (``nvidia.com/gpu`` capacity of those with GPUs), when
    they all agree; None when no node has GPUs or counts differ (rlinf.md 4.4: ``all`` -> the nodes' real GPUs)."""
    counts = set()
    for n in nodes:
        try:
            count = int(str((n.capacity or {}).get(GPU_KEY, "0")))
        except ValueError:
            continue
        if count > 0:
            counts.add(count)
    return counts.pop() if len(counts) == 1 else None
