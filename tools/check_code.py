"""Structural checks ruff and import-linter do not make (run by `make lint`).

1. No function-level import of trnplan's own modules: the layer contract (pyproject.toml,
   ``lint-imports``) sees every import, but a deferred one hides a cycle from the reader and
   from import order; the only deferred imports left are of optional dependencies (torch_neuronx,
   torch_xla, ...), each with its reason inline.
2. No import cycle among trnplan's modules (Tarjan's strongly connected components over the
   import graph grimp builds, function-level imports included).
3. Every function in trnplan/ is at most MAX_LINES lines long, counted from ``def`` to its last
   line *without its docstring* (numpydoc docstrings of the public API are long by design);
   exceptions are listed in EXCEPTIONS with their reason (and in docs/architecture.md).

Usage: python tools/check_code.py [--report]   (exit 1 on a violation; --report prints the
longest functions and the cycle count either way).
"""

from __future__ import annotations

import ast
import pathlib
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "trnplan"
MAX_LINES = 60
#: "path::qualified name" -> why it is longer than MAX_LINES (keep docs/architecture.md in step)
EXCEPTIONS: dict[str, str] = {}


def _functions(tree: ast.AST, prefix: str = ""):
    for node in ast.iter_child_nodes(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            yield prefix + node.name, node
            yield from _functions(node, prefix + node.name + ".")
        elif isinstance(node, ast.ClassDef):
            yield from _functions(node, prefix + node.name + ".")


def code_lines(node: ast.AST) -> int:
    """Lines of ``node`` from ``def`` to its end, less its docstring's lines."""
    lines = node.end_lineno - node.lineno + 1
    body = node.body
    if body and isinstance(body[0], ast.Expr) and isinstance(getattr(body[0], "value", None), ast.Constant) \
            and isinstance(body[0].value.value, str):
        lines -= body[0].end_lineno - body[0].lineno + 1
    return lines


def long_functions() -> list[tuple[int, str]]:
    out = []
    for path in sorted(PACKAGE.rglob("*.py")):
        tree = ast.parse(path.read_text(), str(path))
        for name, node in _functions(tree):
            n = code_lines(node)
            if n > MAX_LINES:
                out.append((n, f"{path.relative_to(ROOT)}::{name}"))
    return sorted(out, reverse=True)


def deferred_own_imports() -> list[str]:
    out = []
    for path in sorted(PACKAGE.rglob("*.py")):
        tree = ast.parse(path.read_text(), str(path))
        for name, fn in _functions(tree):
            for node in ast.walk(fn):
                mods = []
                if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                    mods = [node.module]
                elif isinstance(node, ast.ImportFrom) and node.level > 0:
                    mods = ["(relative)"]
                elif isinstance(node, ast.Import):
                    mods = [a.name for a in node.names]
                for mod in mods:
                    if mod == "(relative)" or mod == "trnplan" or mod.startswith("trnplan."):
                        out.append(f"{path.relative_to(ROOT)}:{node.lineno} in {name}: imports {mod}")
    return out


def import_cycles() -> list[list[str]]:
    """Strongly connected components of more than one module in trnplan's import graph."""
    import grimp

    sys.path.insert(0, str(ROOT))
    graph = grimp.build_graph("trnplan")
    adj = {m: sorted(graph.find_modules_directly_imported_by(m)) for m in graph.modules}
    index: dict = {}
    low: dict = {}
    stack: list = []
    on_stack: set = set()
    out = []

    def visit(v):  # Tarjan, recursive: the graph has ~70 modules
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in adj[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for module in sorted(adj):
        if module not in index:
            visit(module)
    return out


def main(argv: list[str]) -> int:
    report = "--report" in argv
    failures = 0
    deferred = deferred_own_imports()
    for line in deferred:
        print(f"function-level import of trnplan: {line}")
    failures += len(deferred)
    cycles = import_cycles()
    for comp in cycles:
        print(f"import cycle: {' <-> '.join(comp)}")
    failures += len(cycles)
    longest = long_functions()
    over = [(n, where) for n, where in longest if where not in EXCEPTIONS]
    for n, where in over:
        print(f"{where}: {n} lines (over {MAX_LINES}, docstring not counted)")
    failures += len(over)
    stale = sorted(set(EXCEPTIONS) - {where for _, where in longest})
    for where in stale:
        print(f"{where}: listed in EXCEPTIONS but no longer over {MAX_LINES} lines; remove it")
    failures += len(stale)
    if report:
        print(f"function-level imports of trnplan: {len(deferred)}; import cycles: {len(cycles)}; "
              f"functions over {MAX_LINES} lines: {len(longest)} ({len(longest) - len(over)} listed exceptions)")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
