"""Unknown keys in a Job document: a warning that names the key and the nearest known one.

A typo such as ``tensorboardDir:`` (for ``tensorBoardDir``), ``stoped:`` (for ``stopped``) or ``nodeSelecter:``
(for ``nodeSelector``) is valid YAML and would be kept silently without any effect. Every mapping the console
itself defines is checked: the top level, ``metadata``, ``spec``, each ``spec.tasks[]`` entry, its ``kubernetes``
and ``kubernetes.workload`` mappings and each ``pvcOptions`` entry (the fields of upstream-rlark.md, section 2, and
the console's own: ``cluster``, ``checkpointDir``, ``startTimeout``, ``trackingCredentials``, ...). The Pod
template (``kubernetes.workload.template``) is Kubernetes' own object and stays free, as do the maps whose keys the
user chooses (labels, annotations, ``nodeSelector``, ``pvcStorageMap``).

Problems: ``unknown_key`` (warning) with params ``{key, where, suggestion}``; the ``unknown_key_no_match`` variant
when no known key is near (``difflib.get_close_matches``, cutoff 0.6).
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable
from typing import Any

from jobs.jobspec.document import TASK_KEY_ORDER
from jobs.jobspec.messages import WARNING, Problem

ROOT_KEYS = ("apiVersion", "kind", "metadata", "spec", "status")
# Kubernetes ObjectMeta: a document read back from the API or from kubectl may carry any of them.
METADATA_KEYS = (
    "name",
    "annotations",
    "labels",
    "namespace",
    "generateName",
    "uid",
    "resourceVersion",
    "generation",
    "creationTimestamp",
    "deletionTimestamp",
    "deletionGracePeriodSeconds",
    "finalizers",
    "ownerReferences",
    "managedFields",
    "selfLink",
)
SPEC_KEYS = ("tasks", "domain", "startTimeout", "sshPublicKey", "sshPublicKeys", "stopped", "trackingCredentials")
# upstream-rlark.md 2.2; ``domain``, ``sshPublicKey``, ``docker``, ``raw`` and ``downstreamName`` are schema-only.
TASK_KEYS = TASK_KEY_ORDER + ("domain", "sshPublicKey", "docker", "raw", "downstreamName")
KUBERNETES_KEYS = ("workload",)
WORKLOAD_KEYS = ("kind", "replicas", "template", "pvcStorageMap", "pvcOptions")
PVC_OPTION_KEYS = ("size", "accessMode", "reclaimPolicy")


def nearest(key: str, known: Iterable[str]) -> str:
    """The known key nearest to ``key``: the same key in another case first, else the closest by
    ``difflib.get_close_matches`` (cutoff 0.6); "" when none is near."""
    names = list(known)
    folded = {k.casefold(): k for k in names}
    if key.casefold() in folded:
        return folded[key.casefold()]
    close = difflib.get_close_matches(key, names, n=1, cutoff=0.6)
    return close[0] if close else ""


def _check(mapping: Any, where: str, known: tuple[str, ...], out: list[Problem]) -> None:
    """Append a warning for each key of ``mapping`` (at path ``where``, "" for the top level) not in ``known``."""
    if not isinstance(mapping, dict):
        return
    for key in mapping:
        name = str(key)
        if name in known:
            continue
        suggestion = nearest(name, known)
        path = f"{where}.{name}" if where else name
        params = {"key": name, "where": where or "/", "suggestion": suggestion}
        out.append(Problem(path, "unknown_key", params, WARNING, "" if suggestion else "unknown_key_no_match"))


def problems(document: Any) -> list[Problem]:
    """The ``unknown_key`` warnings of ``document`` (a parsed Job; anything else gives ``[]``), in document order.

    Shapes that are not mappings are left to the validator's own errors; nothing here is an error."""
    out: list[Problem] = []
    if not isinstance(document, dict):
        return out
    _check(document, "", ROOT_KEYS, out)
    _check(document.get("metadata"), "metadata", METADATA_KEYS, out)
    spec = document.get("spec")
    _check(spec, "spec", SPEC_KEYS, out)
    tasks = spec.get("tasks") if isinstance(spec, dict) else None
    for i, task in enumerate(tasks if isinstance(tasks, list) else []):
        path = f"spec.tasks[{i}]"
        _check(task, path, TASK_KEYS, out)
        k8s = task.get("kubernetes") if isinstance(task, dict) else None
        _check(k8s, f"{path}.kubernetes", KUBERNETES_KEYS, out)
        workload = k8s.get("workload") if isinstance(k8s, dict) else None
        _check(workload, f"{path}.kubernetes.workload", WORKLOAD_KEYS, out)
        options = workload.get("pvcOptions") if isinstance(workload, dict) else None
        for claim, opts in (options or {}).items() if isinstance(options, dict) else ():
            _check(opts, f"{path}.kubernetes.workload.pvcOptions.{claim}", PVC_OPTION_KEYS, out)
    return out
