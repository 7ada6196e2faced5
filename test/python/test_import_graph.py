"""The package's modules import each other without cycles, lazy imports inside functions included (a
deferred cycle is still one); a package's ``__init__`` re-exports are left out: they are the package's
face, not a dependency of its modules. Issue 22 removed the last two (protocol.extract <->
protocol.semantics, tools.fa4_compile <-> tools.fa4_emu)."""

from __future__ import annotations

import ast
import pathlib

ROOT = pathlib.Path(__file__).resolve().parents[2] / "fa4_mlir"


def _modules() -> dict[str, pathlib.Path]:
    found = {}
    for path in ROOT.rglob("*.py"):
        parts = path.relative_to(ROOT.parent).with_suffix("").parts
        if parts[-1] != "__init__":
            found[".".join(parts)] = path
    return found


def _graph() -> dict[str, set[str]]:
    modules = _modules()
    graph = {}
    for name, path in modules.items():
        edges = set()
        for node in ast.walk(ast.parse(path.read_text())):  # lazy imports too: a cycle deferred is still one
            if isinstance(node, ast.Import):
                edges |= {a.name for a in node.names if a.name in modules}
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                if node.module in modules:
                    edges.add(node.module)
                edges |= {f"{node.module}.{a.name}" for a in node.names if f"{node.module}.{a.name}" in modules}
        graph[name] = edges - {name}
    return graph


def _cycle(graph: dict[str, set[str]]) -> list[str] | None:
    state, stack = {}, []

    def visit(node):
        state[node] = 1
        stack.append(node)
        for nxt in sorted(graph[node]):
            if state.get(nxt) == 1:
                return stack[stack.index(nxt):] + [nxt]
            if nxt not in state and (found := visit(nxt)):
                return found
        stack.pop()
        state[node] = 2
        return None
    for node in sorted(graph):
        if node not in state and (found := visit(node)):
            return found
    return None


def test_no_module_import_cycles():
    graph = _graph()
    assert len(graph) > 100 and "fa4_mlir.protocol.semantics" in graph["fa4_mlir.protocol.extract"]
    assert _cycle(graph) is None, " -> ".join(_cycle(graph))


def test_the_cycle_check_finds_a_cycle():
    assert _cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert _cycle({"a": {"b"}, "b": set()}) is None
