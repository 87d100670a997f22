"""Small modules with one job each (CONTRIBUTING.md, "The layer rules"): no Python file over ``MAX_FILE_LINES``
lines and no function over ``MAX_FUNCTION_LINES``, migrations (generated) aside; tests and benchmarks count too."""

from __future__ import annotations

import ast
import subprocess
from pathlib import Path

from tools.arch import pysource

ROOT = Path(__file__).resolve().parents[2]
MAX_FILE_LINES = 800
MAX_FUNCTION_LINES = 100


def python_files() -> list[Path]:
    out = subprocess.run(["git", "ls-files", "*.py"], cwd=ROOT, capture_output=True, text=True, timeout=60, check=True)
    return [ROOT / p for p in out.stdout.split() if "/migrations/" not in p and (ROOT / p).exists()]


def test_no_file_or_function_is_too_long():
    files = python_files()
    assert len(files) > 300  # the project's own files were read
    too_long = []
    for path in files:
        source = path.read_text(encoding="utf-8")
        rel = path.relative_to(ROOT)
        if (n := len(source.splitlines())) > MAX_FILE_LINES:
            too_long.append(f"{rel}: {n} lines")
        for node in ast.walk(pysource.parse(source, str(path))):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                if (n := node.end_lineno - node.lineno + 1) > MAX_FUNCTION_LINES:
                    too_long.append(f"{rel}:{node.lineno} {node.name}: {n} lines")
    assert too_long == []
