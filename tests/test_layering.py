"""The modules of ``python/rtolab`` import each other without cycles.

A cycle makes the import order decide which names exist when a module body
runs, and it hides which module is the lower layer. The graph is read from
the source with ``ast``, so the check needs neither the native extension nor
any third-party package. Every ``import`` statement counts, wherever it is:
at module level, inside a function, or under ``if TYPE_CHECKING:``.

Two things are deliberately not edges:

* the implicit import of a parent package (``import rtolab.api`` first runs
  ``rtolab/__init__.py``): the package's ``__init__`` is the top layer, so
  it may import anything, but no module below may import ``rtolab`` itself
  for a name (``from rtolab import __version__`` is such an edge);
* imports made at run time by name (``importlib.import_module``), which is
  how ``rtolab.experiments`` discovers the systems' experiment modules.

Run this file directly to print the graph and its cycles.
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent / "python" / "rtolab"


def module_files(root: Path = PACKAGE) -> dict[str, Path]:
    """Module name → file for every module of the package. A ``.pyi`` stub
    stands for a compiled module (``rtolab._rtolab``), which is a leaf."""
    modules: dict[str, Path] = {}
    for path in sorted(root.rglob("*.py*")):
        if path.suffix not in (".py", ".pyi"):
            continue
        parts = [root.name, *path.relative_to(root).with_suffix("").parts]
        if parts[-1] == "__init__":
            parts.pop()
        modules.setdefault(".".join(parts), path)
    return modules


def _is_package(name: str, modules: dict[str, Path]) -> bool:
    return modules[name].stem == "__init__"


def imports_of(name: str, modules: dict[str, Path]) -> set[str]:
    """The package's modules that ``name`` imports anywhere in its source."""
    tree = ast.parse(modules[name].read_text(encoding="utf-8"), str(modules[name]))
    # The package a relative import of level 1 starts from.
    here = name if _is_package(name, modules) else name.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                # `import a.b.c` binds and runs the deepest module named.
                parts = alias.name.split(".")
                for end in range(len(parts), 0, -1):
                    candidate = ".".join(parts[:end])
                    if candidate in modules:
                        found.add(candidate)
                        break
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base_parts = here.split(".")
                base_parts = base_parts[: len(base_parts) - (node.level - 1)]
                base = ".".join(base_parts + ([node.module] if node.module else []))
            else:
                base = node.module or ""
            for alias in node.names:
                submodule = f"{base}.{alias.name}"
                if submodule in modules:
                    found.add(submodule)
                elif base in modules:
                    found.add(base)
    found.discard(name)
    return found


def import_graph(root: Path = PACKAGE) -> dict[str, set[str]]:
    """Module → the package's modules it imports."""
    modules = module_files(root)
    return {name: imports_of(name, modules) for name in modules}


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """One cycle through every strongly connected component of more than
    one module (Tarjan's algorithm), as a list ``[a, b, ..., a]``."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    components: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                components.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return [_cycle_within(component, graph) for component in components]


def _cycle_within(component: list[str], graph: dict[str, set[str]]) -> list[str]:
    """A shortest cycle through the component's first module (breadth-first)."""
    members = set(component)
    start = component[0]
    parent: dict[str, str] = {}
    frontier = [start]
    while frontier:
        following = []
        for v in frontier:
            for w in sorted(graph[v] & members):
                if w == start:
                    path = [v]
                    while path[-1] != start:
                        path.append(parent[path[-1]])
                    return [*reversed(path), start]
                if w not in parent:
                    parent[w] = v
                    following.append(w)
        frontier = following
    return component  # unreachable for a strongly connected component


def test_the_graph_sees_the_package() -> None:
    graph = import_graph()
    assert {"rtolab", "rtolab.api", "rtolab.scenario", "rtolab._rtolab"} <= set(graph)
    # Imports inside functions count: the package's `report` imports reports.
    assert "rtolab.reports" in graph["rtolab"]
    assert "rtolab.api" in graph["rtolab.cli"]


def test_cycles_are_found() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a", "d"}, "d": set(), "e": {"e2"}, "e2": {"e"}}
    assert sorted(cycles(graph)) == [["a", "b", "c", "a"], ["e", "e2", "e"]]


def test_no_import_cycles() -> None:
    found = cycles(import_graph())
    assert not found, "import cycles in python/rtolab:\n" + "\n".join(
        " -> ".join(cycle) for cycle in found
    )


if __name__ == "__main__":
    graph = import_graph()
    for module in sorted(graph):
        print(f"{module}: {', '.join(sorted(graph[module])) or '-'}")
    found = cycles(graph)
    for cycle in found:
        print("cycle:", " -> ".join(cycle))
    sys.exit(1 if found else 0)


def _private(attr: str) -> bool:
    return attr.startswith("_") and not attr.startswith("__")


def private_imports(root: Path = PACKAGE) -> list[str]:
    """``from rtolab.x import _name``, or ``x._name`` on a module ``x`` of
    the package imported under any name, between modules of the package: a
    name kept private to one module, used by another. Private modules
    (``rtolab._native`` and the like) are the package's own seams and may
    be imported from."""
    found = []
    modules = module_files(root)
    for name, path in modules.items():
        if path.suffix != ".py":
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        # Names this file binds to another module of the package.
        bound: dict[str, str] = {}
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                for alias in node.names:
                    if alias.asname and alias.name in modules:
                        bound[alias.asname] = alias.name
            if not isinstance(node, ast.ImportFrom) or node.level or not node.module:
                continue
            if not node.module.startswith(root.name) or node.module.split(".")[-1].startswith("_"):
                continue
            for alias in node.names:
                target = f"{node.module}.{alias.name}"
                if target in modules:
                    bound[alias.asname or alias.name] = target
                elif _private(alias.name):
                    found.append(f"{name}:{node.lineno} imports {target}")
        for node in ast.walk(tree):
            if (
                isinstance(node, ast.Attribute)
                and isinstance(node.value, ast.Name)
                and node.value.id in bound
                and _private(node.attr)
                and not bound[node.value.id].split(".")[-1].startswith("_")
            ):
                found.append(f"{name}:{node.lineno} uses {bound[node.value.id]}.{node.attr}")
    return found


def test_private_imports_are_found(tmp_path: Path) -> None:
    package = tmp_path / "rtolab"
    package.mkdir()
    (package / "a.py").write_text("def _helper() -> None: ...\n")
    (package / "b.py").write_text("from rtolab.a import _helper\nfrom rtolab._n import _x\n")
    (package / "_n.py").write_text("_x = 1\n")
    (package / "c.py").write_text(
        "from rtolab import a as aa\nimport rtolab._n as n\naa._helper()\nn._x\naa.__name__\n"
    )
    assert private_imports(package) == [
        "rtolab.b:1 imports rtolab.a._helper",
        "rtolab.c:3 uses rtolab.a._helper",
    ]


def test_no_private_name_crosses_modules() -> None:
    assert private_imports() == []
