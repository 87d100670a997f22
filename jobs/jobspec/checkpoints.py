"""Where a job's RLinf checkpoints are, and the run script that resumes from one (pure functions over the document).

RLinf writes one directory per saved step (RLinf 0.3.0 ``rlinf/runners/embodied_runner.py``, ``_save_checkpoint``;
``rlinf/runners/reasoning_runner.py``, ``_save_checkpoint``)::

    embodied:  <runner.logger.log_path>/<runner.logger.experiment_name>/checkpoints/global_step_<N>/actor/
    reasoning: <runner.output_dir>/<runner.experiment_name>/checkpoints/global_step_<N>/{actor,critic,data}/

and resumes from ``runner.resume_dir=<…>/global_step_<N>``: it loads ``<resume_dir>/actor`` (asserting that it
exists) and parses the step from the directory's name (``int(resume_dir.split("global_step_")[-1])``), which is why
the console never renames, moves or overwrites a checkpoint directory.

The job's checkpoint directory (a container path) is the Header template's :data:`FIELD` (``checkpointDir``, beside
``tensorBoardDir``; ``$RLARK_RUN_ID`` allowed, ``jobs.observe.run_prefix``), else the one the attached RLinf config
names (:func:`config_checkpoint_dir`: simple ``${a.b}`` interpolations of the same file are resolved; a relative or
unresolvable path gives nothing, since the console cannot know the run script's working directory).

:func:`resume_run_script` appends ``runner.resume_dir=<path>`` to the run script's RLinf command. A logical line
(backslash continuations joined) is an RLinf command when it runs ``python``/``python3``/``torchrun`` on a file
``…examples/<dir>/train_<name>.py`` or on a module ``-m rlinf…``, or passes ``--config-name`` to a Python program.
The override goes after the command's last argument (before a ``|``, ``;``, ``&&``, ``||``, ``&`` or redirection)
of the last such line; an existing ``runner.resume_dir=`` there is replaced. A script without such a line (for
example a shell wrapper) is returned unchanged and reads ``$RLARK_RESUME_DIR`` itself.
"""

from __future__ import annotations

import re
import shlex
from typing import Any

from jobs.jobspec.messages import WARNING, Problem
from jobs.jobspec.rlinf import load_config

FIELD = "checkpointDir"
RESUME_ENV = "RLARK_RESUME_DIR"
OVERRIDE = "runner.resume_dir"
MAX_PATH_CHARS = 4096
STEP_DIR = re.compile(r"^global_step_(\d{1,12})$")
_INTERPOLATION = re.compile(r"\$\{([A-Za-z_][\w.]*)\}")
_PYTHON = re.compile(r"(?:^|[\s/;&|(])(?:python[0-9.]*|torchrun)(?=\s)")
_ENTRY = re.compile(
    r"(?:^|[\s/])examples/\S+/train_[^/\s]+\.py(?=\s|$)"  # RLinf's example entry points
    r"|\s-m\s+rlinf[\w.]*(?=\s|$)"  # a module of the rlinf package
    r"|\s--config-name[\s=]"  # any Hydra program
)
_EXISTING = re.compile(r"\s+runner\.resume_dir=(?:'[^']*'|\"[^\"]*\"|\S+)")


def _lookup(data: dict, dotted: str) -> Any:
    node: Any = data
    for part in dotted.split("."):
        if not isinstance(node, dict) or part not in node:
            return None
        node = node[part]
    return node


def _resolved(data: dict, value: Any, depth: int = 0) -> str | None:
    """``value`` as text with ``${a.b}`` references to scalars of ``data`` resolved (8 levels at most); None when
    it is not a string or number, or names something unresolvable (``${oc.env:…}``, a missing key)."""
    if isinstance(value, bool) or not isinstance(value, (str, int, float)):
        return None
    text = str(value)
    if depth > 8:
        return None
    out, at = [], 0
    for match in _INTERPOLATION.finditer(text):
        inner = _resolved(data, _lookup(data, match.group(1)), depth + 1)
        if inner is None:
            return None
        out += [text[at : match.start()], inner]
        at = match.end()
    out.append(text[at:])
    joined = "".join(out)
    return None if "${" in joined else joined


def config_checkpoint_dir(config: str) -> str:
    """The ``checkpoints`` directory the RLinf config ``config`` (Hydra YAML text) writes to, as an absolute
    container path (see the module docstring for both layouts; the reasoning one when ``runner.output_dir`` is set);
    "" when the config is unreadable or names no absolute path."""
    if not config:
        return ""
    data, problems = load_config(config)
    if data is None or problems:
        return ""
    runner = data.get("runner") if isinstance(data.get("runner"), dict) else {}
    if runner.get("output_dir") is not None:
        parts = [_resolved(data, runner.get("output_dir")), _resolved(data, runner.get("experiment_name"))]
    else:
        logger = runner.get("logger") if isinstance(runner.get("logger"), dict) else {}
        parts = [_resolved(data, logger.get("log_path")), _resolved(data, logger.get("experiment_name"))]
    if any(not p for p in parts) or not str(parts[0]).startswith("/"):
        return ""
    path = "/".join([str(parts[0]).rstrip("/"), str(parts[1]).strip("/"), "checkpoints"])
    return path if len(path) <= MAX_PATH_CHARS else ""


def header_template(spec: dict) -> dict:
    """The Header template of a ``spec`` section (``head: true``), else the first one; ``{}`` when none."""
    templates = [t for t in spec.get("tasks") or [] if isinstance(t, dict)]
    return next((t for t in templates if t.get("head") is True), templates[0] if templates else {})


def checkpoint_dir(spec: dict, rlinf_config: str) -> tuple[str, str]:
    """``(container path, source)`` of the job's checkpoint directory: the Header template's ``checkpointDir``
    (source ``template``), else the attached RLinf config's (``rlinf``), else ``("", "")``. A path that is not
    absolute or longer than :data:`MAX_PATH_CHARS` counts as unset."""
    value = str(header_template(spec).get(FIELD) or "").strip()
    if value.startswith("/") and len(value) <= MAX_PATH_CHARS:
        return value.rstrip("/") or "/", "template"
    derived = config_checkpoint_dir(rlinf_config)
    return (derived, "rlinf") if derived else ("", "")


def problems(spec: dict) -> list[Problem]:
    """The validator's findings on ``checkpointDir``: ``checkpoint_dir_invalid`` (error) for a value that is not an
    absolute container path of at most :data:`MAX_PATH_CHARS` characters on one line, and
    ``checkpoint_dir_not_on_header`` (warning) on a template that is not the Header (only the Header's is read)."""
    out: list[Problem] = []
    templates = (spec or {}).get("tasks") or []
    for i, t in enumerate(templates if isinstance(templates, list) else []):
        value = t.get(FIELD) if isinstance(t, dict) else None
        if value in (None, ""):
            continue
        path = f"spec.tasks[{i}].{FIELD}"
        text = value if isinstance(value, str) else ""
        if not text.startswith("/") or len(text) > MAX_PATH_CHARS or any(c in text for c in "\0\n\r"):
            out.append(Problem(path, "checkpoint_dir_invalid", {"value": str(value)[:80], "max": MAX_PATH_CHARS}))
        elif t.get("head") is not True:
            out.append(Problem(path, "checkpoint_dir_not_on_header", {"role": str(t.get("name") or i)}, WARNING))
    return out


def step_of(name: str) -> int | None:
    """The step ``N`` of a directory named ``global_step_<N>``; None for any other name."""
    match = STEP_DIR.match(name)
    return int(match.group(1)) if match else None


def _logical_lines(script: str) -> list[tuple[int, int]]:
    """``(start, end)`` offsets of each logical line of ``script`` (a backslash-newline continues it)."""
    spans, start, i = [], 0, 0
    while i < len(script):
        if script[i] == "\n" and not (i > 0 and script[i - 1] == "\\"):
            spans.append((start, i))
            start = i + 1
        i += 1
    spans.append((start, len(script)))
    return spans


def _command_end(line: str, start: int) -> int:
    """Offset in ``line`` where the command starting at ``start`` ends: the first unquoted shell operator or
    redirection (``|``, ``;``, ``&``, ``>``, ``<``, ``#`` after a blank) or the end, trailing blanks excluded."""
    quote, i = "", start
    while i < len(line):
        c = line[i]
        if quote:
            if c == quote:
                quote = ""
            elif c == "\\" and quote == '"':
                i += 1
        elif c in "'\"":
            quote = c
        elif c == "\\":
            i += 1
        elif c in "|;&<>" or (c == "#" and line[i - 1].isspace()):
            if c in "<>" and i > 0 and line[i - 1].isdigit() and line[i - 2 : i - 1].isspace():
                i -= 1  # "2>&1": the descriptor belongs to the redirection
            break
        i += 1
    end = i
    while end > start and line[end - 1] in " \t\\\n":
        end -= 1
    return end


def is_rlinf_command(script: str) -> bool:
    """Whether ``script`` has a line that runs an RLinf entry point (module docstring)."""
    return any(_PYTHON.search(script[a:b]) and _ENTRY.search(script[a:b]) for a, b in _logical_lines(script))


def resume_run_script(script: str, path: str) -> str:
    """``script`` with ``runner.resume_dir=<path>`` (shell-quoted) on its last RLinf command (module docstring);
    ``script`` unchanged when it has none."""
    for a, b in reversed(_logical_lines(script)):
        line = script[a:b]
        found = _PYTHON.search(line)
        if not found or not _ENTRY.search(line):
            continue
        line = _EXISTING.sub("", line)
        end = _command_end(line, found.start())
        rest = line[end:]
        joined = f"{line[:end]} {OVERRIDE}={shlex.quote(path)}{rest if rest[:1] in ('', ' ', chr(9)) else ' ' + rest}"
        return script[:a] + joined + script[b:]
    return script
