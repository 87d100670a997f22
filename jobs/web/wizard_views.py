"""The four-step job wizard (create, clone, edit, edit-and-restart), YAML paste/upload and RLinf import.

Views are thin: the wizard state lives in the form fields (``jobs.control.wizard``), every step change POSTs
the whole state, the server maps it to a Job document and runs the one validator (``jobs.jobspec.validator``);
rendering and persistence go through ``jobs.jobspec.document`` and ``jobs.control.submission``.

URLs (registered in ``jobs/web/urls.py`` before the job detail routes):
``/jobs/new/`` (``?clone=<name>``, ``?type=Demo``), ``/jobs/new/match/<i>/``, ``/jobs/new/yaml/``,
``/jobs/<name>/edit/`` (``?restart=1`` for "edit and restart").
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

from django.conf import settings
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.shortcuts import render
from django.urls import path, reverse
from django.utils.translation import gettext as _
from django.utils.translation import ngettext
from django.views.decorators.http import require_POST

from accounts.tracking import credentials_for
from clusters import host_paths
from clusters.models import Cluster, Node
from clusters.selectors import SelectorError, matches, parse_selector
from domains.models import Domain
from domains.services import default_domain
from jobs import policy
from jobs.control import submission, wizard_placement, wizard_roles
from jobs.control import wizard as wz
from jobs.control.submission import check_document, clone_document
from jobs.jobspec import rlinf, text_size
from jobs.jobspec.checkpoints import config_checkpoint_dir
from jobs.jobspec.document import parse_text, pod_spec, render_yaml
from jobs.models import Job
from rlark_console import language
from sshkeys.services import keys_for
from storage.services import classes_for_cluster

DEMO_JOB_YAML = Path(settings.BASE_DIR) / "examples" / "demo" / "job.yaml"


# --------------------------------------------------------------------------- inventory for the UI


class UIInventory:
    """Clusters and nodes as the wizard shows them (read once per request)."""

    def __init__(self) -> None:
        # Online clusters first: a new role's default is the first *available* cluster (upstream 7.1).
        self.clusters = sorted(Cluster.objects.all(), key=lambda c: (c.status != Cluster.Status.ONLINE, c.name))
        self.nodes = list(Node.objects.select_related("cluster").filter(system=False).order_by("cluster__name", "name"))

    @property
    def cluster_names(self) -> list[str]:
        return [c.name for c in self.clusters]

    def nodes_of(self, cluster: str) -> list[Node]:
        return [n for n in self.nodes if n.cluster.name == cluster]

    def cluster_kind(self, cluster: Cluster) -> str:
        """``具身设备集群 / Embodied`` when a node is a robot/edge node or has a device, else cloud compute."""
        for n in self.nodes_of(cluster.name):
            if n.category in {"robot", "edge"} or any(str(k).startswith("rlinf.io/device") for k in n.capacity):
                return _("Embodied")
        return _("Cloud compute")

    def label_chips(self, cluster: str) -> list[tuple[str, int]]:
        """Every ``key=value`` label of the cluster's nodes with how many of its nodes carry it."""
        counts: Counter[str] = Counter()
        for n in self.nodes_of(cluster):
            for k, v in sorted((n.labels or {}).items()):
                counts[f"{k}={v}"] += 1
        return sorted(counts.items())

    def device_keys(self, cluster: str) -> list[str]:
        keys = {str(k) for n in self.nodes_of(cluster) for k in (n.capacity or {}) if str(k).startswith("rlinf.io/")}
        return sorted(keys)

    def match(self, selector_text: str) -> dict[str, Any]:
        """Live GLOBAL match of a selector: ``{error, empty, total, per_cluster: [(name, n)], nodes: [...]}``."""
        try:
            selector = parse_selector(selector_text)
        except SelectorError as exc:
            return {"error": str(exc), "empty": False, "total": 0, "per_cluster": [], "nodes": []}
        if not selector:
            return {"error": "", "empty": True, "total": 0, "per_cluster": [], "nodes": []}
        hits = [n for n in self.nodes if matches(selector, n.labels)]
        per = Counter(n.cluster.name for n in hits)
        return {
            "error": "",
            "empty": False,
            "total": len(hits),
            "per_cluster": sorted(per.items()),
            "nodes": [f"{n.cluster.name}/{n.name}" for n in hits],
            "unschedulable": [f"{n.cluster.name}/{n.name}" for n in hits if not n.online or n.unschedulable],
            "multivalue": any("," in v for v in selector.values()),
        }

    def infer_cluster(self, selector: dict) -> str:
        """7.5: the cluster of the first node matching every selector key, else the first cluster."""
        if selector:
            for n in self.nodes:
                if matches(selector, n.labels):
                    return n.cluster.name
        return self.cluster_names[0] if self.cluster_names else ""


def _storage_classes(cluster: str) -> list[str]:
    """Names of the storage classes of ``cluster`` (storage.services)."""

    return [sc.name for sc in classes_for_cluster(cluster)]


def _domains() -> tuple[list[Any], str]:
    """All domains by name and the one the wizard preselects (domains.services: the only one, else none)."""
    default = default_domain()
    return list(Domain.objects.order_by("name")), default.name if default else ""


def _ssh_keys(user, owner=None) -> list[Any]:
    """The user's keys (and, when editing someone else's job, its owner's keys)."""

    keys = list(keys_for(user))
    if owner is not None and owner != user:
        keys += list(keys_for(owner))
    return keys


# --------------------------------------------------------------------------- validation


def _validate(state: wz.WizardState, user, job=None):
    """Map the state to a document and check it exactly as submission will (``check_document``: normalize +
    the one validator). Returns ``(normalized document, result)``.

    ``job``: the job being edited (its own Workers' resources are given back; its owner's keys are known)."""

    kwargs = {"exclude_job": job, "key_owners": [job.owner]} if job is not None else {}
    rlinf_config = state.rlinf_config if state.rlinf_config.strip() else None
    return check_document(user, wz.to_document(state), rlinf_config=rlinf_config, **kwargs)


def _problem_rows(problems, lang: str) -> list[dict[str, Any]]:
    rows = []
    for p in problems:
        message = p.message(lang) if hasattr(p, "message") else str(p)
        rows.append({"path": p.path, "code": p.code, "message": message, "step": wz.step_of(p)})
    return rows


def _preview_yaml(document: dict) -> str:
    """The exact YAML that will be stored (``document`` is already normalized)."""

    return render_yaml(document)


# --------------------------------------------------------------------------- the wizard page


def _number(text: str) -> float:
    try:
        return float(str(text).strip() or 0)
    except ValueError:
        return 0.0


def _summary(role: wz.RoleState, head: bool) -> dict[str, Any]:
    """Upstream 7.2 summary: ``{n} workers configured, {n x per-worker GPU/devices} resources requested``."""
    workers = 1 if head else int(_number(role.replicas))
    per_worker = _number(role.gpu) + sum(_number(d.quantity) for d in role.devices if d.key.strip())
    total = workers * per_worker
    return {"workers": workers, "resources": int(total) if float(total).is_integer() else total}


class Mode:
    CREATE = "create"
    EDIT = "edit"
    RESTART = "restart"


def _exists_message(exc: submission.JobExists) -> str:
    """Says a job exists only when the user may see it; another user's job is only "not available" (no leak)."""
    if exc.visible:
        return _("A job named %(name)s already exists.") % {"name": exc.name}
    return _("The name %(name)s is not available; choose another name.") % {"name": exc.name}


def _page_context(
    request, state, *, mode, job=None, inv=None, errors=None, warnings=None, notice="", preview="", narrow=None
):
    inv = inv or UIInventory()
    lang = language.lang()
    domains, default_domain = _domains()
    ssh_keys = _ssh_keys(request.user, job.owner if job is not None else None)
    roles = []
    for i, role in enumerate(state.roles):
        match = inv.match(role.selector)
        roles.append(
            {
                "i": i,
                "role": role,
                "head": i == state.header_index,
                "kind": role.effective_kind,
                "template_name": role.template_name,
                "chips": inv.label_chips(role.cluster),
                "match": match,
                "placement": _placement(state, i, match),
                "device_keys": inv.device_keys(role.cluster),
                "storage_classes": _storage_classes(role.cluster) if role.cluster else [],
                "errors": [e for e in (errors or []) if wz.task_index(e["path"]) == i],
                "summary": _summary(role, i == state.header_index),
                "base_json": json.dumps(role.base, ensure_ascii=False) if role.base else "",
            }
        )
    clusters = [
        {"name": c.name, "status": c.status, "status_label": c.get_status_display(), "kind": inv.cluster_kind(c)}
        for c in inv.clusters
    ]
    step_errors = [e for e in (errors or []) if e["step"] == state.step]
    titles = {
        Mode.CREATE: (_("NEW JOB"), _("Create job"), _("Submit Job")),
        Mode.EDIT: (_("EDIT JOB"), _("Edit Job"), _("Save Changes")),
        Mode.RESTART: (_("EDIT & RESTART"), _("Edit and restart job"), _("Save & Restart")),
    }[mode]
    steps = [(1, _("Roles & Resources")), (2, _("Worker Config")), (3, _("Common Config")), (4, _("YAML Preview"))]
    error_steps = sorted({e["step"] for e in (errors or [])})
    return {
        "state": state,
        "rlinf_checkpoint_dir": config_checkpoint_dir(state.rlinf_config),
        "mode": mode,
        "job": job,
        "eyebrow": titles[0],
        "title": titles[1],
        "submit_label": titles[2],
        "steps": steps,
        "error_steps": error_steps,
        "roles": roles,
        "active": roles[state.active_role] if roles else None,
        "clusters": clusters,
        "job_types": [
            ("RL", _("RL job")),
            ("DataCollection", _("Data collection")),
            ("Evaluation", _("Evaluation")),
            ("Custom", _("Custom job")),
            ("Demo", _("Demo (CartPole, local)")),
        ],
        "demo_available": DEMO_JOB_YAML.exists(),
        "role_kinds": wz.ROLE_KINDS,
        "domains": domains,
        "default_domain": default_domain,
        "ssh_keys": ssh_keys,
        "unlisted_keys": [k for k in state.ssh_keys if k not in {x.key for x in ssh_keys}],
        "tracking_credentials": credentials_for(job.owner if job is not None else request.user),
        "errors": errors or [],
        "step_errors": step_errors,
        "other_errors": [e for e in (errors or []) if e["step"] != state.step],
        "warnings": warnings or [],
        "notice": notice,
        "narrow": narrow,
        "preview": preview,
        "post_url": request.path,
        "lang": lang,
        "more_roles": state.step == 2 and wizard_roles.next_role(state) is not None,
        "landing": wizard_placement.landing(roles) if state.step == 4 else [],
        "nodes_admin_url": reverse("admin:clusters_node_changelist") if request.user.is_staff else "",
        "acknowledgeable": _acknowledgeable(state),
    }


def _placement(state: wz.WizardState, i: int, match: dict[str, Any]) -> wizard_placement.PlacementHint | None:
    """How role ``i`` gets exactly its Workers' nodes (``jobs.control.wizard_placement.hint``), or None."""
    role = state.roles[i]
    try:
        selector = parse_selector(role.selector)
    except SelectorError:
        return None
    head = i == state.header_index
    return wizard_placement.hint(
        job=state.name, role=role.name, head=head, replicas=role.replicas, selector=selector, match=match
    )


def _acknowledgeable(state: wz.WizardState) -> list[dict[str, Any]]:
    """The checks the user may acknowledge on step 1 (``rlinf.ACKNOWLEDGEABLE``), as ``[{code, label, checked}]``:
    those the attached RLinf config's plan warns about, and those the job already acknowledges."""
    found = {w.code for w in rlinf.plan(state.rlinf_config).warnings} if state.rlinf_config.strip() else set()
    labels = {
        "rlinf_robot_ip_invalid": _(
            "The run script sets the robot IP addresses (e.g. a Hydra override): submit although RLinf refuses the "
            "config's robot IPs as they are."
        )
    }
    codes = [c for c in rlinf.ACKNOWLEDGEABLE if c in found or c in state.acknowledged]
    return [{"code": c, "label": labels.get(c, c), "checked": c in state.acknowledged} for c in codes]


def _render(request, context, status=200) -> HttpResponse:
    template = "jobs/wizard_form.html" if request.headers.get("HX-Request") else "jobs/wizard.html"
    return render(request, template, context, status=status)


def _redirect(request, url: str) -> HttpResponse:
    if request.headers.get("HX-Request"):
        response = HttpResponse(status=204)
        response["HX-Redirect"] = url
        return response
    return HttpResponseRedirect(url)


def _split(action: str) -> tuple[str, list[str]]:
    name, _sep, rest = action.partition(":")
    return name, (rest.split(":", 1) if rest else [])


def _int(value: str, default: int = -1) -> int:
    try:
        return int(value)
    except (TypeError, ValueError):
        return default


def _load_demo(inv: UIInventory, user) -> tuple[wz.WizardState | None, str]:
    """The demo job for ``user``: a free name, and its output in the user's own directory of the demo cluster's
    host-path root (``clusters.host_paths.demo_output_path``), never a directory another user writes."""
    if not DEMO_JOB_YAML.exists():
        return None, _("The demo job (examples/demo/job.yaml) is not available.")
    document, problems = parse_text(DEMO_JOB_YAML.read_text(), "application/yaml")
    if document is None:
        return None, "; ".join(p.message(language.lang()) for p in problems)
    name = _free_name(str((document.get("metadata") or {}).get("name") or "demo"))
    output = host_paths.demo_output_path(str(settings.RLARK_LOCAL_ROOT), user.get_username(), name)
    for task in document["spec"]["tasks"]:
        for volume in pod_spec(task).get("volumes") or []:
            if isinstance(volume.get("hostPath"), dict):
                volume["hostPath"]["path"] = output
    state = wz.from_document(document, infer_cluster=inv.infer_cluster)
    state.job_type = wz.DEMO_TYPE
    state.name = name
    return state, ""


def _free_name(name: str) -> str:
    """``name``, or ``name-2``, ``name-3``, ... when a job already has it (job names are unique)."""
    taken = set(Job.objects.filter(name__startswith=name).values_list("name", flat=True))
    candidate, n = name, 1
    while candidate in taken:
        n += 1
        candidate = f"{name}-{n}"
    return candidate


def _replicas_from_match(state: wz.WizardState, i: int, inv: UIInventory) -> None:
    """Proposed replicas = the selector's GLOBAL match count (header: 1)."""
    role = state.roles[i]
    info = inv.match(role.selector)
    role.replicas = "1" if i == state.header_index else str(info["total"])


HOSTNAME_LABEL = "kubernetes.io/hostname"


def _header_notice(role: wz.RoleState, idx: int, was: int, inv: UIInventory) -> dict[str, Any]:
    """The notice (and the narrow-the-selector offer) when a multi-Worker role becomes the Header."""
    notice = _("The Header has exactly 1 Worker: %(role)s now has 1 Worker instead of %(n)d.") % {
        "role": role.name,
        "n": was,
    }
    info = inv.match(role.selector)
    narrow = None
    if info["total"] > 1:
        notice += " " + _(
            "Its node selector matches %(m)d nodes; narrow it to one node so the Header runs where you expect."
        ) % {"m": info["total"]}
        try:
            selector = parse_selector(role.selector)
        except SelectorError:
            selector = {}
        hits = [n for n in inv.nodes if selector and matches(selector, n.labels)]
        label = _single_node_label(hits)
        if label is not None:
            narrow = {"i": idx, "label": label[1], "node": label[0]}
    return {"notice": notice, "narrow": narrow}


def _single_node_label(hits: list) -> tuple[str, str] | None:
    """``(node name, "key=value")`` of a label that only the first possible node among ``hits`` carries
    (``kubernetes.io/hostname`` first), to narrow a selector to that node; None when no label singles one out."""
    for node in hits:
        labels = dict(node.labels or {})
        keys = sorted(labels, key=lambda k: (k != HOSTNAME_LABEL, k))
        for key in keys:
            if sum(1 for n in hits if (n.labels or {}).get(key) == labels[key]) == 1:
                return node.name, f"{key}={labels[key]}"
    return None


def _apply_action(request, state: wz.WizardState, action: str, mode: str, job, inv: UIInventory) -> dict[str, Any]:
    """Apply one wizard action to ``state``; returns extra context (errors, preview, notice) or a response."""
    lang = language.lang()
    name, args = _split(action)
    idx = _int(args[0]) if args else -1
    role = state.roles[idx] if 0 <= idx < len(state.roles) else None
    extra: dict[str, Any] = {}
    if name == "template":
        if state.job_type == wz.DEMO_TYPE:
            demo, notice = _load_demo(inv, request.user)
            if demo is None:
                extra["notice"] = notice
            else:
                demo.name = state.name if mode != Mode.CREATE else demo.name
                state.__dict__.update(demo.__dict__)
        else:
            wz.apply_job_type(state, state.job_type, inv.cluster_names)
    elif name == "add_role":
        wz.add_role(state, inv.cluster_names)
    elif name == "remove_role" and role:
        wz.remove_role(state, idx)
    elif name == "header" and role:
        was = _int(role.replicas.strip(), 0)
        state.header = idx
        role.replicas = "1"  # the Header has exactly 1 Worker: said at once, never changed silently in step 2
        if was > 1:
            extra.update(_header_notice(role, idx, was, inv))
    elif name == "tab" and role:
        state.active_role = idx
        state.step = 2
    elif name == "add_env" and role:
        role.env.append(wz.EnvVar())
    elif name == "add_dev" and role:
        keys = inv.device_keys(role.cluster)
        role.devices.append(wz.Device(keys[0] if keys else "", "1"))
    elif name == "add_mnt" and role:
        role.mounts.append(wz.Mount())
    elif name in {"del_env", "del_dev", "del_mnt"} and role and len(args) > 1:
        j = _int(args[1])
        items = {"del_env": role.env, "del_dev": role.devices, "del_mnt": role.mounts}[name]
        if 0 <= j < len(items):
            del items[j]
    elif name == "add_label" and role and len(args) > 1:
        key, _sep, value = args[1].partition("=")
        try:
            selector = parse_selector(role.selector)
        except SelectorError:
            selector = {}
        selector[key] = value
        role.selector = ",".join(f"{k}={v}" for k, v in selector.items())
        _replicas_from_match(state, idx, inv)
    elif name == "clear_selector" and role:
        role.selector = ""
        role.replicas = "0"
    elif name == "use_matches" and role:
        _replicas_from_match(state, idx, inv)
    elif name == "prev":
        state.step = max(1, state.step - 1)
    elif name == "next" and state.step == 2 and wizard_roles.next_role(state) is not None:
        extra.update(_next_role(request, state, job))
    elif name in {"next", "goto", "submit"}:
        target = 4 if name == "submit" else (state.step + 1 if name == "next" else _int(args[0] if args else "", 1))
        target = min(max(target, 1), 4)
        if target <= state.step and name != "submit":
            state.step = target  # going back is free and clears the error
            return extra
        document, result = _validate(state, request.user, job)
        if not state.name.strip() and document and (document.get("metadata") or {}).get("name"):
            state.name = document["metadata"]["name"]  # generated from the display name once, then kept
        errors = _problem_rows(result.errors, lang)
        warnings = _problem_rows(result.warnings, lang)
        blocking = [e for e in errors if e["step"] < target] if name != "submit" else errors
        if blocking:
            editing = state.active_role if state.step == 2 else None
            state.step = min(e["step"] for e in blocking)
            role_errors = [e for e in blocking if e["step"] == state.step and wz.task_index(e["path"]) is not None]
            first = next((e for e in role_errors if wz.task_index(e["path"]) == editing), None)
            first = first or next(iter(role_errors), None)
            if state.step == 2 and first is not None:
                state.active_role = wz.task_index(first["path"])
            if name != "submit" and state.step == 2:
                # Until the user submits, only the role being edited shows its problems.
                blocking = [e for e in blocking if wz.task_index(e["path"]) in (None, state.active_role)]
            extra.update(errors=blocking, warnings=warnings)
            return extra
        if target == 2 and state.step != 2:
            state.active_role = state.header_index  # step 2 opens on the Header role
        state.step = target
        if target == 4:
            extra.update(preview=_preview_yaml(document), warnings=warnings)
        if name == "submit":
            return _submit(request, state, document, mode, job, extra)
    return extra


def _next_role(request, state: wz.WizardState, job) -> dict[str, Any]:
    """Step 2's "Next Role": the problems of step 1 or of the open role keep the user there (``{errors,
    warnings}``); else the next role's tab opens (``jobs.control.wizard_roles.next_role``) and ``{}`` is returned."""
    lang = language.lang()
    _document, result = _validate(state, request.user, job)
    rows = _problem_rows(result.errors, lang)
    errors = [e for e in rows if e["step"] < 2 or (e["step"] == 2 and wz.task_index(e["path"]) == state.active_role)]
    if errors:
        state.step = min(e["step"] for e in errors)
        return {"errors": errors, "warnings": _problem_rows(result.warnings, lang)}
    state.active_role = wizard_roles.next_role(state)
    return {}


def _submit(request, state, document, mode, job, extra):
    lang = language.lang()
    try:
        if mode == Mode.CREATE:
            saved = submission.create_job(request.user, document, rlinf_config=state.rlinf_config, request=request)
        else:
            saved = submission.update_job(
                request.user,
                job,
                document,
                restart=(mode == Mode.RESTART),
                rlinf_config=state.rlinf_config,
                request=request,
            )
    except submission.JobExists as exc:
        state.step = 1
        extra["errors"] = [{"path": "metadata.name", "code": exc.code, "step": 1, "message": _exists_message(exc)}]
        return extra
    except submission.JobInvalid as exc:
        errors = _problem_rows(exc.result.errors, lang)
        state.step = min((e["step"] for e in errors), default=1)
        extra.update(errors=errors, warnings=_problem_rows(exc.result.warnings, lang))
        return extra
    return {"response": _redirect(request, f"/jobs/{saved.name}/")}


def _wizard(request: HttpRequest, *, mode: str, job=None) -> HttpResponse:
    inv = UIInventory()
    if request.method != "POST":
        notice = ""
        if job is not None:
            state = wz.from_document(job.spec, infer_cluster=inv.infer_cluster)
            state.name = job.name
            state.rlinf_config = job.rlinf_config or ""
        elif request.GET.get("clone"):
            source = policy.get_job_for(request.user, request.GET["clone"])
            state = wz.from_document(clone_document(source), infer_cluster=inv.infer_cluster)
            state.rlinf_config = source.rlinf_config or ""
        elif request.GET.get("type") == wz.DEMO_TYPE:
            state, notice = _load_demo(inv, request.user)
            state = state or wz.initial_state(inv.cluster_names)
        else:
            state = wz.initial_state(inv.cluster_names)
        if mode == Mode.CREATE and job is None and not request.GET.get("clone"):
            _preselect_common(state)
        return _render(request, _page_context(request, state, mode=mode, job=job, inv=inv, notice=notice))
    state = wz.from_post(request.POST)
    if job is not None:
        state.name = job.name  # the name of an existing job cannot change
    action = request.POST.get("action", "")
    extra: dict[str, Any] = {}
    if action == "import_rlinf":
        extra = _import_rlinf(request, state, inv)
    elif action:
        extra = _apply_action(request, state, action, mode, job, inv)
    if "response" in extra:
        return extra["response"]
    if state.step == 4 and "preview" not in extra and not extra.get("errors"):
        document, result = _validate(state, request.user, job)
        lang = language.lang()
        extra["preview"] = _preview_yaml(document)
        extra["warnings"] = _problem_rows(result.warnings, lang)
    return _render(request, _page_context(request, state, mode=mode, job=job, inv=inv, **extra))


def _preselect_common(state: wz.WizardState) -> None:
    """A new job preselects the default domain (``domains.services``: the only one, else none)."""
    _domains_list, default = _domains()
    state.domain = default


def _import_rlinf(request, state: wz.WizardState, inv: UIInventory) -> dict[str, Any]:
    """Upload an RLinf Hydra YAML -> ``jobs.jobspec.rlinf.plan`` -> proposed roles (header = rank 0)."""

    upload = request.FILES.get("rlinf_file")
    text = upload.read().decode("utf-8", "replace") if upload else request.POST.get("rlinf_text", "")
    if not text.strip():
        return {"notice": _("Choose an RLinf YAML file first.")}
    lang = language.lang()
    try:
        result = rlinf.plan(text)
    except Exception as exc:  # noqa: BLE001 - unreadable YAML is shown to the user
        return {"errors": [{"path": "rlinf", "code": "rlinf_invalid", "message": str(exc), "step": 1}]}
    wz.apply_plan(state, result, inv.nodes, inv.cluster_names)
    state.rlinf_config = text
    state.step = 1
    problems = _problem_rows(getattr(result, "problems", []) or [], lang)
    for p in problems:
        p["step"] = 1
    counts = {
        "n": len(state.roles),
        "w": sum(wz._int(r.replicas) for r in state.roles),
        "nn": getattr(result, "num_nodes", "?"),
    }
    notice = (
        ngettext("Imported %(n)d role from the RLinf config", "Imported %(n)d roles from the RLinf config", counts["n"])
        % counts
        + ngettext(
            " (%(w)d worker = cluster.num_nodes %(nn)s).", " (%(w)d workers = cluster.num_nodes %(nn)s).", counts["w"]
        )
        % counts
    )
    for warning in getattr(result, "warnings", []) or []:
        notice += " " + warning.message(lang)
    return {"notice": notice, "errors": problems}


@login_required
def new_job(request: HttpRequest) -> HttpResponse:
    """``/jobs/new/``: create (or clone with ``?clone=<name>``)."""
    return _wizard(request, mode=Mode.CREATE)


@login_required
def edit_job(request: HttpRequest, name: str) -> HttpResponse:
    """``/jobs/<name>/edit/`` (``?restart=1``: edit and restart)."""
    job = policy.get_job_for(request.user, name)
    if not policy.can_change_job(request.user, job):
        raise PermissionDenied
    restart = request.GET.get("restart") == "1" or request.POST.get("restart") == "1"
    return _wizard(request, mode=Mode.RESTART if restart else Mode.EDIT, job=job)


@login_required
@require_POST
def match_count(request: HttpRequest, index: int) -> HttpResponse:
    """Live global match count of role ``index``'s selector (htmx partial)."""
    inv = UIInventory()
    selector = request.POST.get(f"r{index}-selector", "")
    header = _int(request.POST.get("header", "0"), 0)
    return render(
        request,
        "jobs/wizard_match.html",
        {"r": {"i": index, "match": inv.match(selector), "head": index == header}},
    )


@login_required
def yaml_job(request: HttpRequest) -> HttpResponse:
    """``/jobs/new/yaml/``: paste or upload a Job YAML; validate, submit or open it in the wizard."""
    lang = language.lang()
    ctx: dict[str, Any] = {"text": "", "errors": [], "warnings": [], "valid": None}
    if request.method == "POST":
        upload = request.FILES.get("file")
        text, too_large = text_size.read_upload(upload) if upload else (request.POST.get("text", ""), None)
        if too_large is None and text_size.over_limit(len(text.encode("utf-8"))):
            too_large = text_size.too_large()
        if too_large is not None:  # refused before parsing, and not echoed back into the page
            ctx["errors"] = _problem_rows([too_large], lang)
            return render(request, "jobs/wizard_yaml.html", ctx, status=400)
        ctx["text"] = text
        action = request.POST.get("action", "validate")
        document, problems = parse_text(text, "application/yaml")
        if document is None:
            ctx["errors"] = _problem_rows(problems, lang)
            return render(request, "jobs/wizard_yaml.html", ctx, status=400)
        if action == "wizard":
            inv = UIInventory()
            state = wz.from_document(document, infer_cluster=inv.infer_cluster)
            return render(request, "jobs/wizard.html", _page_context(request, state, mode=Mode.CREATE, inv=inv))
        if action == "submit":
            try:
                saved = submission.create_job(request.user, text)
            except submission.JobExists as exc:
                ctx["errors"] = [{"path": "metadata.name", "code": exc.code, "message": _exists_message(exc)}]
                return render(request, "jobs/wizard_yaml.html", ctx, status=409)
            except submission.JobInvalid as exc:
                ctx["errors"] = _problem_rows(exc.result.errors, lang)
                ctx["warnings"] = _problem_rows(exc.result.warnings, lang)
                return render(request, "jobs/wizard_yaml.html", ctx, status=400)
            return HttpResponseRedirect(f"/jobs/{saved.name}/")
        checked, result = submission.check_document(request.user, text)
        ctx["errors"] = _problem_rows(result.errors, lang)
        ctx["warnings"] = _problem_rows(result.warnings, lang)
        ctx["valid"] = not result.errors
        ctx["preview"] = _preview_yaml(checked) if checked is not None and not result.errors else ""
    return render(request, "jobs/wizard_yaml.html", ctx)


urlpatterns = [
    path("new/", new_job, name="wizard-new"),
    path("new/match/<int:index>/", match_count, name="wizard-match"),
    path("new/yaml/", yaml_job, name="wizard-yaml"),
    path("<str:name>/edit/", edit_job, name="wizard-edit"),
]
