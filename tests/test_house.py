"""The house a newcomer reads: packages whose imports show the architecture.

Built from the source (``ast``), not from memkit: the import graph of ``memkit``,
``graphs`` and ``evaluators`` has no circle, no module imports another module's
private name, dependencies point ``evaluators -> graphs -> memkit``, no module is over
800 lines or keeps a module-level ``__getattr__`` (a compatibility shim), and
``docs/design.md`` names every module.
"""

from __future__ import annotations

import ast
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
PACKAGES = ("memkit", "graphs", "evaluators")


def _modules() -> dict[str, Path]:
    out = {}
    for pkg in PACKAGES:
        for p in sorted((REPO / pkg).rglob("*.py")):
            name = ".".join(p.relative_to(REPO).with_suffix("").parts)
            out[name.removesuffix(".__init__")] = p
    return out


MODULES = _modules()


def _compiled(name: str) -> bool:
    """A compiled extension module (its C source beside it)."""
    return (REPO / name.replace(".", "/")).with_suffix(".c").exists()


def _imports(name: str, path: Path) -> list[tuple[str, str | None, int]]:
    """``(module imported, name taken from it or None, line)`` of every import in a
    module, at any depth (imports inside functions count: they are still a dependency)."""
    out = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            out += [(a.name, None, node.lineno) for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module is not None:
            base = node.module
            if node.level:
                parts = name.split(".")
                base = ".".join(parts[: len(parts) - node.level] + [node.module])
            for a in node.names:
                sub = f"{base}.{a.name}"
                if sub in MODULES or _compiled(sub):
                    out.append((sub, None, node.lineno))  # a submodule: a dependency on it alone
                else:
                    out.append((base, a.name, node.lineno))
    return out


def _graph() -> dict[str, set[str]]:
    return {m: {mod for mod, _, _ in _imports(m, p) if mod in MODULES and mod != m} for m, p in MODULES.items()}


def test_no_import_circle():
    graph = _graph()
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    circles: list[list[str]] = []

    def visit(v: str) -> None:  # Tarjan's strongly connected components
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                circles.append(sorted(comp))

    for v in graph:
        if v not in index:
            visit(v)
    assert circles == []


def test_no_private_name_crosses_a_module():
    """A module's private names stay in it (a compiled extension is imported by the
    module that wraps it, as a submodule, not as a name)."""
    crossing = [f"{MODULES[m].relative_to(REPO)}:{line}: {target}.{name}"
                for m, p in MODULES.items() for target, name, line in _imports(m, p)
                if target in MODULES and target != m and name is not None and name.startswith("_")]
    assert crossing == []


def test_dependencies_point_one_way():
    allowed = {"memkit": {"memkit"}, "graphs": {"memkit", "graphs"}, "evaluators": set(PACKAGES)}
    wrong = [f"{m} imports {t}" for m, ts in _graph().items() for t in ts
             if t.split(".")[0] not in allowed[m.split(".")[0]]]
    assert wrong == []


def test_modules_are_small_and_keep_no_compatibility_shim():
    long = [f"{p.relative_to(REPO)}: {n}" for p in MODULES.values() if (n := len(p.read_text().splitlines())) > 800]
    shims = [str(p.relative_to(REPO)) for p in MODULES.values()
             if any(isinstance(n, ast.FunctionDef) and n.name == "__getattr__" for n in ast.parse(p.read_text()).body)]
    assert long == [] and shims == []


def test_design_md_names_every_module():
    text = (REPO / "docs" / "design.md").read_text()
    missing = [str(p.relative_to(REPO)) for p in MODULES.values() if f"`{p.relative_to(REPO)}`" not in text]
    assert missing == []
