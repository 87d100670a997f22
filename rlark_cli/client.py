"""The connection of the ``rlark`` client: configuration, HTTP requests to the console's REST API, and the
readable failures and ``-o json|yaml`` output every command shares (stdlib ``urllib`` + PyYAML only)."""

from __future__ import annotations

import argparse
import json
import os
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import yaml

CONFIG_PATH = Path("~/.config/rlark/config.yaml")
TIMEOUT = 60

# Exit codes (``rlark --help`` and docs/api-and-cli.md list them): a script can tell these apart.
EXIT_OK = 0
EXIT_FAILURE = 1  # anything else: the server cannot be reached, a server error, a file that cannot be read
EXIT_USAGE = 2  # a command line argparse refuses
EXIT_NOT_FOUND = 3  # HTTP 404: no such job or Worker (or one you may not see)
EXIT_REFUSED = 4  # HTTP 401/403/409: not logged in, not allowed, or not possible in the job's state
EXIT_INVALID = 5  # HTTP 400/422, or a job document / RLinf config with errors
EXIT_TIMEOUT = 6  # rlark wait: the condition was not met in time


def exit_code_of(status: int) -> int:
    """The exit code for an HTTP ``status`` the console answered (see the ``EXIT_*`` constants)."""
    if status == 404:
        return EXIT_NOT_FOUND
    if status in (401, 403, 409):
        return EXIT_REFUSED
    if status in (400, 413, 422):
        return EXIT_INVALID
    return EXIT_FAILURE


class CLIError(Exception):
    """A failure to report (message already readable); ``body`` is the API answer when there is one, ``code``
    the process's exit code (``EXIT_*``)."""

    def __init__(self, message: str, body: Any = None, code: int = EXIT_FAILURE):
        super().__init__(message)
        self.body = body
        self.code = code


class Client:
    def __init__(self, url: str, token: str, lang: str):
        self.url = url.rstrip("/")
        self.token = token
        self.lang = lang

    def request(self, method: str, path: str, body: bytes | None = None, content_type: str = "") -> tuple[int, Any]:
        """-> (status, decoded JSON body or text). Raises CLIError when the server cannot be reached."""
        headers = {"Accept": "application/json", "Accept-Language": self.lang}
        if self.token:
            headers["Authorization"] = f"Token {self.token}"
        if content_type:
            headers["Content-Type"] = content_type
        req = urllib.request.Request(f"{self.url}/api/v1/{path.lstrip('/')}", data=body, method=method, headers=headers)
        try:
            with urllib.request.urlopen(req, timeout=TIMEOUT) as resp:
                status, raw = resp.status, resp.read()
        except urllib.error.HTTPError as exc:
            status, raw = exc.code, exc.read()
        except (urllib.error.URLError, OSError) as exc:
            reason = getattr(exc, "reason", exc)
            raise CLIError(f"cannot reach {self.url}: {reason}")
        text = raw.decode("utf-8", "replace")
        try:
            return status, json.loads(text) if text else None
        except ValueError:
            return status, text


def load_config(args: argparse.Namespace) -> Client:
    url = args.url or os.environ.get("RLARK_URL", "")
    token = args.token or os.environ.get("RLARK_TOKEN", "")
    path = Path(os.environ.get("RLARK_CONFIG", str(CONFIG_PATH))).expanduser()
    if (not url or not token) and path.exists():
        try:
            data = yaml.safe_load(path.read_text()) or {}
        except (OSError, yaml.YAMLError) as exc:
            raise CLIError(f"cannot read {path}: {exc}")
        if isinstance(data, dict):
            url = url or str(data.get("url") or "")
            token = token or str(data.get("token") or "")
    if not url:
        raise CLIError(f"no server: set RLARK_URL or url in {path}")
    if not token:
        raise CLIError(f"no token: set RLARK_TOKEN or token in {path}")
    lang = args.lang or os.environ.get("RLARK_LANG") or os.environ.get("LANG", "")
    return Client(url, token, "zh-hans" if lang.lower().startswith("zh") else "en")


def emit(args: argparse.Namespace, body: Any) -> bool:
    """Print ``body`` as JSON/YAML when ``-o`` asks for it; True when printed."""
    if args.output == "json":
        print(json.dumps(body, ensure_ascii=False, indent=2))
        return True
    if args.output == "yaml":
        print(yaml.safe_dump(body, allow_unicode=True, sort_keys=False), end="")
        return True
    return False


def problems_text(body: Any) -> str:
    lines = []
    if isinstance(body, dict):
        for key, label in (("errors", "error"), ("warnings", "warning"), ("problems", "problem")):
            for p in body.get(key) or []:
                path = f" {p.get('path')}:" if p.get("path") else ""
                lines.append(f"  {label} [{p.get('code')}]{path} {p.get('message')}")
        if not lines and body.get("detail"):
            lines.append(f"  {body['detail']}")
    elif body:
        lines.append(f"  {str(body)[:500]}")
    return "\n".join(lines)


def fail(status: int, body: Any, what: str) -> CLIError:
    return CLIError(f"{what} failed: HTTP {status}\n{problems_text(body)}".rstrip(), body, exit_code_of(status))


def print_table(table: list[tuple[str, ...]]) -> None:
    """Print ``table`` (a header row, then rows of strings) as left-aligned columns two spaces apart, as
    ``kubectl get`` does; trailing spaces cut."""
    widths = [max(len(row[i]) for row in table) for i in range(len(table[0]))]
    for row in table:
        print("  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip())
