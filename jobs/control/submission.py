"""Create, update and clone Jobs: parse -> normalize -> validate (the one validator) -> store -> reconcile.

Used by the wizard, the YAML import page, the REST API and (through the API) the ``rlark`` CLI, so every entry
point gives the same codes for the same document.

Errors raised:
- ``JobInvalid(result)``: the document has errors; ``result`` is a ``jobs.jobspec.validator.ValidationResult``.
- ``JobExists(name)``: a job with that name exists (the API answers 409, upstream answered 500).
"""

from __future__ import annotations

import copy
from datetime import UTC, datetime
from typing import Any

from django.db import IntegrityError, transaction

from accounts.audit import record
from clusters.runtime.local import tenancy
from jobs import policy
from jobs.control import controller, safety
from jobs.control import tenancy as local_occupants
from jobs.jobspec.document import (
    DISPLAY_NAME,
    RESTARTED_AT,
    clean,
    display_name,
    normalize,
    parse_text,
    tree_problems,
)
from jobs.jobspec.inventory import Inventory
from jobs.jobspec.messages import Problem
from jobs.jobspec.validator import ValidationResult, validate
from jobs.models import Job


class JobInvalid(Exception):
    """The document is not a valid Job; ``result.errors`` lists every problem."""

    def __init__(self, result: ValidationResult):
        super().__init__(", ".join(result.codes()) or "invalid job")
        self.result = result


class JobExists(Exception):
    """A job with ``name`` already exists. Job names are global (each names the cluster objects of the job, seed 05:
    "确认同名 Job 是否已存在"), so the name is refused either way; ``visible`` says whether the submitter may see that
    job (their own, or staff). When not, callers say only that the name is not available (``code``
    ``job_name_unavailable``), never that another user's job exists (jobs.policy: other users' jobs are 404)."""

    def __init__(self, name: str, visible: bool = True):
        super().__init__(f"job {name} already exists")
        self.name = name
        self.visible = visible

    @property
    def code(self) -> str:
        return "job_exists" if self.visible else "job_name_unavailable"


def _exists(user, name: str) -> JobExists:
    existing = Job.objects.filter(name=name).select_related("owner").first()
    return JobExists(name, visible=existing is None or policy.can_view_job(user, existing))


def check_document(
    user,
    document_or_text: dict | str | bytes,
    *,
    content_type: str | None = None,
    rlinf_config: str | dict | None = "",
    exclude_job: Job | None = None,
    key_owners: list | None = None,
) -> tuple[dict | None, ValidationResult]:
    """Parse (text) -> normalize -> validate against ``Inventory.from_db(user)``. No side effects.

    Returns ``(normalized document or None when unparsable, result)``; a new robot job's document has
    ``spec.stopped: true`` (``safety.hold_new``). The wizard, YAML page, API and CLI all go through here (or
    ``create_job``/``update_job``), so they report identical codes.
    """
    if isinstance(document_or_text, str | bytes):
        document, problems = parse_text(document_or_text, content_type)
        if document is None:
            return None, ValidationResult(problems)
    else:
        document = document_or_text
    if not isinstance(document, dict):
        return None, ValidationResult([Problem("", "document_invalid", {"detail": "the top level must be a mapping"})])
    if problems := tree_problems(document):
        return None, ValidationResult(problems)
    document = normalize(document)
    inventory = Inventory.from_db(user, exclude_job=exclude_job, key_owners=key_owners)
    result = validate(document, inventory, rlinf_config=rlinf_config or None)
    result.problems.extend(_single_user_problems(document, user, exclude_job))
    if exclude_job is None:
        safety.hold_new(document, result)  # a new robot job is stored stopped: the previews show it so
    return document, result


def _single_user_problems(document: dict, user, exclude_job: Job | None) -> list[Problem]:
    """``local_cluster_single_user`` for each local cluster of ``document`` that is single-user on this console
    (clusters.runtime.local.tenancy) while another user's job is active there."""
    if user is None or not tenancy.single_user():
        return []
    problems = []
    first: dict[str, int] = {}  # cluster -> index of its first Task template
    for i, t in enumerate((document.get("spec") or {}).get("tasks") or []):
        if isinstance(t, dict) and isinstance(t.get("cluster"), str) and t["cluster"]:
            first.setdefault(t["cluster"], i)
    for name, i in first.items():
        others = local_occupants.occupants(name, user, exclude_job=exclude_job)
        if others:
            params = {"cluster": name, "users": ", ".join(others)}
            problems.append(Problem(f"spec.tasks[{i}].cluster", "local_cluster_single_user", params))
    return problems


def _rlinf(rlinf_config: Any, rlinf_config_text: Any) -> str:
    value = rlinf_config or rlinf_config_text or ""
    if isinstance(value, dict):
        import yaml

        return yaml.safe_dump(value, sort_keys=False, allow_unicode=True)
    return str(value)


def _reconcile(job: Job) -> None:
    controller.request_reconcile(job)


def create_job(
    user,
    document_or_text: dict | str | bytes,
    *,
    content_type: str | None = None,
    rlinf_config: str | dict | None = "",
    rlinf_config_text: str = "",
    request=None,
) -> Job:
    """Validate and store a new Job owned by ``user``, audit ``job.create``, then request a reconcile.

    ``rlinf_config`` (or ``rlinf_config_text``): an attached RLinf YAML; enables ``num_nodes_mismatch`` and
    ``node_ranks_mismatch`` and is stored on the job. The returned job has ``validation`` (the result, for warnings).
    Raises ``JobInvalid`` / ``JobExists``.
    """
    config = _rlinf(rlinf_config, rlinf_config_text)
    document, result = check_document(user, document_or_text, content_type=content_type, rlinf_config=config)
    if document is None or not result.valid:
        raise JobInvalid(result)
    document = clean(document)
    held = safety.hold_new(document, result)  # a robot job is stored stopped until a safety approval
    name = document["metadata"]["name"]
    if Job.objects.filter(name=name).exists():
        raise _exists(user, name)
    try:
        with transaction.atomic():
            job = Job.objects.create(
                name=name,
                display_name=display_name(document),
                owner=user,
                spec=document,
                stopped=document["spec"].get("stopped") is True,
                rlinf_config=config,
            )
            record(
                user,
                "job.create",
                "job",
                name,
                request=request,
                templates=[t.get("name") for t in document["spec"]["tasks"]],
                workers=result.workers,
            )
    except IntegrityError:
        raise _exists(user, name) from None
    _reconcile(job)
    job.validation = result  # type: ignore[attr-defined]
    job.safety_hold = held  # type: ignore[attr-defined]
    return job


def update_job(
    user,
    job: Job,
    document_or_text: dict | str | bytes,
    restart: bool = False,
    *,
    content_type: str | None = None,
    rlinf_config: str | dict | None = None,
    request=None,
    patch: bool = False,
) -> Job:
    """Replace ``job``'s document (edit; "edit and restart" with ``restart=True``) after validation.

    ``patch=True``: ``document_or_text`` is a JSON merge patch, applied to the document as stored *now*, under
    the Job row's lock, so concurrent edits of different fields and a concurrent stop/start are never lost
    (adding annotation ``rlark.io/restarted-at`` restarts). A ``spec.stopped`` the request leaves as the caller
    read it keeps the job's current state (no lost update across replicas).

    The name cannot change (``job_name_mismatch``). Existing labels and annotations are kept unless the new
    document sets them (upstream PUT dropped them). The resources the job's own Workers hold are not counted
    against it. ``rlinf_config`` None keeps the attached config, "" detaches it. A change of ``spec.stopped``
    goes through the controller's stop/start; ``restart`` through ``controller.restart``. Audits ``job.update``.
    Raises ``JobInvalid`` (also, with code ``safety_approval_missing``/``_stale`` and nothing stored, when the edit
    would run a robot job without a current safety approval).
    """

    try:
        with transaction.atomic():
            fresh = Job.objects.select_for_update().get(pk=job.pk)
            return _update_locked(
                user, job, fresh, document_or_text, restart, content_type, rlinf_config, request, patch
            )
    except safety.SafetyGateClosed as exc:  # the edit is rolled back: a robot job runs only as approved
        raise JobInvalid(exc.result) from exc


def _update_locked(user, seen: Job, job: Job, document_or_text, restart, content_type, rlinf_config, request, patch):
    """:func:`update_job` with ``job`` freshly read under its row lock; ``seen`` is the caller's older copy."""

    if patch:
        if not isinstance(document_or_text, dict):
            parsed, problems = parse_text(document_or_text, content_type)
            if parsed is None:
                raise JobInvalid(ValidationResult(problems))
            document_or_text = parsed
        restart = restart or RESTARTED_AT in ((document_or_text.get("metadata") or {}).get("annotations") or {})
        document_or_text = merge_patch(job.spec or {}, document_or_text)
        if restart:
            document_or_text.get("metadata", {}).get("annotations", {}).pop(RESTARTED_AT, None)
        content_type = None
    config = job.rlinf_config if rlinf_config is None else _rlinf(rlinf_config, "")
    if isinstance(document_or_text, str | bytes):
        parsed, problems = parse_text(document_or_text, content_type)
        if parsed is None:
            raise JobInvalid(ValidationResult(problems))
        document_or_text = parsed
    if isinstance(document_or_text, dict):
        if problems := tree_problems(document_or_text):
            raise JobInvalid(ValidationResult(problems))
        document_or_text = copy.deepcopy(document_or_text)
        meta = document_or_text.setdefault("metadata", {}) if isinstance(document_or_text, dict) else {}
        if isinstance(meta, dict) and not meta.get("name"):
            meta["name"] = job.name  # PUT/PATCH bodies may omit the name: it is in the URL
    document, result = check_document(
        user,
        document_or_text,
        content_type=content_type,
        rlinf_config=config,
        exclude_job=job,
        key_owners=[job.owner],
    )
    if document is not None and document.get("metadata", {}).get("name") != job.name:
        result.problems.append(
            Problem(
                "metadata.name",
                "job_name_mismatch",
                {"name": document.get("metadata", {}).get("name"), "expected": job.name},
            )
        )
    if document is None or not result.valid:
        raise JobInvalid(result)
    old_meta = (job.spec or {}).get("metadata") or {}
    meta = document["metadata"]
    for key in ("labels", "annotations"):
        merged = dict(old_meta.get(key) or {})
        merged.update(meta.get(key) or {})
        if merged:
            meta[key] = merged
    was_stopped = job.stopped
    if (document["spec"].get("stopped") is True) == seen.stopped and seen.stopped != job.stopped:
        document["spec"]["stopped"] = job.stopped  # not asked to change: a stop/start committed meanwhile stays
    if restart:
        meta.setdefault("annotations", {})[RESTARTED_AT] = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        document["spec"]["stopped"] = False
    document = clean(document)
    job.spec = document
    job.display_name = (meta.get("annotations") or {}).get(DISPLAY_NAME, job.display_name) or ""
    job.rlinf_config = config
    job.save(update_fields=["spec", "display_name", "rlinf_config", "updated_at"])
    record(user, "job.update", "job", job.name, request=request, restart=restart, workers=result.workers)
    stopped = document["spec"].get("stopped") is True
    if restart:
        job = controller.restart(job, actor=user, request=request)
    elif stopped and not was_stopped:
        job = controller.stop(job, actor=user, request=request)
    elif was_stopped and not stopped:
        job = controller.start(job, actor=user, request=request)
    else:
        if not stopped:
            safety.check_start(job)  # a running robot job keeps running only as approved
        _reconcile(job)
    job.refresh_from_db()
    job.validation = result  # type: ignore[attr-defined]
    return job


def merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7386 JSON merge patch (``null`` deletes a key); returns a new value."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    out = copy.deepcopy(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            out.pop(key, None)
        else:
            out[key] = merge_patch(out.get(key), value)
    return out


def clone_name(name: str) -> str:
    """``<name>-copy`` (shortened to fit 63 characters); ``-copy-2``, ``-copy-3``... when taken."""
    n = 1
    while True:
        suffix = "-copy" if n == 1 else f"-copy-{n}"
        candidate = f"{name[: 63 - len(suffix)].rstrip('-')}{suffix}"
        if not Job.objects.filter(name=candidate).exists():
            return candidate
        n += 1


def clone_document(job: Job) -> dict:
    """The job's document renamed ``<name>-copy``, not stopped, without ``rlark.io/restarted-at``; PVC claim
    names recomputed for the new name. Nothing is stored."""
    document = copy.deepcopy(job.spec or {})
    meta = document.setdefault("metadata", {})
    meta["name"] = clone_name(job.name)
    annotations = meta.get("annotations") or {}
    annotations.pop(RESTARTED_AT, None)
    if annotations:
        meta["annotations"] = annotations
    else:
        meta.pop("annotations", None)
    document.setdefault("spec", {})["stopped"] = False
    return clean(normalize(document))
