"""Count function-level imports of project modules (at most 10 in jobs/, clusters/, terminal/).

An import inside a function body is a hidden edge of the import graph; each one that remains must say why
on its line or the line above with ``# local import: <reason>``.

Usage: ``python -m tools.arch.count_local_imports [--list] [DIR ...]`` (default dirs: jobs clusters terminal).
Prints ``<total> function-level imports of project modules (<n> without a reason)``; ``--list`` also prints
``path:line: module [reason]`` for each. Exit status 0 always (the rule itself is tests/console/test_architecture.py).
"""

from __future__ import annotations

import ast
import sys
from dataclasses import dataclass
from pathlib import Path

from tools.arch import pysource
from tools.arch.graph import PACKAGES

ROOT = Path(__file__).resolve().parents[2]
PROJECT_PACKAGES = PACKAGES  # the packages of the import graph (tools/arch/graph.py)
DEFAULT_DIRS = ("jobs", "clusters", "terminal")
REASON_MARK = "# local import:"


@dataclass(frozen=True)
class LocalImport:
    path: str  # relative to the repository root
    line: int
    module: str
    reason: str  # "" when the line (or the one above) has no "# local import: <reason>"


def _is_project(module: str) -> bool:
    return module.split(".", 1)[0] in PROJECT_PACKAGES


def _modules(node: ast.Import | ast.ImportFrom, package: str) -> list[str]:
    if isinstance(node, ast.Import):
        return [alias.name for alias in node.names]
    if node.level:  # relative import: resolve against the file's package
        base = package.split(".")[: len(package.split(".")) - node.level + 1]
        return [".".join([*base, node.module] if node.module else base)]
    return [node.module or ""]


def _reason(lines: list[str], lineno: int) -> str:
    for text in (lines[lineno - 1], lines[lineno - 2] if lineno >= 2 else ""):
        if REASON_MARK in text:
            return text.split(REASON_MARK, 1)[1].strip()
    return ""


def local_imports(path: Path) -> list[LocalImport]:
    """Imports of project modules that sit inside a function body (at any depth) of ``path``."""
    source = path.read_text(encoding="utf-8")
    lines = source.splitlines()
    rel = path.relative_to(ROOT)
    package = ".".join(rel.with_suffix("").parts[:-1] if rel.name != "__init__.py" else rel.parent.parts)
    found: list[LocalImport] = []

    def visit(node: ast.AST, in_function: bool) -> None:
        for child in ast.iter_child_nodes(node):
            inside = in_function or isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda)
            if in_function and isinstance(child, ast.Import | ast.ImportFrom):
                for module in _modules(child, package):
                    if _is_project(module):
                        found.append(LocalImport(str(rel), child.lineno, module, _reason(lines, child.lineno)))
            visit(child, inside)

    visit(pysource.parse(source, str(path)), False)
    return found


def scan(dirs: tuple[str, ...] = DEFAULT_DIRS) -> list[LocalImport]:
    result: list[LocalImport] = []
    for name in dirs:
        for path in sorted((ROOT / name).rglob("*.py")):
            if "migrations" not in path.parts:
                result.extend(local_imports(path))
    return result


def main(argv: list[str]) -> int:
    show = "--list" in argv
    dirs = tuple(a for a in argv if not a.startswith("--")) or DEFAULT_DIRS
    found = scan(dirs)
    if show:
        for item in found:
            print(f"{item.path}:{item.line}: {item.module}" + (f"  [{item.reason}]" if item.reason else ""))
    missing = sum(1 for item in found if not item.reason)
    print(f"{len(found)} function-level imports of project modules in {', '.join(dirs)} ({missing} without a reason)")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
