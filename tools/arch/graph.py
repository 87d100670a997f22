"""Draw the import graph of the project's modules and report its cycles.

Usage: ``python -m tools.arch.graph OUT_STEM [--squash]`` writes ``OUT_STEM.dot``, ``OUT_STEM.svg`` and ``OUT_STEM.png``
(the last two when Graphviz ``dot`` is on PATH) and prints the strongly connected components (import cycles)
of more than one module. Modules are grouped by their layer in the ``[tool.importlinter]`` layers contract of
pyproject.toml; red edges are part of a cycle, orange edges run from a lower layer to a higher one.
Every import counts, including those inside function bodies (grimp reads them all). ``--squash`` draws one box
per module the layers contract names (``jobs.jobspec`` for all of ``jobs/jobspec/``, ...) and leaves out the modules
no layer lists: the readable picture of docs/architecture.md.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import grimp

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = (
    "accounts",
    "clusters",
    "domains",
    "jobs",
    "launcher",
    "rlark_cli",
    "rlark_console",
    "sshgate",
    "sshkeys",
    "storage",
    "terminal",
)


def build() -> grimp.ImportGraph:
    """The import graph of the project packages, without migrations (Django writes those)."""
    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))
    return grimp.build_graph(*PACKAGES, cache_dir=None)


def edges(graph: grimp.ImportGraph) -> set[tuple[str, str]]:
    """Direct imports ``(importer, imported)`` between project modules (migrations left out)."""
    result = set()
    for module in graph.modules:
        if ".migrations" in module:
            continue
        for imported in graph.find_modules_directly_imported_by(module):
            if ".migrations" not in imported:
                result.add((module, imported))
    return result


def cycles(pairs: set[tuple[str, str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan, iterative), each sorted."""
    succ: dict[str, list[str]] = {}
    for a, b in pairs:
        succ.setdefault(a, []).append(b)
        succ.setdefault(b, [])
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    found: list[list[str]] = []
    counter = 0
    for root in sorted(succ):
        if root in index:
            continue
        work = [(root, iter(sorted(succ[root])))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is None:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    component = []
                    while True:
                        top = stack.pop()
                        on_stack.discard(top)
                        component.append(top)
                        if top == node:
                            break
                    if len(component) > 1:
                        found.append(sorted(component))
            elif child not in index:
                index[child] = low[child] = counter
                counter += 1
                stack.append(child)
                on_stack.add(child)
                work.append((child, iter(sorted(succ[child]))))
            elif child in on_stack:
                low[node] = min(low[node], index[child])
    return sorted(found)


def layers() -> list[tuple[str, list[str]]]:
    """``[(layer name, [module prefixes])]`` top to bottom, from the layers contract in pyproject.toml."""
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())
    for contract in config.get("tool", {}).get("importlinter", {}).get("contracts", []):
        if contract.get("type") == "layers":
            names = config.get("tool", {}).get("rlark-architecture", {}).get("layer_names", [])
            result = []
            for i, entry in enumerate(contract["layers"]):
                modules = [m.strip() for m in entry.replace(":", "|").split("|") if m.strip()]
                result.append((names[i] if i < len(names) else f"layer {i}", modules))
            return result
    return []


def layer_of(module: str, table: list[tuple[str, list[str]]]) -> int | None:
    """Index of the layer holding ``module`` (0 = top), or None when no layer lists it."""
    best: tuple[int, int] | None = None  # (prefix length, layer)
    for i, (_, prefixes) in enumerate(table):
        for prefix in prefixes:
            if (module == prefix or module.startswith(prefix + ".")) and (best is None or len(prefix) > best[0]):
                best = (len(prefix), i)
    return None if best is None else best[1]


def dot(pairs: set[tuple[str, str]], loops: list[list[str]], table: list[tuple[str, list[str]]]) -> str:
    in_loop = {m: n for n, comp in enumerate(loops) for m in comp}
    nodes = sorted({m for pair in pairs for m in pair})
    lines = [
        "digraph imports {",
        '  graph [rankdir=TB, fontname="Helvetica", fontsize=10, newrank=true];',
        '  node [shape=box, style="rounded,filled", fillcolor=white, fontname="Helvetica", fontsize=9];',
        "  edge [color=gray60, arrowsize=0.5];",
    ]
    by_layer: dict[int | None, list[str]] = {}
    for module in nodes:
        by_layer.setdefault(layer_of(module, table), []).append(module)
    palette = ["#fde2e2", "#fff1c9", "#dff3e3", "#dde9fb", "#ece1f7", "#f0f0f0"]
    for key in sorted(by_layer, key=lambda k: (k is None, k or 0)):
        label = table[key][0] if key is not None else "not in a layer"
        color = palette[key % len(palette)] if key is not None else "#ffffff"
        lines.append(f'  subgraph "cluster_{label}" {{ label="{label}"; style=filled; fillcolor="{color}";')
        for module in by_layer[key]:
            extra = ', fillcolor="#ff9d9d"' if module in in_loop else ""
            lines.append(f'    "{module}" [label="{module}"{extra}];')
        lines.append("  }")
    for a, b in sorted(pairs):
        la, lb = layer_of(a, table), layer_of(b, table)
        if a in in_loop and in_loop.get(b) == in_loop[a]:
            style = " [color=red, penwidth=1.4]"
        elif la is not None and lb is not None and lb < la:
            style = " [color=orange, penwidth=1.4]"
        else:
            style = ""
        lines.append(f'  "{a}" -> "{b}"{style};')
    lines.append("}")
    return "\n".join(lines) + "\n"


def upward(pairs: set[tuple[str, str]], table: list[tuple[str, list[str]]]) -> list[tuple[str, str]]:
    """Direct imports from a lower layer to a higher one."""
    out = []
    for a, b in sorted(pairs):
        la, lb = layer_of(a, table), layer_of(b, table)
        if la is not None and lb is not None and lb < la:
            out.append((a, b))
    return out


def squash(pairs: set[tuple[str, str]], table: list[tuple[str, list[str]]]) -> set[tuple[str, str]]:
    """The imports between the modules the layers name (each module folded into its longest listed prefix)."""
    prefixes = [prefix for _, group in table for prefix in group]

    def fold(module: str) -> str | None:
        found = [p for p in prefixes if module == p or module.startswith(p + ".")]
        return max(found, key=len) if found else None

    out = set()
    for a, b in pairs:
        fa, fb = fold(a), fold(b)
        if fa and fb and fa != fb:
            out.add((fa, fb))
    return out


def main(argv: list[str]) -> int:
    args = [a for a in argv if not a.startswith("--")]
    stem = Path(args[0]) if args else ROOT / "var" / "imports"
    stem.parent.mkdir(parents=True, exist_ok=True)
    graph = build()
    pairs = edges(graph)
    table = layers()
    if "--squash" in argv:
        pairs = squash(pairs, table)
    loops = cycles(pairs)
    stem.with_suffix(".dot").write_text(dot(pairs, loops, table))
    if shutil.which("dot"):
        for fmt in ("svg", "png"):
            subprocess.run(
                ["dot", f"-T{fmt}", "-o", str(stem.with_suffix(f".{fmt}")), str(stem.with_suffix(".dot"))], check=True
            )
    modules = {m for pair in pairs for m in pair}
    print(f"{len(modules)} modules, {len(pairs)} imports, {len(loops)} cycles")
    for n, comp in enumerate(loops, 1):
        print(f"cycle {n} ({len(comp)} modules): {' '.join(comp)}")
    ups = upward(pairs, table)
    print(f"{len(ups)} upward imports")
    for a, b in ups:
        print(f"upward: {a} -> {b}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
