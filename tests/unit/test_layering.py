"""The layers stay untangled: an allowed-imports table per room of ``replica/`` and ``hub/``,
third-party packages only where their room owns them, no import circle anywhere in
``hub/``, ``replica/``, ``shared/`` or ``bench/``, and no module reaching into another
package's underscore names (docs/architecture.md, "Packages"; CONTRIBUTING.md).

The graph is read statically (``ast``) from every ``import`` statement in a module: at the
top, inside functions, under ``if TYPE_CHECKING``. A lazy import inside a function is still
a dependency (the function cannot run without the other module, and the two modules can no
longer be understood or moved apart), so a circle through a lazy import is a circle too.
``importlib.import_module("hub.cli")`` (``quire hub …``) is not an import statement: the
replica reaches the hub only that way, at run time, and only from ``replica/cli``.

Each rule has a self-test below that plants the violation in a small tree and shows the
check finds it.
"""

from __future__ import annotations

import ast
import functools
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("hub", "replica", "shared", "bench")

# --- the tables ---------------------------------------------------------------------------

# replica/: each room and the rooms it may import (``shared`` always allowed; ``replica``
# is the package's own __init__). Read bottom-up: a room imports only rooms above it in
# replica/__init__.py's list.
REPLICA_ALLOWED: dict[str, set[str]] = {
    "replica": set(),
    "machine": set(),
    "store": set(),
    "trust": {"store", "machine"},
    "hubclient": {"trust", "machine"},
    "vault": {"store"},
    "ipc": {"vault", "store"},
    "engine": {"ipc", "vault", "hubclient", "trust", "store", "machine"},
    "conflicts": {"engine", "ipc", "vault", "hubclient", "trust", "store", "machine"},
    "app": {"conflicts", "engine", "ipc", "vault", "hubclient", "trust", "store", "machine"},
    "watch": {"app", "conflicts", "engine", "ipc", "vault", "hubclient", "trust", "store",
              "machine"},
    "mcp": {"app", "conflicts", "engine", "ipc", "vault", "hubclient", "trust", "store",
            "machine"},
    "cli": {"watch", "mcp", "app", "conflicts", "engine", "ipc", "vault", "hubclient", "trust",
            "store", "machine"},
}

# hub/: ``domain`` is every module directly in hub/ but the composition roots (app.py builds
# the ASGI app, cli.py the ``quire hub`` command). hub/api turns requests into calls and
# results into responses; domain modules decide; hub/store owns SQL and transactions.
HUB_ALLOWED: dict[str, set[str]] = {
    "hub": set(),
    "store": set(),
    "domain": {"store"},
    "api": {"domain", "store"},
    # the remote MCP endpoint's authorization server (consent, tokens, the SDK's routes)
    # and the endpoint itself: HTTP rooms over the domain, like api
    "oauth": {"api", "domain", "store"},
    "remote_mcp": {"oauth", "api", "domain", "store"},
    "console": {"oauth", "remote_mcp", "api", "domain", "store"},  # consent pages
    "ops": {"domain", "store"},
    "app": {"oauth", "remote_mcp", "api", "console", "ops", "domain", "store"},
    "cli": {"app", "oauth", "remote_mcp", "api", "console", "ops", "domain", "store"},
    "witness": set(),  # quire witness serve: a service of its own (shared only)
}

# third-party packages and the rooms that may import them ("hub:store" = hub's store room)
THIRD_PARTY_OWNERS: dict[str, set[str]] = {
    "sqlalchemy": {"hub:store"},
    "alembic": {"hub:store"},
    "starlette": {"hub:app", "hub:api", "hub:console", "hub:witness", "hub:oauth",
                  "hub:remote_mcp",
                  "bench:bench"},  # bench/bare.py
    "httpx2": {"replica:hubclient", "bench:bench"},
    "httpx": {"replica:hubclient", "bench:bench"},
}

# which of our packages each package may import at all
PACKAGE_ALLOWED: dict[str, set[str]] = {
    "shared": set(),
    "hub": {"shared"},
    "replica": {"shared"},
    "bench": {"shared", "hub", "replica"},
}


# --- the graph ----------------------------------------------------------------------------

@dataclass
class Module:
    name: str
    path: Path
    imports: set[str] = field(default_factory=set)        # our modules, resolved
    third_party: set[str] = field(default_factory=set)    # top-level names of others
    private_from: set[tuple[str, str]] = field(default_factory=set)  # (module, _name)
    private_attrs: set[tuple[str, str]] = field(default_factory=set)  # (alias's module, _name)
    private_calls: set[str] = field(default_factory=set)  # ``x._name`` on anything
    tree: ast.Module | None = None


def module_name(root: Path, path: Path) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def modules(root: Path, packages: tuple[str, ...] = PACKAGES) -> dict[str, Path]:
    found: dict[str, Path] = {}
    for pkg in packages:
        for p in sorted((root / pkg).rglob("*.py")):
            if "migrations" in p.parts or "results" in p.parts:
                continue  # alembic's revision scripts and stored bench output are not code
            found[module_name(root, p)] = p
    return found


def _resolve(current: str, is_pkg: bool, level: int, module: str | None) -> str:
    if level == 0:
        return module or ""
    base = current.split(".") if is_pkg else current.split(".")[:-1]
    base = base[: len(base) - (level - 1)] if level > 1 else base
    return ".".join(base + ([module] if module else []))


# the public API of named tuples and SQLAlchemy rows, underscored only to stay out of the
# way of field names
NAMEDTUPLE_API = frozenset({"_fields", "_replace", "_asdict", "_make", "_mapping",
                            "_field_defaults", "_t", "_tuple"})


def _private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__") and name not in NAMEDTUPLE_API


def read_module(name: str, path: Path, known: set[str]) -> Module:
    """What one module imports and which underscore names it reaches for."""
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    is_pkg = path.name == "__init__.py"
    mod = Module(name, path, tree=tree)
    ours = {k.split(".")[0] for k in known}
    aliases: dict[str, str] = {}  # local name -> our module it is bound to

    def ours_of(target: str) -> str | None:
        # "replica.watch.core" counts as itself; "replica.x.y" where only "replica.x" is a
        # module counts as "replica.x"
        while target and target not in known:
            target = target.rpartition(".")[0]
        return target or None

    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                top = alias.name.split(".")[0]
                if top not in ours:
                    mod.third_party.add(top)
                    continue
                target = ours_of(alias.name)
                if target and target != name:
                    mod.imports.add(target)
                    if alias.asname:
                        aliases[alias.asname] = target
        elif isinstance(node, ast.ImportFrom):
            base = _resolve(name, is_pkg, node.level, node.module)
            top = base.split(".")[0]
            if top not in ours:
                if node.level == 0 and top:
                    mod.third_party.add(top)
                continue
            for alias in node.names:  # "from replica.store import store" names a module
                full = f"{base}.{alias.name}"
                if full in known:
                    if full != name:
                        mod.imports.add(full)
                    aliases[alias.asname or alias.name] = full
                    continue
                target = ours_of(base)
                if target and target != name:
                    mod.imports.add(target)
                if _private(alias.name) and target:
                    mod.private_from.add((target, alias.name))
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and _private(node.attr):
            if isinstance(node.value, ast.Name) and node.value.id in aliases:
                mod.private_attrs.add((aliases[node.value.id], node.attr))
            elif not (isinstance(node.value, ast.Name) and node.value.id in ("self", "cls")):
                mod.private_calls.add(node.attr)
    return mod


@functools.cache
def read_tree(root: Path, packages: tuple[str, ...] = PACKAGES) -> dict[str, Module]:
    mods = modules(root, packages)
    known = set(mods)
    return {name: read_module(name, path, known) for name, path in mods.items()}


@functools.cache
def room(name: str, root: Path = ROOT) -> str:
    """The room a module lives in: ``replica:engine``, ``hub:store``, ``hub:domain``, …"""
    parts = name.split(".")
    pkg = parts[0]
    if pkg == "replica":
        return f"replica:{parts[1] if len(parts) > 1 and (root / 'replica' / parts[1]).is_dir() else 'replica'}"
    if pkg == "hub":
        if len(parts) == 1:
            return "hub:hub"
        if (root / "hub" / parts[1]).is_dir():
            return f"hub:{parts[1]}"
        return f"hub:{parts[1]}" if parts[1] in ("app", "cli") else "hub:domain"
    return f"{pkg}:{pkg}"


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


# --- the checks ---------------------------------------------------------------------------

def forbidden_imports(tree: dict[str, Module], root: Path = ROOT) -> list[str]:
    """Every import the tables do not allow, as ``a -> b (why)``."""
    bad = []
    for name, mod in sorted(tree.items()):
        src_pkg, src_room = room(name, root).split(":")
        for target in sorted(mod.imports):
            dst_pkg, dst_room = room(target, root).split(":")
            if dst_pkg != src_pkg:
                if dst_pkg not in PACKAGE_ALLOWED.get(src_pkg, set()):
                    bad.append(f"{name} -> {target} ({src_pkg} may not import {dst_pkg})")
                continue
            table = {"replica": REPLICA_ALLOWED, "hub": HUB_ALLOWED}.get(src_pkg)
            if table is None or dst_room == src_room:
                continue
            allowed = table.get(src_room)
            if allowed is None:
                bad.append(f"{name}: room {src_room!r} is not in the {src_pkg} table")
            elif dst_room not in allowed and dst_room != src_pkg:
                bad.append(f"{name} -> {target} ({src_pkg}/{src_room} may not import "
                           f"{src_pkg}/{dst_room})")
        for top in sorted(mod.third_party):
            owners = THIRD_PARTY_OWNERS.get(top)
            if owners is not None and room(name, root) not in owners:
                bad.append(f"{name} imports {top} (only {sorted(owners)})")
    return bad


def private_reaches(tree: dict[str, Module], root: Path = ROOT) -> list[str]:
    """Underscore names a module takes from another package (room): by ``from x import _y``,
    by ``module._y`` on an imported module, or by ``obj._y`` where ``_y`` is defined only in
    other rooms (a method of another room's class called from outside)."""
    defined: dict[str, set[str]] = {}
    for name, mod in tree.items():
        names = defined.setdefault(room(name, root), set())
        for node in ast.walk(mod.tree or ast.Module(body=[], type_ignores=[])):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                if _private(node.name):
                    names.add(node.name)
            elif isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) \
                    and node.value.id in ("self", "cls") and _private(node.attr):
                names.add(node.attr)
            elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store) \
                    and _private(node.id):
                names.add(node.id)
    owners: dict[str, set[str]] = {}
    for r, names in defined.items():
        for n in names:
            owners.setdefault(n, set()).add(r)
    bad = []
    for name, mod in sorted(tree.items()):
        mine = room(name, root)
        for target, attr in sorted(mod.private_from | mod.private_attrs):
            if room(target, root) != mine:
                bad.append(f"{name} uses {target}.{attr}")
        for attr in sorted(mod.private_calls):
            if attr in defined.get(mine, set()):
                continue
            others = sorted(owners.get(attr, set()) - {mine})
            if others:
                bad.append(f"{name} uses ._{attr.lstrip('_')} defined only in {', '.join(others)}")
    return bad


# --- self-tests: each rule finds the violation planted in a small tree ----------------------

def _plant(tmp: Path, files: dict[str, str]) -> dict[str, Module]:
    for rel, text in files.items():
        p = tmp / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text, encoding="utf-8")
    return read_tree(tmp, ("hub", "replica", "shared"))


def test_cycles_finds_a_planted_circle() -> None:
    g = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert cycles(g) == [["a", "b", "c"]]
    assert cycles({"a": {"b"}, "b": set()}) == []


def test_graph_sees_lazy_relative_and_module_imports(tmp_path: Path) -> None:
    tree = _plant(tmp_path, {
        "replica/__init__.py": "", "replica/cli/__init__.py": "",
        "replica/cli/main.py": "", "replica/store/__init__.py": "",
        "replica/store/store.py": "", "replica/vault/__init__.py": "",
        "replica/vault/files.py": "",
        "replica/cli/m.py": "def f():\n    from replica.cli import main\n"
                            "    from ..store.store import Store\nimport replica.vault.files\n",
    })
    assert tree["replica.cli.m"].imports == {"replica.cli.main", "replica.store.store",
                                             "replica.vault.files"}


def test_a_planted_upward_import_is_forbidden(tmp_path: Path) -> None:
    tree = _plant(tmp_path, {
        "replica/store/__init__.py": "", "replica/engine/__init__.py": "",
        "replica/engine/sync.py": "from replica.store import store\n",
        "replica/store/store.py": "from replica.engine import sync\n",  # planted
    })
    assert forbidden_imports(tree, tmp_path) == [
        "replica.store.store -> replica.engine.sync (replica/store may not import "
        "replica/engine)"]


def test_a_planted_hub_import_from_the_replica_is_forbidden(tmp_path: Path) -> None:
    tree = _plant(tmp_path, {
        "hub/__init__.py": "", "hub/guard.py": "",
        "replica/cli/__init__.py": "",
        "replica/cli/main.py": "def f():\n    from hub import guard\n",  # planted
    })
    assert forbidden_imports(tree, tmp_path) == [
        "replica.cli.main -> hub.guard (replica may not import hub)"]


def test_a_planted_sqlalchemy_outside_the_store_is_forbidden(tmp_path: Path) -> None:
    tree = _plant(tmp_path, {
        "hub/__init__.py": "", "hub/store/__init__.py": "",
        "hub/store/db.py": "import sqlalchemy as sa\n",
        "hub/blocks.py": "from sqlalchemy import select\nimport starlette\n",  # planted
        "hub/api/__init__.py": "", "hub/api/routes.py": "from hub import blocks\n"
                                                        "from hub.store import db\n",
    })
    assert forbidden_imports(tree, tmp_path) == [
        "hub.blocks imports sqlalchemy (only ['hub:store'])",
        "hub.blocks imports starlette (only ['bench:bench', 'hub:api', 'hub:app', 'hub:console', 'hub:oauth', 'hub:remote_mcp', 'hub:witness'])"]


def test_a_planted_domain_import_of_the_api_is_forbidden(tmp_path: Path) -> None:
    tree = _plant(tmp_path, {
        "hub/__init__.py": "", "hub/api/__init__.py": "", "hub/api/http.py": "",
        "hub/guard.py": "from hub.api import http\n",  # planted
    })
    assert forbidden_imports(tree, tmp_path) == [
        "hub.guard -> hub.api.http (hub/domain may not import hub/api)"]


def test_a_planted_circle_in_a_room_is_found(tmp_path: Path) -> None:
    tree = _plant(tmp_path, {
        "hub/__init__.py": "", "hub/a.py": "def f():\n    from hub import b\n",
        "hub/b.py": "from hub import a\n",
    })
    assert cycles({n: m.imports for n, m in tree.items()}) == [["hub.a", "hub.b"]]


def test_planted_underscore_reaches_are_found(tmp_path: Path) -> None:
    tree = _plant(tmp_path, {
        "replica/engine/__init__.py": "",
        "replica/engine/sync.py": "class Replica:\n    def _apply_receipt_txn(self):\n"
                                  "        pass\n_LIMIT = 3\n",
        "replica/engine/scan.py": "def fold(rep):\n    rep._apply_receipt_txn()\n",
        "replica/app/__init__.py": "",
        "replica/app/rejoin.py": "from replica.engine.sync import _LIMIT\n"
                                 "from replica.engine import sync\n"
                                 "def f(rep):\n    rep._apply_receipt_txn()\n"
                                 "    return sync._LIMIT\n",
    })
    assert private_reaches(tree, tmp_path) == [
        "replica.app.rejoin uses replica.engine.sync._LIMIT",
        "replica.app.rejoin uses ._apply_receipt_txn defined only in replica:engine"]


# --- the real tree --------------------------------------------------------------------------

def test_every_import_is_allowed_by_the_tables() -> None:
    bad = forbidden_imports(read_tree(ROOT))
    assert bad == [], "imports the layering tables forbid:\n  " + "\n  ".join(bad)


def test_no_import_circle_anywhere() -> None:
    tree = read_tree(ROOT)
    found = cycles({n: m.imports for n, m in tree.items()})
    assert found == [], "import circles (lazy imports count): " + "; ".join(
        " <-> ".join(c) for c in found)


def test_no_module_reaches_into_another_packages_underscore_names() -> None:
    bad = private_reaches(read_tree(ROOT))
    assert bad == [], "underscore names used across packages:\n  " + "\n  ".join(bad)
