"""One translation mechanism: every UI text is an English msgid that the zh_Hans gettext catalogs translate.

- Every msgid the product uses (a gettext-family call with a literal in Python, ``{% translate %}`` /
  ``{% blocktranslate %}`` in a template) has a Chinese translation among the catalogs Django loads for zh-hans
  (the project's, Django's and Django REST framework's).
- Every entry of the project's ``.po`` files is translated and not fuzzy, and each committed ``.mo`` holds exactly
  its ``.po``'s entries: compiled after the last edit, as CONTRIBUTING.md "Add a translation" asks.
- No module keeps Chinese UI text of its own (a ``(zh, en)`` pair picked by a language code): the only Chinese
  string literals are those :data:`CHINESE_ALLOWED` lists, each for its reason.
"""

from __future__ import annotations

import ast
import gettext
import re
from pathlib import Path

from django.utils.translation import trans_real
from django.utils.translation.template import templatize

from tools.arch import graph, pysource

ROOT = Path(__file__).resolve().parents[2]
APPS = tuple(p for p in graph.PACKAGES if p != "rlark_cli")  # the console's apps (the client has no UI text)
# call name -> (index of the msgid, index of the context or None); ``_`` is gettext or gettext_lazy in this project
CALLS = {
    "_": (0, None),
    "gettext": (0, None),
    "gettext_lazy": (0, None),
    "gettext_noop": (0, None),
    "ngettext": (0, None),
    "ngettext_lazy": (0, None),
    "pgettext": (1, 0),
    "pgettext_lazy": (1, 0),
    "npgettext": (1, 0),
    "npgettext_lazy": (1, 0),
}
PLURAL = {"ngettext", "ngettext_lazy", "npgettext", "npgettext_lazy"}
CJK = re.compile(r"[\u4e00-\u9fff]")
# Python files that may hold Chinese string literals (docstrings aside), and why.
CHINESE_ALLOWED = {
    # seed 02's run record template (``# 任务运行检查记录``): the same Chinese document whatever the page's language
    "jobs/explain/runcheck_record.py",
    # the language switch names each language in its own tongue (``中文``)
    "rlark_console/settings.py",
    # the demo workload's log prints a Chinese line, as a workload's own output may
    "launcher/terminal_demo.py",
}


def _python_msgids() -> set[tuple[str | None, str, bool, str]]:
    """``(context, msgid, plural, "path:line")`` of every gettext-family call with literal arguments."""
    out = set()
    for app in APPS:
        for path in sorted((ROOT / app).rglob("*.py")):
            if "migrations" in path.parts:
                continue
            for node in ast.walk(pysource.parse_file(path)):
                if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in CALLS):
                    continue
                at, ctx_at = CALLS[node.func.id]
                literals = [a.value if isinstance(a, ast.Constant) else None for a in node.args]
                if len(literals) <= at or not isinstance(literals[at], str):
                    continue  # a message from a variable: its literal is marked where it is defined (gettext_noop)
                context = literals[ctx_at] if ctx_at is not None else None
                where = f"{path.relative_to(ROOT)}:{node.lineno}"
                out.add((context, literals[at], node.func.id in PLURAL, where))
    return out


_TEMPLATE_CALL = re.compile(r"\b(n?p?gettext)\(((?:\s*u?'(?:[^'\\]|\\.)*'\s*,?)+)")
_LITERAL = re.compile(r"u?'(?:[^'\\]|\\.)*'")


def _template_msgids() -> set[tuple[str | None, str, bool, str]]:
    """The same for every template, through Django's ``templatize`` (what makemessages hands to xgettext)."""
    out = set()
    for folder in [ROOT / "templates", *(ROOT / app / "templates" for app in APPS)]:
        for path in sorted(folder.rglob("*")):
            if path.suffix not in (".html", ".txt"):
                continue
            code = templatize(path.read_text(encoding="utf-8"), origin=str(path))
            for m in _TEMPLATE_CALL.finditer(code):
                name = m.group(1)
                literals = [ast.literal_eval(lit) for lit in _LITERAL.findall(m.group(2))]
                context = literals[0] if name.startswith(("p", "np")) else None
                msgid = literals[1] if context is not None else literals[0]
                out.add((context, msgid, name.startswith("n"), str(path.relative_to(ROOT))))
    return out


def test_every_msgid_the_product_uses_has_a_chinese_translation():
    catalog = trans_real.translation("zh-hans")._catalog
    used = _python_msgids() | _template_msgids()
    assert len(used) > 1000  # the extraction sees the product's strings
    missing = []
    for context, msgid, plural, where in sorted(used, key=lambda u: u[3]):
        key = f"{context}\x04{msgid}" if context is not None else msgid
        key = (key, 0) if plural else key
        if key not in catalog or not catalog[key]:
            missing.append((where, context, msgid))
    assert not missing, missing


def _po_entries(path: Path) -> list[dict]:
    """The entries of a ``.po`` file: ``{"msgctxt", "msgid", "msgid_plural", "msgstr": [..], "fuzzy", "obsolete"}``
    (the header, msgid "", left out). An entry starts at a comment or a ``msgctxt``/``msgid`` after a ``msgstr``."""
    entries: list[dict] = []
    entry: dict = {}
    field = ""

    def start() -> dict:
        if entry.get("msgid"):
            entries.append(entry)
        return {"msgctxt": None, "msgid": None, "msgid_plural": None, "msgstr": [], "fuzzy": False, "obsolete": False}

    entry = start()
    for raw in path.read_text(encoding="utf-8").splitlines():
        obsolete = raw.startswith("#~")
        line = raw[2:].strip() if obsolete else raw.strip()
        keyword = re.match(r'^(msgctxt|msgid_plural|msgid|msgstr(?:\[\d+\])?) (".*")$', line)
        if (
            not line
            or (line.startswith("#") or (keyword and keyword.group(1) in ("msgctxt", "msgid")))
            and entry["msgstr"]
        ):
            entry = start()
        if not line:
            continue
        entry["obsolete"] |= obsolete
        if line.startswith("#,"):
            entry["fuzzy"] = "fuzzy" in [flag.strip() for flag in line[2:].split(",")]
        elif line.startswith("#"):
            continue
        elif keyword:
            field, value = keyword.group(1), ast.literal_eval(keyword.group(2))
            if field.startswith("msgstr"):
                entry["msgstr"].append(value)
            else:
                entry[field] = value
        elif line.startswith('"') and field:
            if field.startswith("msgstr"):
                entry["msgstr"][-1] += ast.literal_eval(line)
            else:
                entry[field] += ast.literal_eval(line)
    start()
    return entries


def _catalogs() -> list[Path]:
    return sorted(ROOT.glob("*/locale/zh_Hans/LC_MESSAGES/*.po")) + sorted(ROOT.glob("locale/zh_Hans/LC_MESSAGES/*.po"))


def test_every_catalog_entry_is_translated_and_compiled():
    problems = []
    for po in _catalogs():
        name = str(po.relative_to(ROOT))
        entries = [e for e in _po_entries(po) if not e["obsolete"]]
        expected = {}
        for e in entries:
            if e["fuzzy"] or not all(e["msgstr"]):
                problems.append((name, "untranslated or fuzzy", e["msgid"]))
                continue
            key = f"{e['msgctxt']}\x04{e['msgid']}" if e["msgctxt"] is not None else e["msgid"]
            if e["msgid_plural"] is None:
                expected[key] = e["msgstr"][0]
            else:
                expected.update({(key, i): text for i, text in enumerate(e["msgstr"])})
        with open(po.with_suffix(".mo"), "rb") as fh:
            compiled = {k: v for k, v in gettext.GNUTranslations(fh)._catalog.items() if k != ""}  # type: ignore[attr-defined]
        if compiled != expected:
            problems.append((name, "the .mo is not compiled from this .po", sorted(set(compiled) ^ set(expected))[:5]))
    assert len(_catalogs()) >= 10 and not problems, problems


def test_no_module_keeps_chinese_ui_text_of_its_own():
    found = []
    for app in graph.PACKAGES:
        for path in sorted((ROOT / app).rglob("*.py")):
            rel = str(path.relative_to(ROOT))
            if "migrations" in path.parts or rel in CHINESE_ALLOWED:
                continue
            tree = pysource.parse_file(path)
            docstrings = {
                id(node.body[0].value)
                for node in ast.walk(tree)
                if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef)
                and node.body
                and isinstance(node.body[0], ast.Expr)
                and isinstance(node.body[0].value, ast.Constant)
            }
            for node in ast.walk(tree):
                if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings:
                    if CJK.search(node.value):
                        found.append(f"{rel}:{node.lineno}: {node.value[:60]!r}")
    assert not found, found
