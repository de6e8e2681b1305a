"""The replica's layers stay untangled: no import circle among ``replica/`` modules and no
module over 600 lines (docs/decisions.md, "Replica layering").

The graph is read statically (``ast``) from every ``import`` statement in a module: at the
top, inside functions, under ``if TYPE_CHECKING``. A lazy import inside a function is still
a dependency (the function cannot run without the other module, and the two modules can no
longer be understood or moved apart), so a circle through a lazy import is a circle too.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = "replica"
MAX_LINES = 600


def _module_name(path: Path) -> str:
    rel = path.relative_to(ROOT).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _modules() -> dict[str, Path]:
    return {_module_name(p): p for p in sorted((ROOT / PACKAGE).rglob("*.py"))}


def _resolve(current: str, is_pkg: bool, level: int, module: str | None) -> str:
    if level == 0:
        return module or ""
    base = current.split(".") if is_pkg else current.split(".")[:-1]
    base = base[: len(base) - (level - 1)] if level > 1 else base
    return ".".join(base + ([module] if module else []))


def imports_of(name: str, path: Path, known: set[str]) -> set[str]:
    """The replica modules ``name`` imports anywhere in its text."""
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    is_pkg = path.name == "__init__.py"
    found: set[str] = set()

    def add(target: str) -> None:
        # "replica.watch.core" counts as itself; "replica.x.y" where only "replica.x" is a
        # module counts as "replica.x"
        while target and target not in known:
            target = target.rpartition(".")[0]
        if target and target != name:
            found.add(target)

    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split(".")[0] == PACKAGE:
                    add(alias.name)
        elif isinstance(node, ast.ImportFrom):
            base = _resolve(name, is_pkg, node.level, node.module)
            if base.split(".")[0] != PACKAGE:
                continue
            for alias in node.names:  # "from replica import cli" names a module
                full = f"{base}.{alias.name}"
                add(full if full in known else base)
    return found


def graph() -> dict[str, set[str]]:
    mods = _modules()
    known = set(mods)
    return {name: imports_of(name, path, known) for name, path in mods.items()}


def cycles(g: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []
    counter = [0]

    def visit(v: str) -> None:
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in sorted(g.get(v, ())):
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
                out.append(sorted(comp))

    for v in sorted(g):
        if v not in index:
            visit(v)
    return out


def test_cycles_finds_a_planted_circle() -> None:
    g = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert cycles(g) == [["a", "b", "c"]]
    assert cycles({"a": {"b"}, "b": set()}) == []


def test_graph_sees_lazy_and_relative_imports(tmp_path: Path) -> None:
    p = tmp_path / "m.py"
    p.write_text("def f():\n    from replica import cli\n    from .store import Store\n"
                 "import replica.vault\n", encoding="utf-8")
    known = {"replica.m", "replica.cli", "replica.store", "replica.vault"}
    assert imports_of("replica.m", p, known) == {"replica.cli", "replica.store",
                                                 "replica.vault"}


def test_replica_has_no_import_circle() -> None:
    found = cycles(graph())
    assert found == [], "import circles inside replica/ (lazy imports count): " + "; ".join(
        " <-> ".join(c) for c in found)


def test_no_replica_module_over_600_lines() -> None:
    long = {name: n for name, path in _modules().items()
            if (n := len(path.read_text(encoding="utf-8").splitlines())) > MAX_LINES}
    assert long == {}, f"split these by concept (limit {MAX_LINES} lines): {long}"
