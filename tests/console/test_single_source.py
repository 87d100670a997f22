"""One source per rule: a constant or helper that several modules need is defined once and imported.

Two definitions drift apart (the image pull reasons once differed between the sync, the pending reasons and the
diagnosis; four helpers named the active language in three ways), so each name below is bound at module level
in the modules listed for it and in no other module of the project's packages.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from tools.arch import graph, pysource

ROOT = Path(__file__).resolve().parents[2]

SINGLE = {
    "IMAGE_PULL_REASONS": ["clusters/runtime/base.py"],
    "lang": ["rlark_console/language.py"],
    "_lang": [],  # no private copy of the language helper
    "_en": [],  # nor of its English-or-Chinese test: messages are rendered through the catalogs (language.translate)
    # one word per state on every tab (the Logs picker once said "gone" where the Workers tab said "Completed")
    "STATE_WORDS": ["jobs/observe/state_words.py"],
    "COMPLETED": ["jobs/observe/state_words.py"],
}


def _definitions(name: str) -> list[str]:
    """The project files (migrations left out) that bind ``name`` at module level (assignment, def or class)."""
    found = []
    for package in graph.PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            if "migrations" in path.parts:
                continue
            tree = pysource.parse_file(path)
            for node in tree.body:
                if isinstance(node, ast.Assign | ast.AnnAssign):
                    targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                    bound = {t.id for t in targets if isinstance(t, ast.Name)}
                elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                    bound = {node.name}
                else:
                    continue
                if name in bound:
                    found.append(path.relative_to(ROOT).as_posix())
    return found


@pytest.mark.parametrize("name", sorted(SINGLE))
def test_defined_once(name):
    assert _definitions(name) == SINGLE[name]
