"""The one-way architecture (docs/architecture.md), checked on every test run.

- ``lint-imports`` (import-linter) keeps the contracts of pyproject.toml: no module imports a higher layer,
  directly or through a chain, the sibling modules of the core packages form no cycle, each app imports only
  the apps below it, and the ``rlark`` client imports no app;
- the rule bites: the same layers, checked by grimp on the real graph plus one upward import (the controller
  importing the Celery tasks, as it did before), report exactly that import;
- no import cycle among the project's modules (any cycle, across packages too);
- at most 10 function-level imports of project modules in jobs/, clusters/, terminal/, each with a
  ``# local import: <reason>`` comment (``python -m tools.arch.count_local_imports --list``).
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import grimp
import pytest

from tools.arch import count_local_imports, graph

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def imports() -> grimp.ImportGraph:
    return graph.build()


def _layers() -> list[grimp.Layer]:
    return [grimp.Layer(*modules, independent=False) for _, modules in graph.layers()]


def test_lint_imports_keeps_every_contract():
    exe = shutil.which("lint-imports", path=str(Path(sys.executable).parent))
    assert exe, "import-linter is not installed (requirements.lock)"
    done = subprocess.run([exe, "--no-cache"], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]
    assert "4 kept, 0 broken" in done.stdout


def test_layers_as_declared_have_no_upward_import(imports):
    assert [name for name, _ in graph.layers()] == [
        "interfaces",
        "explain",
        "observe",
        "control",
        "runtime",
        "spec",
        "data",
    ]
    assert imports.find_illegal_dependencies_for_layers(_layers()) == set()


def test_an_upward_import_breaks_the_layers():
    broken = graph.build()
    broken.add_import(importer="jobs.control.controller", imported="jobs.tasks")
    illegal = broken.find_illegal_dependencies_for_layers(_layers())
    # the layers are packages: the upward import is reported between the control layer and the entry point
    assert {(dep.importer, dep.imported) for dep in illegal} == {("jobs.control", "jobs.tasks")}


def test_no_import_cycle_among_the_project_modules(imports):
    assert graph.cycles(graph.edges(imports)) == []


def test_a_cycle_is_found_when_one_is_added(imports):
    pairs = graph.edges(imports) | {("jobs.jobspec.layout", "jobs.control.controller")}
    loops = graph.cycles(pairs)
    assert len(loops) == 1 and {"jobs.jobspec.layout", "jobs.control.controller"} <= set(loops[0])


def test_function_level_imports_are_few_and_explained():
    found = count_local_imports.scan()
    assert len(found) <= 10, [f"{i.path}:{i.line} {i.module}" for i in found]
    assert [f"{i.path}:{i.line} {i.module}" for i in found if not i.reason] == []
