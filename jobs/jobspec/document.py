"""Parse, normalize and render Job documents (``rlinf.io/v1alpha1`` Job).

- ``parse_text(text, content_type)`` -> ``(document | None, [Problem])`` (``yaml_invalid``/``document_invalid``).
- ``normalize(document)`` -> a new document with defaults filled (upstream-rlark 2, 3.2, 7.4 and "goes further").
- ``render_yaml(document)`` -> the YAML shown in the wizard preview, stored and returned by the API: stable key
  order, empty values omitted. The same document always renders byte-identically.

Shape contract for things upstream cannot express (RLark Console goes further):
- ``spec.tasks[].cluster``: the chosen cluster name.
- ``spec.sshPublicKeys``: list of public keys (upstream ``spec.sshPublicKey`` string is folded into it).
- CPU/memory: ``resources.requests/limits.cpu|memory`` of container ``main``.
- ``/dev/shm``: a volume ``{name: dshm, emptyDir: {medium: Memory, sizeLimit: <qty>}}`` mounted at ``/dev/shm``.
- PVC size/access mode: ``kubernetes.workload.pvcOptions[claim] = {size, accessMode, reclaimPolicy}`` (keys follow
  the recomputed claim names like ``pvcStorageMap``).
- Display name: annotation ``rlark.io/display-name``.
- Acknowledged checks: annotation ``rlark.io/acknowledged-checks``, comma-separated validation codes that the
  submitter accepts (``acknowledged_checks``; only ``jobs.jobspec.rlinf.ACKNOWLEDGEABLE`` codes take effect).
"""

from __future__ import annotations

import copy
import functools
import json
import re
import secrets
from typing import Any

import yaml

from jobs.jobspec.messages import Problem
from jobs.jobspec.naming import pvc_name, to_resource_name
from rlark_console.jsontext import loads as json_loads

API_VERSION = "rlinf.io/v1alpha1"
KIND = "Job"
DISPLAY_NAME = "rlark.io/display-name"
RESTARTED_AT = "rlark.io/restarted-at"
ACKNOWLEDGED = "rlark.io/acknowledged-checks"
SHM_VOLUME = "dshm"
SHM_PATH = "/dev/shm"
GPU = "nvidia.com/gpu"
MAX_TEXT = 1 << 20  # 1 MiB
MAX_NODES = 200_000
MAX_DEPTH = 100  # nesting levels of a document; Kubernetes objects need about 15

try:  # LibYAML when present: ~10x faster dumping and loading.
    _BaseDumper = yaml.CSafeDumper
    _Loader = yaml.CSafeLoader
except AttributeError:  # pragma: no cover
    _BaseDumper = yaml.SafeDumper
    _Loader = yaml.SafeLoader


def is_extended(resource: str) -> bool:
    """GPU and device resources (requests must equal limits, integers)."""
    return resource == GPU or resource.startswith("rlinf.io/") or resource.endswith("/gpu")


def _too_big(value: Any) -> bool:
    """More than MAX_NODES elements (aliases counted each time) or nested deeper than MAX_DEPTH (the recursive
    normalize/render steps would overflow the stack). Iterative, stops early."""
    count, stack = 0, [(value, 0)]
    while stack:
        item, depth = stack.pop()
        count += 1
        if count > MAX_NODES or depth > MAX_DEPTH:
            return True
        if isinstance(item, dict):
            stack.extend((v, depth + 1) for v in item.values())
        elif isinstance(item, list):
            stack.extend((v, depth + 1) for v in item)
    return False


def _has_nul(value: Any) -> bool:
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            if "\x00" in item:
                return True
        elif isinstance(item, dict):
            stack.extend(item.keys())
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
    return False


def tree_problems(data: Any) -> list[Problem]:
    """Bounds every document obeys however it arrived (text or an already parsed mapping): at most MAX_NODES
    elements, MAX_DEPTH levels, no NUL character (PostgreSQL cannot store U+0000 in text or jsonb)."""
    if _too_big(data):
        return [Problem("", "document_invalid", {"detail": "too many elements or nested too deeply"})]
    if _has_nul(data):
        return [Problem("", "document_invalid", {"detail": "text contains a NUL (U+0000) character"})]
    return []


def parse_text(text: str | bytes, content_type: str | None = None) -> tuple[dict | None, list[Problem]]:
    """Parse a Job given as YAML or JSON text. ``content_type`` containing ``json`` forces JSON; otherwise YAML
    (a superset of JSON). Returns ``(document, [])`` or ``(None, [Problem])``."""
    if isinstance(text, bytes):
        try:
            text = text.decode("utf-8")
        except UnicodeDecodeError:
            return None, [Problem("", "document_invalid", {"detail": "not UTF-8 text"})]
    if len(text) > MAX_TEXT:
        return None, [Problem("", "document_invalid", {"detail": "larger than 1 MiB"})]
    if not text.strip():
        return None, [Problem("", "document_invalid", {"detail": "empty document"})]
    if content_type and "json" in content_type.lower():
        try:
            data = json_loads(text)
        except ValueError as exc:
            return None, [Problem("", "document_invalid", {"detail": f"invalid JSON: {exc}"})]
    else:
        try:
            docs = [d for d in yaml.load_all(text, Loader=_Loader) if d is not None]
        except yaml.YAMLError as exc:
            detail = " ".join(str(exc).split())
            return None, [Problem("", "yaml_invalid", {"detail": detail[:300]})]
        except RecursionError:
            return None, [Problem("", "document_invalid", {"detail": "nested too deeply"})]
        if len(docs) != 1:
            return None, [Problem("", "document_invalid", {"detail": f"expected one document, found {len(docs)}"})]
        data = docs[0]
    if not isinstance(data, dict):
        return None, [Problem("", "document_invalid", {"detail": "the top level must be a mapping"})]
    problems = tree_problems(data)
    return (None, problems) if problems else (data, [])


def templates(document: dict) -> list:
    """``spec.tasks`` (or ``[]``)."""
    spec = document.get("spec") if isinstance(document, dict) else None
    tasks = spec.get("tasks") if isinstance(spec, dict) else None
    return tasks if isinstance(tasks, list) else []


def pod_spec(template: dict) -> dict:
    """``kubernetes.workload.template.spec`` of a template (``{}`` when absent)."""
    try:
        spec = template["kubernetes"]["workload"]["template"]["spec"]
    except (KeyError, TypeError):
        return {}
    return spec if isinstance(spec, dict) else {}


def display_name(document: dict) -> str:
    """The ``rlark.io/display-name`` annotation (else label) or ``""``."""
    meta = document.get("metadata") or {}
    if not isinstance(meta, dict):
        return ""
    for key in ("annotations", "labels"):
        value = (meta.get(key) or {}).get(DISPLAY_NAME) if isinstance(meta.get(key), dict) else None
        if value:
            return str(value)
    return ""


def acknowledged_checks(document: Any) -> set[str]:
    """The codes of annotation ``rlark.io/acknowledged-checks`` (``"a, b"`` -> ``{"a", "b"}``); empty when the
    annotation is missing or not a string. Never raises."""
    meta = document.get("metadata") if isinstance(document, dict) else None
    annotations = meta.get("annotations") if isinstance(meta, dict) else None
    value = annotations.get(ACKNOWLEDGED) if isinstance(annotations, dict) else None
    return {c.strip() for c in value.split(",") if c.strip()} if isinstance(value, str) else set()


def generate_job_name(display: str) -> str:
    """A DNS-label name from a display name plus a random 5-char suffix.

    ``"PPO 训练"`` -> ``ppo-20-8bad-7ec3-x1k9z`` (suffix random)."""
    base = re.sub(r"[^a-z0-9-]+", "-", to_resource_name(display)).strip("-")[:50].strip("-") or "job"
    suffix = "".join(secrets.choice("abcdefghijklmnopqrstuvwxyz0123456789") for _ in range(5))
    return f"{base}-{suffix}"


def _copy(value: Any) -> Any:
    """Deep copy of JSON/YAML-like data (dicts, lists, immutable scalars): ~10x faster than ``copy.deepcopy``."""
    if isinstance(value, dict):
        return {k: _copy(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_copy(v) for v in value]
    if isinstance(value, str | int | float | bool | type(None)):
        return value
    return copy.deepcopy(value)


def _set_default(d: dict, key: str, value: Any) -> None:
    if d.get(key) in (None, ""):
        d[key] = value


def normalize(document: dict) -> dict:
    """Return a normalized deep copy. Tolerates malformed parts (left for the validator to report).

    Defaults: apiVersion/kind; ``agentType: Kubernetes``; ``head: false``; workload ``kind: StatefulSet``;
    container ``main`` when a single container is unnamed; ``spec.stopped`` bool; ``spec.sshPublicKey`` folded into
    ``spec.sshPublicKeys`` (deduplicated); template-level ``domain``/``sshPublicKey`` dropped (the Job's win);
    display name label copied to the annotation; empty ``metadata.name`` generated from the display name;
    GPU/device requests and limits mirrored (0 entries dropped); PVC claim names and ``pvcStorageMap`` recomputed
    from the FINAL job name (upstream 3.2 "goes further"): ``pvc-<job>-<template>-<volume>``.
    """
    if not isinstance(document, dict):
        return document
    doc = _copy(document)
    _set_default(doc, "apiVersion", API_VERSION)
    _set_default(doc, "kind", KIND)
    meta = doc.get("metadata")
    if not isinstance(meta, dict):
        meta = doc["metadata"] = {}
    if isinstance(meta.get("name"), str):
        meta["name"] = meta["name"].strip()
    disp = display_name(doc)
    if disp:
        annotations = meta.get("annotations")
        if not isinstance(annotations, dict):
            annotations = meta["annotations"] = {}
        annotations[DISPLAY_NAME] = disp
    if not meta.get("name") and disp:
        meta["name"] = generate_job_name(disp)
    job = str(meta.get("name") or "")

    spec = doc.get("spec")
    if not isinstance(spec, dict):
        return doc
    keys: list[str] = []
    legacy = spec.pop("sshPublicKey", None)
    raw_keys = spec.get("sshPublicKeys")
    if isinstance(raw_keys, str):
        raw_keys = [raw_keys]
    for key in [*(raw_keys if isinstance(raw_keys, list) else []), legacy]:
        if isinstance(key, str) and key.strip() and key.strip() not in keys:
            keys.append(key.strip())
    if keys:
        spec["sshPublicKeys"] = keys
    else:
        spec.pop("sshPublicKeys", None)
    if isinstance(spec.get("domain"), str):
        spec["domain"] = spec["domain"].strip()
    spec["stopped"] = spec.get("stopped") is True

    for t in templates(doc):
        if not isinstance(t, dict):
            continue
        if isinstance(t.get("name"), str):
            t["name"] = t["name"].strip()
        _set_default(t, "agentType", "Kubernetes")
        t["head"] = t.get("head") is True
        t.pop("domain", None)
        t.pop("sshPublicKey", None)
        k8s = t.get("kubernetes")
        if not isinstance(k8s, dict):
            k8s = t["kubernetes"] = {}
        workload = k8s.get("workload")
        if not isinstance(workload, dict):
            workload = k8s["workload"] = {}
        _set_default(workload, "kind", "StatefulSet")
        pspec = pod_spec(t)
        containers = pspec.get("containers") if isinstance(pspec.get("containers"), list) else []
        if len(containers) == 1 and isinstance(containers[0], dict) and not containers[0].get("name"):
            containers[0]["name"] = "main"
        for c in containers:
            resources = c.get("resources") if isinstance(c, dict) else None
            if isinstance(resources, dict):
                _mirror_extended(resources)
        _recompute_pvcs(job, t, workload, pspec)
    return doc


def _is_zero(value: Any) -> bool:
    return str(value).strip() in ("0", "0.0", "")


def _mirror_extended(resources: dict) -> None:
    req = resources.get("requests") if isinstance(resources.get("requests"), dict) else None
    lim = resources.get("limits") if isinstance(resources.get("limits"), dict) else None
    for res in [*(req or {}), *(lim or {})]:
        if not is_extended(res):
            continue
        if req is not None and res in req and _is_zero(req[res]):
            del req[res]
        if lim is not None and res in lim and _is_zero(lim[res]):
            del lim[res]
        if req is not None and res in req and (lim is None or res not in lim):
            lim = resources.setdefault("limits", {}) if lim is None else lim
            lim[res] = req[res]
        elif lim is not None and res in lim and (req is None or res not in req):
            req = resources.setdefault("requests", {}) if req is None else req
            req[res] = lim[res]


def _recompute_pvcs(job: str, template: dict, workload: dict, pspec: dict) -> None:
    volumes = pspec.get("volumes") if isinstance(pspec.get("volumes"), list) else []
    old_map = workload.get("pvcStorageMap") if isinstance(workload.get("pvcStorageMap"), dict) else {}
    old_opts = workload.get("pvcOptions") if isinstance(workload.get("pvcOptions"), dict) else {}
    if not old_map and not any(isinstance(v, dict) and "persistentVolumeClaim" in v for v in volumes):
        return
    new_map: dict[str, Any] = {}
    new_opts: dict[str, Any] = {}
    tname = str(template.get("name") or "")
    for v in volumes:
        if not isinstance(v, dict) or not isinstance(v.get("persistentVolumeClaim"), dict):
            continue
        pvc = v["persistentVolumeClaim"]
        claim = str(pvc.get("claimName") or "")
        if claim and claim not in old_map:
            continue  # an existing claim the user named; no class to map
        storage_class = old_map.get(claim) if claim else None
        new_claim = pvc_name(job, tname, str(v.get("name") or "vol")) if job else claim
        pvc["claimName"] = new_claim
        if claim in old_opts:
            new_opts[new_claim] = old_opts[claim]
        if storage_class not in (None, ""):
            new_map[new_claim] = storage_class
        elif claim in old_map:
            new_map[new_claim] = storage_class
    if new_map:
        workload["pvcStorageMap"] = new_map
    else:
        workload.pop("pvcStorageMap", None)
    renamed = {c for c in old_opts if c in old_map}
    kept = {c: o for c, o in old_opts.items() if c not in renamed}
    if new_opts or kept:
        workload["pvcOptions"] = {**kept, **new_opts}
    else:
        workload.pop("pvcOptions", None)


# --- rendering -----------------------------------------------------------------------------------------------------

# A Task's keys the console writes, in the order it writes them (also the known keys of
# ``jobs.jobspec.unknown_keys``).
TASK_KEY_ORDER = (
    "name",
    "head",
    "agentType",
    "role",
    "cluster",
    "nodeSelector",
    "prepareScript",
    "runScript",
    "tensorBoardDir",
    "checkpointDir",
    "kubernetes",
)
_ORDER: dict[str, tuple[str, ...]] = {
    "root": ("apiVersion", "kind", "metadata", "spec"),
    "metadata": ("name", "annotations", "labels"),
    "spec": ("tasks", "domain", "startTimeout", "sshPublicKeys", "stopped"),
    "task": TASK_KEY_ORDER,
    "kubernetes": ("workload",),
    "workload": ("kind", "replicas", "template", "pvcStorageMap", "pvcOptions"),
    "podTemplate": ("metadata", "spec"),
    "podSpec": ("containers", "volumes"),
    "container": ("name", "image", "env", "resources", "volumeMounts"),
    "env": ("name", "value", "valueFrom"),
    "resources": ("requests", "limits"),
    "mount": ("name", "mountPath", "subPath", "readOnly"),
    "volume": ("name", "hostPath", "persistentVolumeClaim", "emptyDir"),
}
_CHILD: dict[tuple[str, str], str] = {
    ("root", "metadata"): "metadata",
    ("root", "spec"): "spec",
    ("spec", "tasks"): "task",
    ("task", "kubernetes"): "kubernetes",
    ("kubernetes", "workload"): "workload",
    ("workload", "template"): "podTemplate",
    ("podTemplate", "spec"): "podSpec",
    ("podSpec", "containers"): "container",
    ("podSpec", "initContainers"): "container",
    ("podSpec", "volumes"): "volume",
    ("container", "env"): "env",
    ("container", "resources"): "resources",
    ("container", "volumeMounts"): "mount",
}
_EMPTY = (None, "", [], {})


def _clean(value: Any, ctx: str) -> Any:
    if isinstance(value, dict):
        order = _ORDER.get(ctx, ())
        out: dict[str, Any] = {}
        # Known keys in their fixed order, every other key sorted: the output does not depend on the input's key
        # order (PostgreSQL jsonb reorders keys), so the preview and the stored YAML are byte-identical.
        for key in (*[k for k in order if k in value], *sorted((k for k in value if k not in order), key=str)):
            v = _clean(value[key], _CHILD.get((ctx, key), ""))
            if v is None or (isinstance(v, str | list | dict) and not v):
                continue
            out[key] = v
        return out
    if isinstance(value, list):
        items = [_clean(v, ctx) for v in value]
        return [v for v in items if not (v is None or (isinstance(v, str | list | dict) and not v))]
    return value


class _Dumper(_BaseDumper):
    pass


def _str_representer(dumper, data: str):
    if "\n" in data:
        return dumper.represent_scalar("tag:yaml.org,2002:str", data, style="|")
    return dumper.represent_scalar("tag:yaml.org,2002:str", data)


_Dumper.add_representer(str, _str_representer)


def clean(document: dict) -> dict:
    """The document with stable key order and empty values (None, "", [], {}) removed; False and 0 are kept."""
    return _clean(document, "root")


# A small block-style YAML writer for plain JSON-like data (dict, list, str, int, float, bool, None). It is ~5x
# faster than PyYAML's Python representer; every plain scalar is checked with PyYAML's own implicit resolvers, so
# ``yaml.safe_load(render_yaml(d)) == clean(d)`` (tested on tricky strings). Anything unusual falls back to PyYAML.
_PLAIN = re.compile(r"^[A-Za-z0-9_/][A-Za-z0-9_./@+=:-]*$")
_PRINTABLE = re.compile("^[\x09\x0a\x20-\x7e\x85\xa0-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]*$")
_BREAKS = re.compile("[\n\x85\u2028\u2029]")  # YAML 1.1 line breaks
_RESOLVER = yaml.resolver.Resolver()


@functools.lru_cache(maxsize=4096)
def _str_scalar(value: str) -> str:
    if (
        _PLAIN.match(value)
        and ": " not in value
        and not value.endswith(":")
        and _RESOLVER.resolve(yaml.ScalarNode, value, (True, False)) == "tag:yaml.org,2002:str"
    ):
        return value
    if _PRINTABLE.match(value) and not _BREAKS.search(value):
        return json.dumps(value, ensure_ascii=False)
    return yaml.dump(value, Dumper=_BaseDumper, default_style='"', allow_unicode=True, width=1 << 30).rstrip("\n")


def _scalar(value: Any) -> str:
    if isinstance(value, str):
        return _str_scalar(value)
    if value is True:
        return "true"
    if value is False:
        return "false"
    if value is None:
        return "null"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if value != value:
            return ".nan"
        if value in (float("inf"), float("-inf")):
            return ".inf" if value > 0 else "-.inf"
        text = repr(value).lower()
        if "." not in text and "e" in text:
            text = text.replace("e", ".0e", 1)
        return text
    return yaml.dump(value, Dumper=_BaseDumper, default_flow_style=True, width=1 << 30).rstrip("\n").rstrip(".").strip()


def _block(value: str) -> tuple[str, list[str]] | None:
    """Literal block (``|-`` or ``|``) header and lines, or None when the string needs quoting."""
    if "\r" in value or not _PRINTABLE.match(value) or _BREAKS.search(value.replace("\n", "")):
        return None
    if value.endswith("\n"):
        if value.endswith("\n\n") or value == "\n":
            return None
        header, body = "|", value[:-1]
    else:
        header, body = "|-", value
    lines = body.split("\n")
    first = next((line for line in lines if line), "")
    if not first or first[0] in " \t":
        return None
    if any(line != line.rstrip(" \t") for line in lines):
        return None
    return header, lines


def _write_mapping(data: dict, indent: int, out: list[str], first_prefix: str | None = None) -> None:
    pad = " " * indent
    inner = " " * (indent + 2)
    for i, (key, value) in enumerate(data.items()):
        prefix = first_prefix if i == 0 and first_prefix is not None else pad
        k = _scalar(key)
        if isinstance(value, dict) and value:
            out.append(f"{prefix}{k}:")
            _write_mapping(value, indent + 2, out)
        elif isinstance(value, list) and value:
            out.append(f"{prefix}{k}:")
            _write_sequence(value, indent, out)
        elif isinstance(value, str) and "\n" in value and (block := _block(value)):
            out.append(f"{prefix}{k}: {block[0]}")
            out.extend(f"{inner}{line}" if line else "" for line in block[1])
        elif isinstance(value, dict | list):
            out.append(f"{prefix}{k}: {'{}' if isinstance(value, dict) else '[]'}")
        else:
            out.append(f"{prefix}{k}: {_scalar(value)}")


def _write_sequence(items: list, indent: int, out: list[str]) -> None:
    pad = " " * indent
    inner = " " * (indent + 2)
    for item in items:
        if isinstance(item, dict) and item:
            _write_mapping(item, indent + 2, out, first_prefix=pad + "- ")
        elif isinstance(item, list) and item:
            out.append(pad + "-")
            _write_sequence(item, indent + 2, out)
        elif isinstance(item, str) and "\n" in item and (block := _block(item)):
            out.append(f"{pad}- {block[0]}")
            out.extend(f"{inner}{line}" if line else "" for line in block[1])
        elif isinstance(item, dict | list):
            out.append(f"{pad}- {'{}' if isinstance(item, dict) else '[]'}")
        else:
            out.append(f"{pad}- {_scalar(item)}")


def render_yaml(document: dict) -> str:
    """Stable YAML of a (normalized) document; see module docstring. Same input -> byte-identical output."""
    data = clean(document)
    if not isinstance(data, dict) or not data:
        return yaml.dump(data, Dumper=_Dumper, sort_keys=False, allow_unicode=True, default_flow_style=False)
    out: list[str] = []
    _write_mapping(data, 0, out)
    return "\n".join(out) + "\n"
