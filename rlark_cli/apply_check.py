"""Whether ``rlark apply`` would change anything: an unchanged document applied to a finished job does nothing
(the console would store the same document and the job stays finished), so the CLI says so and points to
``rlark restart`` instead of printing ``configured``."""

from __future__ import annotations

import argparse
import json
from typing import Any

import yaml

from rlark_cli.client import Client

FINISHED = ("Succeeded", "Failed")
IGNORED_SPEC_KEYS = ("stopped",)  # the job's run state, not its definition


def _definition(document: Any) -> Any:
    """The part of a Job document that defines the job: its ``spec`` without the run state, and its name."""
    if not isinstance(document, dict):
        return None
    spec = {k: v for k, v in (document.get("spec") or {}).items() if k not in IGNORED_SPEC_KEYS}
    return {"name": (document.get("metadata") or {}).get("name"), "spec": spec}


def unchanged_finished(client: Client, current: dict, body: bytes, ctype: str, args: argparse.Namespace) -> bool:
    """True when ``current`` (the job's detail) has finished and the file (``body``, as ``rlark apply`` sends it)
    is the same job once the console has normalized it (``POST /api/v1/jobs/validate/`` answers the normalized
    YAML), with the same attached RLinf config. False when anything differs or cannot be told."""
    if current.get("phase") not in FINISHED:
        return False
    if getattr(args, "rlinf", None):
        try:
            config = json.loads(body.decode("utf-8")).get("rlinf_config", "")
        except ValueError:
            return False
        if (config or "").strip() != (current.get("rlinf_config") or "").strip():
            return False
    status, data = client.request("POST", "jobs/validate/", body, ctype)
    if status != 200 or not isinstance(data, dict) or not data.get("valid"):
        return False
    try:
        normalized = yaml.safe_load(data.get("yaml") or "")
    except yaml.YAMLError:
        return False
    return _definition(normalized) == _definition(current.get("spec"))
