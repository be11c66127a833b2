"""No product module imports itself back through others, type-only imports (under
`if TYPE_CHECKING:`) included: every import statement of every module under connectors/,
pipelines/, schemas/ and state/ is read from its source, and the graph of frontierflow
modules they name must have no cycle. (import-linter's contracts in pyproject.toml keep the
layers apart; this keeps the modules of one layer from leaning on each other in a circle.)"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("connectors", "pipelines", "schemas", "state")


def product_modules() -> dict[str, Path]:
    out: dict[str, Path] = {}
    for package in PACKAGES:
        for path in (ROOT / package).rglob("*.py"):
            parts = list(path.relative_to(ROOT).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            out[".".join(["frontierflow", *parts])] = path
    return out


def imports_of(name: str, path: Path, modules: dict[str, Path]) -> set[str]:
    """The frontierflow modules `name` imports, wherever the statement stands."""

    def module_of(dotted: str) -> str | None:
        while dotted and dotted not in modules:
            dotted = dotted.rpartition(".")[0]
        return dotted or None

    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            targets = [module_of(a.name) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package
                for _ in range(node.level - 1):
                    anchor = anchor.rpartition(".")[0]
                base = f"{anchor}.{base}" if base else anchor
            targets = [module_of(f"{base}.{a.name}") or module_of(base) for a in node.names]
        else:
            continue
        found.update(t for t in targets if t is not None and t != name)
    return found


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    counter = 0
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def test_the_finder_sees_a_cycle_through_a_type_only_import() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert cycles(graph) == [["a", "b", "c"]]
    source = (
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from frontierflow.x import y\n"
    )
    path = ROOT / "tests" / "_cycle_probe.py"
    path.write_text(source, encoding="utf-8")
    try:
        modules = {"frontierflow.x": path, "frontierflow.z": path}
        assert imports_of("frontierflow.z", path, modules) == {"frontierflow.x"}
    finally:
        path.unlink()


def test_no_import_cycle_between_product_modules() -> None:
    modules = product_modules()
    assert len(modules) > 100  # the whole product was read
    graph = {name: imports_of(name, path, modules) for name, path in modules.items()}
    assert cycles(graph) == []
