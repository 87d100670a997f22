"""What looks like a secret in a Job document: the validator refuses credentials in env values, scripts and SSH keys
(seed 02 and seed 05: no credentials, private keys or access tokens in the job; they belong in Secrets).

Every search is linear in the text (bounded repetitions, no pattern that rescans a start position): no input makes
it slow (no ReDoS). The validator bounds the size of a text before it is searched (``validator.MAX_VALUE_BYTES``).
"""

from __future__ import annotations

import re

SECRET_NAME = re.compile(
    r"(^|_)(PASSWORD|PASSWD|PWD|TOKEN|SECRET|SECRET_KEY|API_KEY|APIKEY|PRIVATE_KEY|CREDENTIALS?)$|ACCESS_KEY",
    re.IGNORECASE,
)
# Token shapes. Every repetition is bounded ({N}, not {N,}): a search needs only the minimum length to decide,
# so each start position costs O(1) and a search is linear in the text (no ReDoS).
SECRET_VALUE = re.compile(
    r"-----BEGIN [A-Z ]{0,40}PRIVATE KEY-----|\bAKIA[0-9A-Z]{16}\b|\bgh[pousr]_[A-Za-z0-9]{30}"
    r"|\bgithub_pat_[A-Za-z0-9_]{20}"
    r"|\bxox[abposr]-[A-Za-z0-9-]{10}|\bsk-[A-Za-z0-9_-]{20}|\bhf_[A-Za-z0-9]{30}|\bglpat-[A-Za-z0-9_-]{20}"
)
# ``scheme://user:password@``: the pattern starts at the literal ``://`` (so no start position rescans a long
# run of scheme-like characters, which made the old ``[a-z][a-z0-9+.-]*://`` pattern quadratic) and its parts
# are bounded; the scheme before it is then checked in a 32-character window. RFC 3986 userinfo has no ``/``,
# ``@`` or whitespace. Linear in the text.
_URL_SCHEME_END = re.compile(r"[a-z][a-z0-9+.-]{0,31}$", re.IGNORECASE)
_URL_USERINFO = re.compile(r"://[^/\s:@]{1,256}:[^/\s@]{1,256}@")
SCRIPT_ASSIGNMENT = re.compile(r"(?:^|[\s;&|])(?:export\s+)?([A-Za-z_][A-Za-z0-9_]*)=(\"[^\"]*\"|'[^']*'|[^\s;&|]+)")
SCRIPT_FLAG = re.compile(r"--(?:password|passwd|token|api-key|secret)[= ]+(\"[^\"]*\"|'[^']*'|[^\s;&|]+)", re.I)


def _url_with_password(value: str) -> bool:
    """True when ``value`` contains ``scheme://user:password@`` (e.g. ``postgres://u:p@db``). Linear time."""
    for match in _URL_USERINFO.finditer(value):
        at = match.start()
        if at and _URL_SCHEME_END.search(value, max(0, at - 32), at):
            return True
    return False


def looks_secret_value(value: str) -> bool:
    """Token shapes or a URL with a password. Linear in ``len(value)``; callers bound the size first."""
    return bool(SECRET_VALUE.search(value)) or _url_with_password(value)


def script_has_secret(script: str) -> bool:
    """A script (``prepareScript``, ``runScript``) holds a secret: a :func:`looks_secret_value` shape, a literal
    assigned to a secret-named variable (``export HF_TOKEN=abc``; ``$VAR`` references are fine) or a literal after a
    ``--password``/``--token``/... flag. Linear in ``len(script)``; callers bound the size first."""
    if looks_secret_value(script):
        return True
    for name, value in SCRIPT_ASSIGNMENT.findall(script):
        literal = value.strip("\"'")
        if SECRET_NAME.search(name) and literal and not literal.startswith("$"):
            return True
    for value in SCRIPT_FLAG.findall(script):
        literal = value.strip("\"'")
        if literal and not literal.startswith("$"):
            return True
    return False
