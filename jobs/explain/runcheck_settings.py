"""The run check's settings per Job (``Job.run_check`` JSON) and the log patterns they ask the log scans to track.

Settings: ``progress_pattern`` (check 5; default RLinf's ``Global Step``), ``app_patterns`` (a list, check 4;
default RLinf's ``RLinf is running on a cluster with N nodes``), ``output_path`` (container path, ``*`` globs
allowed; check 5) and ``max_wait_minutes`` (after it, missing evidence is "not met" instead of "to confirm").
"""

from __future__ import annotations

import re
from typing import Any

DEFAULT_SETTINGS: dict[str, Any] = {
    "progress_pattern": "Global Step",
    "app_patterns": [r"RLinf is running on a cluster with \d+ nodes"],
    "output_path": "",
    "max_wait_minutes": 30,
}
MAX_WAIT_LIMIT = 7 * 24 * 60
MAX_PATTERN_LEN = 500


class SettingsError(ValueError):
    """Invalid run check settings; ``field`` names the setting."""

    def __init__(self, field_name: str, message: str) -> None:
        super().__init__(message)
        self.field = field_name


def settings_of(raw: dict[str, Any] | None) -> dict[str, Any]:
    """The effective settings: ``DEFAULT_SETTINGS`` overlaid with the stored valid values."""
    out = dict(DEFAULT_SETTINGS)
    for key, value in (raw or {}).items():
        if key in out and value not in (None, ""):
            out[key] = value
    return out


def clean_settings(data: dict[str, Any]) -> dict[str, Any]:
    """Validate user input into the stored shape; raises :class:`SettingsError`.

    ``app_patterns`` may be a list or newline-separated text; every pattern must be a valid regex of at most
    ``MAX_PATTERN_LEN`` characters; ``max_wait_minutes`` an integer 1..10080.
    """
    out: dict[str, Any] = {}
    progress = clean_pattern("progress_pattern", data.get("progress_pattern"))
    out["progress_pattern"] = progress or DEFAULT_SETTINGS["progress_pattern"]
    patterns = data.get("app_patterns")
    if isinstance(patterns, str):
        patterns = patterns.splitlines()
    patterns = [str(p).strip() for p in (patterns or []) if str(p).strip()]
    for p in patterns:
        clean_pattern("app_patterns", p)
    out["app_patterns"] = patterns or list(DEFAULT_SETTINGS["app_patterns"])
    output = str(data.get("output_path") or "").strip()
    if output and not output.startswith("/"):
        raise SettingsError("output_path", "the output path must be an absolute container path")
    if ".." in output.split("/"):
        raise SettingsError("output_path", "the output path must not contain ..")
    out["output_path"] = output
    wait = data.get("max_wait_minutes", DEFAULT_SETTINGS["max_wait_minutes"])
    try:
        wait = int(wait)
    except (TypeError, ValueError):
        raise SettingsError("max_wait_minutes", "enter a whole number of minutes") from None
    if not 1 <= wait <= MAX_WAIT_LIMIT:
        raise SettingsError("max_wait_minutes", f"between 1 and {MAX_WAIT_LIMIT} minutes")
    out["max_wait_minutes"] = wait
    return out


def clean_pattern(field_name: str, pattern: object) -> str:
    """A user's log pattern, stripped ("" for none): at most ``MAX_PATTERN_LEN`` characters and a valid regex,
    else :class:`SettingsError` naming ``field_name``. The one rule for every user log pattern (the Run check's,
    a notification rule's)."""
    text = str(pattern or "").strip()
    if len(text) > MAX_PATTERN_LEN:
        raise SettingsError(field_name, "pattern too long")
    if text:
        _compile(field_name, text)
    return text


def _compile(field_name: str, pattern: str) -> re.Pattern[str]:
    try:
        return re.compile(pattern)
    except re.error as exc:
        raise SettingsError(field_name, f"invalid regular expression: {exc}") from None


def progress_pattern(settings: dict[str, Any]) -> str:
    """The progress regex of check 5 (``DEFAULT_SETTINGS``' when unset)."""
    return settings.get("progress_pattern") or DEFAULT_SETTINGS["progress_pattern"]


def log_patterns(settings: dict[str, Any]) -> dict[str, str]:
    """The user regexes checks 4 and 5 look for in the logs: ``app<i>`` and ``progress``."""
    patterns = {f"app{i}": p for i, p in enumerate(settings.get("app_patterns") or [])}
    patterns["progress"] = progress_pattern(settings)
    return patterns


def job_log_patterns(job) -> dict[str, str]:
    """:func:`log_patterns` of ``job``'s saved Run check settings: what its stored log scans track, so a scan made
    by the Diagnosis tab or the background refresh serves the Run check too."""
    return log_patterns(settings_of(job.run_check))
