"""The one Job validator: wizard, REST API, YAML import and the ``rlark`` CLI all call ``validate``.

``validate(document, inventory, rlinf_config=None) -> ValidationResult`` reports EVERY problem at once as
``Problem(path, code, params)`` (messages in ``jobs.jobspec.messages``), errors and warnings apart. It works on plain
data (a normalized document and an ``Inventory`` snapshot) and never touches the database.

Sources: upstream-rlark 2.5 "goes further", 3.2, 4.6, 7.1-7.3 (wizard rules, server-side here), seeds 03/04/05
("创建器无法进入下一步或提交"), rlinf.md 3 and 8 (num_nodes, node ranks). Node matching is GLOBAL: a selector is
matched against the nodes of ALL clusters (``node_selector_cross_cluster``, ``header_match_not_one``,
``replicas_mismatch``), keys ANDed and comma values "any of" (``clusters.selectors.matches``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from clusters import host_paths
from clusters.quantity import format_number, parse_quantity
from clusters.selectors import SelectorError, matcher, parse_selector
from clusters.system_nodes import is_system_node
from jobs.jobspec import checkpoints, robot, start_timeout, tracking, unknown_keys
from jobs.jobspec.document import (
    API_VERSION,
    DISPLAY_NAME,
    KIND,
    SHM_PATH,
    acknowledged_checks,
    display_name,
    is_extended,
    pod_spec,
)
from jobs.jobspec.inventory import Inventory, NodeInfo
from jobs.jobspec.layout import ROLE_ENV, display_role_of, main_container
from jobs.jobspec.messages import ERROR, WARNING, Problem
from jobs.jobspec.naming import head_service_name, task_name
from jobs.jobspec.rlinf import ACKNOWLEDGEABLE, plan
from jobs.jobspec.secret_values import SECRET_NAME, looks_secret_value, script_has_secret
from storage.services import StorageError, image_host, match_registry

JOB_NAME = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
TEMPLATE_NAME = re.compile(r"^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$")
ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
# Size bounds, checked BEFORE any regex sees the text. Scripts and env values end up as one
# ``NAME=value`` environment string of a Worker, which Linux caps at MAX_ARG_STRLEN = 128 KiB; 120 KiB leaves
# room for the name. Names: a DNS subdomain is at most 253 characters. Images: references longer than 1 KiB
# exist nowhere. Replicas: the documented cap of Workers per template and per RLinf config (rlinf.MAX_NUM_NODES).
MAX_VALUE_BYTES = 120 * 1024
MAX_NAME_CHARS = 253
MAX_IMAGE_CHARS = 1024
MAX_SSH_KEY_CHARS = 16 * 1024
MAX_REPLICAS = 10_000
ROLES = ("Actor", "Rollout", "Env")
ACCESS_MODES = ("ReadWriteOnce", "ReadWriteOncePod", "ReadWriteMany", "ReadOnlyMany")
RESERVED_ENV = ("RLINF_NODE_RANK", "POD_NAME")
SHADOWED = (
    "/",
    "/bin",
    "/boot",
    "/dev",
    "/etc",
    "/home",
    "/lib",
    "/lib64",
    "/opt",
    "/proc",
    "/rlark",
    "/rlark/scripts",
    "/root",
    "/sbin",
    "/sshd",
    "/sys",
    "/usr",
    "/usr/bin",
    "/usr/lib",
    "/usr/local",
    "/var",
    "/workspace",
)


@dataclass
class ValidationResult:
    """All problems of one document. ``workers`` = total Workers (sum of replicas, absent -> 1)."""

    problems: list[Problem] = field(default_factory=list)
    workers: int = 0

    @property
    def errors(self) -> list[Problem]:
        return [p for p in self.problems if p.severity == ERROR]

    @property
    def warnings(self) -> list[Problem]:
        return [p for p in self.problems if p.severity == WARNING]

    @property
    def valid(self) -> bool:
        return not self.errors

    def codes(self) -> list[str]:
        """Error codes in order (handy in tests)."""
        return [p.code for p in self.errors]

    def to_dict(self, lang: str = "zh-hans") -> dict[str, Any]:
        """``{valid, errors: [{path, code, message}], warnings: [...], workers}``."""
        return {
            "valid": self.valid,
            "errors": [p.to_dict(lang) for p in self.errors],
            "warnings": [p.to_dict(lang) for p in self.warnings],
            "workers": self.workers,
        }


def normalize_ssh_key(key: str) -> str:
    """``"ssh-ed25519 AAAA... comment"`` -> ``"ssh-ed25519 AAAA..."`` (type and base64 only)."""
    parts = str(key).split()
    return " ".join(parts[:2]) if len(parts) >= 2 else str(key).strip()


def _quantity(value: Any) -> float | None:
    try:
        q = parse_quantity(value)
    except ValueError:
        return None
    return q if q >= 0 else None


def _fmt(resource: str, value: float) -> str:
    if resource == "memory" or resource.startswith("ephemeral"):
        for unit, size in (("Ti", 2**40), ("Gi", 2**30), ("Mi", 2**20), ("Ki", 2**10)):
            if value >= size:
                return f"{format_number(round(value / size, 2))}{unit}"
    return format_number(round(value, 3))


def _image_mutable(image: str) -> bool:
    if "@" in image:
        return False
    last = image.rsplit("/", 1)[-1]
    if ":" not in last:
        return True
    return last.rsplit(":", 1)[1] == "latest"


class _Validator:
    def __init__(self, document: Any, inventory: Inventory, rlinf_config: dict | str | None):
        self.doc = document
        self.inv = inventory
        self.rlinf_config = rlinf_config
        self.problems: list[Problem] = []
        # (cluster, node) -> [(role label, path, {resource: amount})]
        self.node_demand: dict[tuple[str, str], list[tuple[str, str, dict[str, float]]]] = {}
        self.nodes_by_key: dict[tuple[str, str], NodeInfo] = {(n.cluster, n.name): n for n in inventory.nodes}

    def add(self, path: str, code: str, severity: str = ERROR, key: str = "", **params: Any) -> None:
        self.problems.append(Problem(path, code, params, severity, key))

    # --- document ---------------------------------------------------------------------------------------------------
    def run(self) -> ValidationResult:
        doc = self.doc
        if not isinstance(doc, dict):
            self.add("", "document_invalid", detail="the top level must be a mapping")
            return ValidationResult(self.problems)
        if doc.get("apiVersion") not in (None, "", API_VERSION):
            self.add("apiVersion", "api_version_invalid")
        if doc.get("kind") not in (None, "", KIND):
            self.add("kind", "kind_invalid")
        meta = doc.get("metadata") if isinstance(doc.get("metadata"), dict) else {}
        name = meta.get("name")
        name = name.strip() if isinstance(name, str) else ""
        if not name:
            self.add("metadata.name", "job_name_invalid", key="job_name_empty")
        elif len(name) > 63 or not JOB_NAME.match(name):
            self.add("metadata.name", "job_name_invalid")
        if len(display_name(doc)) > 128:
            self.add(f"metadata.annotations.{DISPLAY_NAME}", "display_name_too_long")
        spec = doc.get("spec")
        if not isinstance(spec, dict):
            self.add("spec", "document_invalid", detail="spec must be a mapping")
            return ValidationResult(self.problems)
        tracking.check(spec, self.inv.tracking_kinds, self.add)
        tasks = spec.get("tasks")
        if tasks is not None and not isinstance(tasks, list):
            self.add("spec.tasks", "document_invalid", detail="spec.tasks must be a list")
            tasks = []
        tasks = tasks or []
        if not tasks:
            self.add("spec.tasks", "roles_empty")

        workers = 0
        heads: list[int] = []
        seen_names: dict[str, int] = {}
        seen_roles: dict[str, int] = {}
        replicas_by_index: dict[int, int | None] = {}
        for i, t in enumerate(tasks):
            path = f"spec.tasks[{i}]"
            if not isinstance(t, dict):
                self.add(path, "document_invalid", detail="a task template must be a mapping")
                continue
            replicas = self.template(i, path, t, name, seen_names, seen_roles)
            replicas_by_index[i] = replicas
            workers += max(replicas or 0, 0)
            if t.get("head") is True:
                heads.append(i)

        if tasks and not heads:
            self.add("spec.tasks", "header_missing")
        if len(heads) > 1:
            for i in heads[1:]:
                self.add(f"spec.tasks[{i}].head", "header_multiple", count=len(heads))
        if heads:
            h = heads[0]
            head = tasks[h]
            label = self.label(head, h)
            if replicas_by_index.get(h) is not None and replicas_by_index[h] != 1:
                self.add(f"spec.tasks[{h}].kubernetes.workload.replicas", "header_replicas_not_one")
            if not str(head.get("runScript") or "").strip():
                self.add(f"spec.tasks[{h}].runScript", "run_script_missing")
            if h != 0:
                self.add(f"spec.tasks[{h}].head", "header_not_first", WARNING, role=label)

        self.shared_nodes()
        self.common(spec)
        if self.rlinf_config not in (None, ""):
            self.rlinf(tasks, replicas_by_index, workers)
        return ValidationResult(self.problems, workers)

    def label(self, t: dict, i: int) -> str:
        return display_role_of(t) or f"#{i + 1}"

    # --- one template ------------------------------------------------------------------------------------------------
    def template(
        self, i: int, path: str, t: dict, job: str, seen_names: dict[str, int], seen_roles: dict[str, int]
    ) -> int | None:
        """Check template ``t`` (``spec.tasks[i]`` at ``path``; ``job`` the Job's name, "" when invalid) and return
        its replicas (absent -> 1; None when invalid). ``seen_names``/``seen_roles``: casefolded template and role
        names -> the index that took them, shared by all templates."""
        role = self.label(t, i)
        self.template_name(i, path, t, job, seen_names, seen_roles)
        head = t.get("head") is True
        self.template_kind(path, t, role, head)
        k8s = t.get("kubernetes") if isinstance(t.get("kubernetes"), dict) else {}
        workload = k8s.get("workload") if isinstance(k8s.get("workload"), dict) else {}
        if workload.get("kind") not in (None, "", "StatefulSet"):
            self.add(f"{path}.kubernetes.workload.kind", "workload_kind_invalid", role=role)
        replicas = self.replicas(path, role, workload.get("replicas"))
        cluster, cluster_info = self.cluster(path, role, t.get("cluster"))

        container = main_container(t)
        cpath = f"{path}.kubernetes.workload.template.spec.containers[{self.container_index(t)}]"
        self.image(cpath, role, container.get("image"))
        demand = self.resources(path, cpath, role, container)
        matched = self.selector(path, t, role, head, replicas, cluster if cluster_info else "")
        if matched and replicas:
            self.capacity(path, cpath, role, replicas, matched, demand)
        self.mounts(path, cpath, role, t, container, workload, cluster, replicas or 0)
        self.env(cpath, role, container)
        self.scripts(path, role, t)
        return replicas

    def template_name(
        self, i: int, path: str, t: dict, job: str, seen_names: dict[str, int], seen_roles: dict[str, int]
    ) -> None:
        """The template's ``name`` (stripped): not empty, unique ignoring case (seed 05: "角色名非空，且忽略大小写后
        不重复"), a DNS label whose head Service name ``<job>-<name>-ray-head`` fits in 63 characters (a warning);
        the role's display name unique too."""
        tname = t.get("name")
        tname = tname.strip() if isinstance(tname, str) else ("" if tname is None else str(tname))
        if not tname:
            self.add(f"{path}.name", "role_name_empty")
        else:
            folded = tname.casefold()
            if folded in seen_names:
                self.add(f"{path}.name", "role_name_duplicate", name=tname)
            else:
                seen_names[folded] = i
                if len(tname) > 63 or not TEMPLATE_NAME.match(tname):
                    self.add(f"{path}.name", "role_name_invalid", name=tname)
                elif job:
                    service = head_service_name(task_name(job, tname))
                    if len(service) > 63:
                        self.add(
                            f"{path}.name", "task_name_too_long", WARNING, task=task_name(job, tname), service=service
                        )
        shown = display_role_of(t).strip().casefold()
        if shown and shown != tname.casefold():
            if shown in seen_roles and seen_roles[shown] != i:
                self.add(f"{path}.name", "role_name_duplicate", name=display_role_of(t))
            seen_roles.setdefault(shown, i)
        if tname:
            seen_roles.setdefault(tname.casefold(), i)

    def template_kind(self, path: str, t: dict, role: str, head: bool) -> None:
        """The RLinf role (``Actor``/``Rollout``/``Env``) and agent type (``Kubernetes``) are known; only the header
        has a run script (and a TensorBoard directory: a warning)."""
        if t.get("role") not in ROLES:
            self.add(f"{path}.role", "role_invalid", role=role)
        if t.get("agentType") not in (None, "", "Kubernetes"):
            self.add(f"{path}.agentType", "agent_type_invalid", role=role)
        if not head and str(t.get("runScript") or "").strip():
            self.add(f"{path}.runScript", "run_script_not_on_header", role=role)
        if not head and str(t.get("tensorBoardDir") or "").strip():
            self.add(f"{path}.tensorBoardDir", "tensorboard_not_on_header", WARNING, role=role)

    def replicas(self, path: str, role: str, raw: Any) -> int | None:
        """The workload's ``replicas``: absent -> 1; an int ``0..MAX_REPLICAS`` (0 is an error, still returned);
        anything else None (with a problem)."""
        rpath = f"{path}.kubernetes.workload.replicas"
        if raw is None:
            return 1
        if isinstance(raw, bool) or not isinstance(raw, int) or raw < 0:
            self.add(rpath, "replicas_invalid", role=role)
            return None
        if raw > MAX_REPLICAS:
            self.add(rpath, "replicas_too_large", role=role, limit=MAX_REPLICAS)
            return None
        if raw == 0:
            self.add(rpath, "replicas_zero", role=role)
        return raw

    def cluster(self, path: str, role: str, raw: Any) -> tuple[str, Any]:
        """``(cluster name, its inventory entry or None)``: the cluster is set (seed 05: "每个角色都选择了集群") and
        known; an offline one is a warning."""
        cluster = raw.strip() if isinstance(raw, str) else ""
        cluster_info = self.inv.clusters.get(cluster) if cluster else None
        if not cluster:
            self.add(f"{path}.cluster", "cluster_missing", role=role)
        elif cluster_info is None:
            self.add(f"{path}.cluster", "cluster_unknown", role=role, cluster=cluster)
        elif cluster_info.status != "online":
            self.add(
                f"{path}.cluster", "cluster_offline", WARNING, role=role, cluster=cluster, status=cluster_info.status
            )
        return cluster, cluster_info

    def image(self, cpath: str, role: str, raw: Any) -> None:
        """The main container's image is set (seed 05: "填写镜像"), at most ``MAX_IMAGE_CHARS``, without spaces; a
        mutable tag (none, ``latest``) and a registry without credentials are warnings."""
        image = raw if isinstance(raw, str) else ("" if raw is None else str(raw))
        if not image.strip():
            self.add(f"{cpath}.image", "image_missing", role=role)
        elif len(image) > MAX_IMAGE_CHARS:
            self._too_long(f"{cpath}.image", f"{role}: image", len(image), MAX_IMAGE_CHARS, "chars")
        elif re.search(r"\s", image):
            self.add(f"{cpath}.image", "image_whitespace", role=role)
        else:
            if _image_mutable(image):
                self.add(f"{cpath}.image", "image_mutable_tag", WARNING, role=role, image=image)
            self.registry(cpath, role, image)

    def scripts(self, path: str, role: str, t: dict) -> None:
        """``prepareScript`` and ``runScript`` fit in one environment string (``MAX_VALUE_BYTES``) and hold no
        secret (seed 05: no credentials in the job)."""
        for field_name in ("prepareScript", "runScript"):
            script = t.get(field_name)
            if not isinstance(script, str):
                continue
            size = len(script.encode("utf-8", "surrogatepass"))
            if size > MAX_VALUE_BYTES:
                self._too_long(f"{path}.{field_name}", f"{role}: {field_name}", size, MAX_VALUE_BYTES, "bytes")
            elif script_has_secret(script):
                self.add(f"{path}.{field_name}", "secret_in_spec", where=f"{role}: {field_name}")

    def _too_long(self, path: str, what: str, size: int, limit: int, unit: str) -> None:
        self.add(path, "value_too_long", what=what, size=size, limit=limit, key=f"value_too_long_{unit}")

    def registry(self, cpath: str, role: str, image: str) -> None:
        """Warn when the image's registry has no stored credentials and is not marked public (upstream-rlark 4.7:
        pull secrets come only from registries with credentials)."""

        try:
            reg = match_registry(image, self.inv.registries)
            host = image_host(image)
        except StorageError:
            return
        if reg is None or not (reg.public or reg.has_credentials):
            self.add(f"{cpath}.image", "image_registry_no_credentials", WARNING, role=role, image=image, host=host)

    def container_index(self, t: dict) -> int:
        containers = pod_spec(t).get("containers")
        if isinstance(containers, list):
            for j, c in enumerate(containers):
                if isinstance(c, dict) and c.get("name") == "main":
                    return j
        return 0

    def resources(self, path: str, cpath: str, role: str, container: dict) -> dict[str, float]:
        resources = container.get("resources") if isinstance(container.get("resources"), dict) else {}
        parsed: dict[str, dict[str, float]] = {"requests": {}, "limits": {}}
        for kind in ("requests", "limits"):
            values = resources.get(kind)
            if values is None:
                continue
            if not isinstance(values, dict):
                self.add(f"{cpath}.resources.{kind}", "document_invalid", detail=f"resources.{kind} must be a mapping")
                continue
            for res, value in values.items():
                q = _quantity(value)
                if q is None:
                    self.add(
                        f"{cpath}.resources.{kind}.{res}", "quantity_invalid", role=role, resource=res, value=value
                    )
                    continue
                if is_extended(res) and not float(q).is_integer():
                    self.add(f"{cpath}.resources.{kind}.{res}", "gpu_not_integer", role=role, resource=res)
                    continue
                parsed[kind][res] = q
        req, lim = parsed["requests"], parsed["limits"]
        for res in set(req) & set(lim):
            if is_extended(res) and req[res] != lim[res]:
                self.add(
                    f"{cpath}.resources.requests.{res}", "extended_request_limit_mismatch", role=role, resource=res
                )
            elif not is_extended(res) and req[res] > lim[res]:
                self.add(
                    f"{cpath}.resources.requests.{res}",
                    "request_exceeds_limit",
                    role=role,
                    resource=res,
                    request=_fmt(res, req[res]),
                    limit=_fmt(res, lim[res]),
                )
        demand = dict(lim)
        demand.update(req)
        return {k: v for k, v in demand.items() if v > 0}

    def selector(self, path: str, t: dict, role: str, head: bool, replicas: int | None, cluster: str) -> list[NodeInfo]:
        spath = f"{path}.nodeSelector"
        try:
            sel = parse_selector(t.get("nodeSelector"))
        except SelectorError as exc:
            self.add(spath, "node_selector_invalid", role=role, detail=str(exc))
            return []
        if not sel:
            self.add(spath, "node_selector_empty", role=role)
            return []
        for key, value in sel.items():
            if "," in value:
                self.add(f"{spath}.{key}", "node_selector_multivalue", role=role, label=key, value=value)
            if not value:
                self.add(f"{spath}.{key}", "node_selector_invalid", role=role, detail=f"empty value for {key}")
        match = matcher(sel)
        # system (control-plane) nodes never run Workers: they neither match nor count toward replicas
        matched = [n for n in self.inv.nodes if match(n.labels) and not is_system_node(n.labels)]
        if not matched:
            self.add(spath, "node_selector_no_match", role=role)
            return []
        clusters = sorted({n.cluster for n in matched})
        if len(clusters) > 1:
            self.add(spath, "node_selector_cross_cluster", role=role, clusters=", ".join(clusters))
        elif cluster and clusters[0] != cluster:
            self.add(spath, "node_selector_cluster_mismatch", role=role, matched=clusters[0], cluster=cluster)
        if head:
            if len(matched) != 1:
                self.add(spath, "header_match_not_one", role=role, count=len(matched))
        elif replicas and replicas != len(matched):
            self.add(
                f"{path}.kubernetes.workload.replicas",
                "replicas_mismatch",
                role=role,
                replicas=replicas,
                count=len(matched),
            )
        down = [n.name for n in matched if not n.schedulable]
        if down and len(down) == len(matched):
            # Every matched node is offline or cordoned: no Worker can start (seed 05: "至少匹配一个可用节点").
            self.add(spath, "node_selector_no_match", role=role)
        elif down:
            self.add(spath, "node_unschedulable", WARNING, role=role, nodes=", ".join(down))
        return matched

    def capacity(
        self, path: str, cpath: str, role: str, replicas: int, matched: list[NodeInfo], demand: dict[str, float]
    ) -> None:
        usable = [n for n in matched if n.schedulable]
        if not usable:
            return
        for res, amount in demand.items():
            frees = [n.free(res) for n in usable]
            best = max(frees)
            rpath = f"{cpath}.resources.requests.{res}"
            if amount > best:
                if is_extended(res):
                    self.add(rpath, "gpu_exceeds_node", role=role, amount=_fmt(res, amount), resource=res)
                else:
                    self.add(
                        rpath,
                        "resource_exceeds_node",
                        role=role,
                        resource=res,
                        amount=_fmt(res, amount),
                        available=_fmt(res, best),
                    )
                continue
            total_free = sum(frees)
            if is_extended(res) and replicas * amount > total_free:
                self.add(
                    rpath,
                    "gpu_exceeds_node",
                    key="gpu_exceeds_pool",
                    role=role,
                    requested=_fmt(res, replicas * amount),
                    available=_fmt(res, total_free),
                    resource=res,
                )
                continue
            short = [n.name for n, f in zip(usable, frees, strict=True) if f < amount]
            if short:
                self.add(
                    rpath,
                    "resource_short_nodes",
                    WARNING,
                    role=role,
                    nodes=", ".join(short),
                    resource=res,
                    amount=_fmt(res, amount),
                )
        if demand:
            for n in usable:
                self.node_demand.setdefault((n.cluster, n.name), []).append((role, path, demand))

    def shared_nodes(self) -> None:
        for key, entries in self.node_demand.items():
            if len(entries) < 2:
                continue
            node = self.nodes_by_key[key]
            resources = {r for _, _, d in entries for r in d}
            for res in sorted(resources):
                users = [(role, path, d[res]) for role, path, d in entries if res in d]
                if len(users) < 2:
                    continue
                total = sum(a for _, _, a in users)
                free = node.free(res)
                if total > free:
                    self.add(
                        users[0][1],
                        "shared_node_overcommit",
                        node=node.name,
                        roles=", ".join(r for r, _, _ in users),
                        resource=res,
                        requested=_fmt(res, total),
                        available=_fmt(res, free),
                    )

    def mounts(
        self, path: str, cpath: str, role: str, t: dict, container: dict, workload: dict, cluster: str, replicas: int
    ) -> None:
        """The template's volumes and the main container's mounts (seed 05: "每个挂载都有容器挂载目录；hostPath
        还需要主机目录，对象存储挂载还需要 StorageClass"): :meth:`volumes`, then each hostPath
        (:meth:`host_path_volume`) and PVC (:meth:`pvc_volume`), the mounts (:meth:`volume_mounts`) and the
        ``emptyDir`` sizes (:meth:`empty_dir_sizes`)."""
        pspec = pod_spec(t)
        volumes = pspec.get("volumes") if isinstance(pspec.get("volumes"), list) else []
        vpath = f"{path}.kubernetes.workload.template.spec.volumes"
        by_name = self.volumes(vpath, role, volumes)
        storage_map = workload.get("pvcStorageMap") if isinstance(workload.get("pvcStorageMap"), dict) else {}
        pvc_options = workload.get("pvcOptions") if isinstance(workload.get("pvcOptions"), dict) else {}
        cluster_info = self.inv.clusters.get(cluster)
        for j, v in enumerate(volumes):
            if not isinstance(v, dict):
                continue
            if "hostPath" in v:
                self.host_path_volume(f"{vpath}[{j}]", role, v, cluster, cluster_info)
            if "persistentVolumeClaim" in v:
                self.pvc_volume(path, role, v, storage_map, pvc_options, cluster, cluster_info, replicas)
        self.volume_mounts(cpath, role, container, by_name)
        self.empty_dir_sizes(vpath, role, volumes)

    def volumes(self, vpath: str, role: str, volumes: list) -> dict[str, dict]:
        """Volume name -> volume (the last of a name); every volume a mapping, names unique."""
        by_name: dict[str, dict] = {}
        for j, v in enumerate(volumes):
            if not isinstance(v, dict):
                self.add(f"{vpath}[{j}]", "document_invalid", detail="a volume must be a mapping")
                continue
            vname = str(v.get("name") or "")
            if vname in by_name:
                self.add(f"{vpath}[{j}].name", "volume_name_collision", role=role, volume=vname)
            by_name[vname] = v
        return by_name

    def host_path_volume(self, where: str, role: str, v: dict, cluster: str, cluster_info: Any) -> None:
        """A ``hostPath`` volume (at ``where``) has a host path, on a cluster that allows hostPath volumes, under one
        of its allowed host paths for this user (``clusters.host_paths.check``)."""
        hp = v.get("hostPath")
        hpath = hp.get("path") if isinstance(hp, dict) else hp
        if not str(hpath or "").strip():
            self.add(f"{where}.hostPath.path", "host_path_missing", role=role)
        if cluster_info is not None and not cluster_info.allow_host_path:
            self.add(f"{where}.hostPath", "host_path_not_allowed", role=role, cluster=cluster)
        elif cluster_info is not None and str(hpath or "").strip():
            try:
                host_paths.check(str(hpath), cluster_info.host_paths, self.inv.user)
            except host_paths.HostPathRefused as exc:
                params = {("host_path" if k == "path" else k): v for k, v in exc.params.items()}
                self.add(f"{where}.hostPath.path", exc.code, role=role, cluster=cluster, **params)

    def pvc_volume(
        self,
        path: str,
        role: str,
        v: dict,
        storage_map: dict,
        pvc_options: dict,
        cluster: str,
        cluster_info: Any,
        replicas: int,
    ) -> None:
        """A ``persistentVolumeClaim`` volume: its claim has a StorageClass in ``pvcStorageMap`` that exists on the
        template's cluster, and valid ``pvcOptions`` (access mode, size, reclaim policy); a claim shared by several
        replicas with a ReadWriteOnce mode is a warning (upstream-rlark 4.7, "goes further")."""
        pvc = v.get("persistentVolumeClaim") if isinstance(v.get("persistentVolumeClaim"), dict) else {}
        claim = str(pvc.get("claimName") or "")
        storage_class = storage_map.get(claim) if claim else None
        spath = f"{path}.kubernetes.workload.pvcStorageMap"
        if not storage_class:
            self.add(spath, "storage_class_missing", role=role)
        else:
            storage_class = str(storage_class)
            owners = {c for c, n in self.inv.storage_classes if n == storage_class}
            if not owners:
                self.add(spath, "storage_class_unknown", role=role, storage_class=storage_class)
            elif cluster and cluster_info is not None and cluster not in owners:
                self.add(spath, "storage_class_wrong_cluster", role=role, storage_class=storage_class, cluster=cluster)
        opts = pvc_options.get(claim) if isinstance(pvc_options.get(claim), dict) else {}
        opath = f"{path}.kubernetes.workload.pvcOptions.{claim}"
        mode = str(opts.get("accessMode") or "ReadWriteOnce")
        if mode not in ACCESS_MODES:
            self.add(f"{opath}.accessMode", "pvc_options_invalid", role=role, detail=f"accessMode {mode}")
        if opts.get("size") not in (None, "") and _quantity(opts.get("size")) is None:
            self.add(f"{opath}.size", "quantity_invalid", role=role, resource="storage", value=opts["size"])
        if opts.get("reclaimPolicy") not in (None, "", "Retain", "Delete"):
            detail = f"reclaimPolicy {opts['reclaimPolicy']}"
            self.add(f"{opath}.reclaimPolicy", "pvc_options_invalid", role=role, detail=detail)
        if replicas > 1 and mode in ("ReadWriteOnce", "ReadWriteOncePod"):
            self.add(spath, "pvc_shared_rwo", WARNING, role=role, replicas=replicas, claim=claim)

    def volume_mounts(self, cpath: str, role: str, container: dict, by_name: dict[str, dict]) -> None:
        """The main container's ``volumeMounts``: each has a mount path (unique; one that shadows a system path is a
        warning, except ``/dev/shm`` on an ``emptyDir``), a valid ``subPath``/``subPathExpr``, and names a volume
        of the template (mounted once unless by sub path)."""
        mounts = container.get("volumeMounts") if isinstance(container.get("volumeMounts"), list) else []
        seen_paths: set[str] = set()
        seen_vols: set[str] = set()
        for j, m in enumerate(mounts):
            mpath = f"{cpath}.volumeMounts[{j}]"
            if not isinstance(m, dict):
                self.add(mpath, "document_invalid", detail="a volume mount must be a mapping")
                continue
            target = str(m.get("mountPath") or "").strip()
            vname = str(m.get("name") or "")
            if not target:
                self.add(f"{mpath}.mountPath", "mount_path_missing", role=role)
            else:
                norm = "/" + target.strip("/") if target != "/" else "/"
                if norm in seen_paths:
                    self.add(f"{mpath}.mountPath", "mount_path_duplicate", role=role, mount=target)
                seen_paths.add(norm)
                volume = by_name.get(vname) or {}
                if norm in SHADOWED and not (norm == SHM_PATH and "emptyDir" in volume):
                    self.add(f"{mpath}.mountPath", "mount_shadows_path", WARNING, role=role, mount=target)
            for key in ("subPath", "subPathExpr"):
                if m.get(key) not in (None, "") and not host_paths.valid_sub_path(str(m.get(key))):
                    self.add(f"{mpath}.{key}", "sub_path_invalid", role=role, sub_path=str(m.get(key))[:200])
            if vname not in by_name:
                self.add(f"{mpath}.name", "volume_missing", role=role, volume=vname)
            elif not m.get("subPath"):
                if vname in seen_vols:
                    self.add(f"{mpath}.name", "volume_name_collision", role=role, volume=vname)
                seen_vols.add(vname)

    def empty_dir_sizes(self, vpath: str, role: str, volumes: list) -> None:
        """An ``emptyDir``'s ``sizeLimit`` is a quantity (``/dev/shm`` for a memory-backed one)."""
        for j, v in enumerate(volumes):
            if isinstance(v, dict) and isinstance(v.get("emptyDir"), dict) and "sizeLimit" in v["emptyDir"]:
                if _quantity(v["emptyDir"]["sizeLimit"]) is None:
                    self.add(
                        f"{vpath}[{j}].emptyDir.sizeLimit",
                        "quantity_invalid",
                        role=role,
                        resource=SHM_PATH if v["emptyDir"].get("medium") == "Memory" else "emptyDir",
                        value=v["emptyDir"]["sizeLimit"],
                    )

    def env(self, cpath: str, role: str, container: dict) -> None:
        env = container.get("env")
        if env is None:
            return
        if not isinstance(env, list):
            self.add(f"{cpath}.env", "document_invalid", detail="env must be a list")
            return
        seen: set[str] = set()
        for j, item in enumerate(env):
            epath = f"{cpath}.env[{j}]"
            if not isinstance(item, dict):
                self.add(epath, "document_invalid", detail="an env entry must be a mapping")
                continue
            name = str(item.get("name") or "")
            if len(name) > MAX_NAME_CHARS:
                self._too_long(f"{epath}.name", f"{role}: env", len(name), MAX_NAME_CHARS, "chars")
                continue
            if not ENV_NAME.match(name):
                self.add(f"{epath}.name", "env_name_invalid", role=role, name=name)
            elif name in seen:
                self.add(f"{epath}.name", "env_name_duplicate", role=role, name=name)
            seen.add(name)
            if name in RESERVED_ENV or (name.startswith("RLARK_") and name != ROLE_ENV):
                self.add(f"{epath}.name", "env_reserved", role=role, name=name)
            value = item.get("value")
            value = "" if value is None else str(value)
            size = len(value.encode("utf-8", "surrogatepass"))
            if size > MAX_VALUE_BYTES:
                self._too_long(f"{epath}.value", f"{role}: env {name}", size, MAX_VALUE_BYTES, "bytes")
            elif value and (SECRET_NAME.search(name) or looks_secret_value(value)):
                self.add(f"{epath}.value", "secret_in_spec", where=f"{role}: env {name}")

    # --- job-wide -----------------------------------------------------------------------------------------------------
    def common(self, spec: dict) -> None:
        self.problems += (
            start_timeout.problems(spec)
            + checkpoints.problems(spec)
            + robot.problems(self.doc, self.inv.nodes, self.rlinf_config)
            + unknown_keys.problems(self.doc)
        )
        domain = spec.get("domain")
        if domain not in (None, "") and str(domain) not in self.inv.domains:
            self.add("spec.domain", "domain_unknown", domain=domain)
        clusters = sorted(
            {
                t["cluster"].strip()
                for t in spec.get("tasks") or []
                if isinstance(t, dict) and isinstance(t.get("cluster"), str) and t["cluster"].strip()
            }
        )
        if len(clusters) > 1 and domain in (None, ""):  # Ray cannot form across clusters without a network domain
            self.add("spec.domain", "domain_needed_across_clusters", WARNING, clusters=", ".join(clusters))
        keys = spec.get("sshPublicKeys")
        if isinstance(keys, str):
            keys = [keys]
        if spec.get("sshPublicKey"):
            keys = [*(keys if isinstance(keys, list) else []), spec["sshPublicKey"]]
        if keys is not None and not isinstance(keys, list):
            self.add("spec.sshPublicKeys", "document_invalid", detail="sshPublicKeys must be a list")
            return
        known = {normalize_ssh_key(k.key) for k in self.inv.ssh_keys}
        for j, key in enumerate(keys or []):
            kpath = f"spec.sshPublicKeys[{j}]"
            if len(str(key)) > MAX_SSH_KEY_CHARS:
                self._too_long(kpath, "spec.sshPublicKeys", len(str(key)), MAX_SSH_KEY_CHARS, "chars")
            elif isinstance(key, str) and looks_secret_value(key):
                self.add(kpath, "secret_in_spec", where="spec.sshPublicKeys")
            elif normalize_ssh_key(str(key)) not in known:
                self.add(kpath, "ssh_key_unknown")

    def rlinf(self, tasks: list, replicas_by_index: dict[int, int | None], workers: int) -> None:
        """The attached RLinf config's problems (errors), the plan warnings RLinf refuses (``ACKNOWLEDGEABLE``:
        errors, warnings once annotation ``rlark.io/acknowledged-checks`` lists the code), then the roles against
        the plan: Workers = ``cluster.num_nodes``, no template spanning two node-group signatures."""
        result = plan(self.rlinf_config)  # type: ignore[arg-type]
        for p in result.problems:
            self.problems.append(Problem(f"rlinf:{p.path}", p.code, p.params, ERROR, p.key))
        acknowledged = acknowledged_checks(self.doc)
        for p in result.warnings:
            if p.code in ACKNOWLEDGEABLE:
                ok = p.code in acknowledged
                key = ACKNOWLEDGEABLE[p.code] if ok else p.key
                self.problems.append(Problem(f"rlinf:{p.path}", p.code, p.params, WARNING if ok else ERROR, key))
        if not result.num_nodes:
            return
        if workers != result.num_nodes:
            self.add("spec.tasks", "num_nodes_mismatch", workers=workers, num_nodes=result.num_nodes)
        # Each template's rank range must not mix RLinf node-group signatures (rlinf.md 8.3).
        signature: dict[int, tuple] = {}
        for r in result.roles:
            hw = (r["hardware"] or {}).get("type", "")
            sig = (tuple(r["labels"]), hw, tuple(sorted(r["env"].items())), r["python_interpreter_path"])
            for rank in r["ranks"]:
                signature[rank] = sig
        start = 0
        for i, t in enumerate(tasks):
            n = replicas_by_index.get(i) or 0
            # only ranks the plan knows (< num_nodes <= MAX_NUM_NODES): never loop over a typed replica count
            ranks = range(min(start, result.num_nodes), min(start + n, result.num_nodes))
            sigs = {signature[r] for r in ranks if r in signature}
            if len(sigs) > 1:
                groups = sorted({"+".join(s[0]) or "-" for s in sigs})
                self.add(
                    f"spec.tasks[{i}]",
                    "node_ranks_mismatch",
                    detail=f"{self.label(t, i) if isinstance(t, dict) else i}: ranks {start}-{start + n - 1} "
                    f"span node groups {', '.join(groups)} of the RLinf config",
                )
            start += n


def validate(document: Any, inventory: Inventory, *, rlinf_config: dict | str | None = None) -> ValidationResult:
    """Validate a (normalized) Job document against ``inventory``. Never raises for bad input."""
    return _Validator(document, inventory, rlinf_config).run()
