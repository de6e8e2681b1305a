"""Completeness proofs for folder scopes: a partial replica proves, against the signed
``tree`` root (shared/foldertree.py), that the entries it holds are exactly the entries of
its scope at that head (docs/protocol.md, "Folder proofs"; decisions.md D143).

    scope: "projects/alpha/*" or "projects/alpha/**": the folder and everything under it
           (globs as read rules and ``--only`` read them: ``*`` crosses folders), "*", "**":
           everything; anything else is not a folder scope: served, never proved.
           Scope.direct (the entries directly in a folder) has no glob: kept for callers
           that name such a scope, the proof handles it
    spine = every folder on the way from "" down to each scoped folder (not under a subtree)

    hub:     build(nodes of the spine and their children, scope) ─▶ proof
             {v, tree, folders: {spine folder: {entries?, count?, children: [[H(name), digest]]}}}
                 entries, count: of a spine folder whose direct entries are not in scope
                 children:       those neither on the spine nor in scope
    replica: verify(signed tree root, scope, the (id, version) it holds, proof)
             recomputes every scoped folder from its entries, walks up with the proof, and
             must reach the signed root; else ``HubUnverified`` (reason ``incomplete``,
             ``out_of_scope``, ``stale_proof`` or ``bad_proof``) and the caller writes nothing

What a proof shows of what is outside the scope: for each spine folder, how many entries it
holds directly and a digest of them, and for each of its other children a hash of its name
and a digest; nothing of any other folder. The names on the spine are the scope's own.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from shared import foldertree as ft
from shared import state
from shared.errors import HubUnverified

VERSION = 1
MAX_SCOPES = 64


@dataclass(frozen=True)
class Scope:
    """Parsed folder patterns: folders held whole (``subtrees``) and folders whose direct
    entries are held (``direct``); redundant patterns dropped."""

    subtrees: frozenset[str]
    direct: frozenset[str]

    def covered(self, folder: str) -> bool:
        """Is ``folder`` in or under a subtree of the scope?"""
        return any(_under(folder, t) for t in self.subtrees)

    def holds(self, entry_id: str) -> bool:
        f = ft.folder_of(entry_id)
        return f in self.direct or self.covered(f)

    def spine(self) -> set[str]:
        """Folders the replica rebuilds from proof data: ancestors of the scoped folders
        that are not themselves held whole, and the direct folders."""
        out: set[str] = set()
        for f in self.subtrees | self.direct:
            out.update(a for a in ft.ancestors(f) if not self.covered(a))
        return out


def _under(folder: str, top: str) -> bool:
    return top == ft.TOP or folder == top or folder.startswith(top + "/")


def _folder(text: str) -> str | None:
    if text == "":
        return ft.TOP
    segs = text.split("/")
    if any(s in ("", ".", "..") or any(c in s for c in "*?[]") for s in segs):
        return None
    return text


def parse_scope(patterns: Iterable[str]) -> Scope | None:
    """The folder scope of glob ``patterns`` (``F/*``, ``F/**``, ``*``, ``**``: with ``*``
    crossing folders, as ``fnmatch`` reads them, each is folder F and all under it); None
    when one is not a folder pattern (a single entry, a glob inside a name): such a scope is
    served but cannot be proved complete."""
    pats = list(patterns)
    if not pats or len(pats) > MAX_SCOPES:
        return None
    subtrees: set[str] = set()
    for p in pats:
        if not isinstance(p, str):
            return None
        stem = p.rstrip("*")
        if p in ("*", "**"):
            f: str | None = ft.TOP
        elif p.endswith(("/*", "/**")) and stem.endswith("/") and len(p) - len(stem) <= 2:
            f = _folder(stem[:-1])
        else:
            return None
        if f is None:
            return None
        subtrees.add(f)
    return scope_of(subtrees, ())


def provable_part(patterns: Iterable[str]) -> tuple[Scope | None, tuple[str, ...]]:
    """A partial replica's globs split: its folder globs as a scope (None: there are none),
    and the rest (single entries, globs inside names), which are served but not proved."""
    folders: list[str] = []
    rest: list[str] = []
    for p in patterns:
        (folders if parse_scope([p]) is not None else rest).append(p)
    return (parse_scope(folders) if folders else None), tuple(rest)


def scope_of(subtrees: Iterable[str], direct: Iterable[str]) -> Scope:
    """A scope of folders held whole and folders whose direct entries are held, with what
    another part already holds dropped."""
    subs = set(subtrees)
    tops = frozenset(t for t in subs if not any(t != u and _under(t, u) for u in subs))
    return Scope(tops, frozenset(d for d in direct if not any(_under(d, t) for t in tops)))


# ---------------------------------------------------------------- the hub's side


def spine_and_children(scope: Scope) -> list[str]:
    """The folders whose kept nodes (and whose children's) ``build`` reads."""
    return sorted(scope.spine())


def build(nodes: Mapping[str, ft.Node], scope: Scope, tree: str) -> dict[str, Any]:
    """The proof for ``scope`` from the kept folder nodes (the spine folders and all their
    children), at the head whose tree root is ``tree``."""
    spine = scope.spine()
    kids = ft.children_of(nodes)
    out: dict[str, Any] = {}
    for f in sorted(spine):
        n = nodes.get(f)
        if n is None:
            continue  # not in the tree: nothing to prove beyond its absence
        doc: dict[str, Any] = {}
        if f not in scope.direct:
            doc["entries"] = ft.entries_digest(n.lattice).hex()
            doc["count"] = n.size
        doc["children"] = sorted([ft.name_hash(c).hex(), nodes[c].digest.hex()]
                                 for c in kids.get(f, ())
                                 if c not in spine and not scope.covered(c))
        out[f] = doc
    return {"v": VERSION, "tree": tree, "folders": out}


# ---------------------------------------------------------------- the replica's side


def _refuse(reason: str, message: str, **details: Any) -> HubUnverified:
    return HubUnverified(message, {"reason": reason, **details})


def _hex32(v: Any) -> bytes:
    if not (isinstance(v, str) and len(v) == 64):
        raise _refuse("bad_proof", "the folder proof has a digest of the wrong form")
    try:
        return bytes.fromhex(v)
    except ValueError:
        raise _refuse("bad_proof", "the folder proof has a digest of the wrong form") from None


def _parse(proof: Any, scope: Scope) -> dict[str, tuple[tuple[bytes, int] | None,
                                                    list[tuple[bytes, bytes]]]]:
    """Strict shape: only spine folders, ``entries``/``count`` exactly where the replica
    does not hold the folder's direct entries."""
    if not isinstance(proof, dict) or set(proof) != {"v", "tree", "folders"} \
            or proof["v"] != VERSION or not isinstance(proof["folders"], dict):
        raise _refuse("bad_proof", "the folder proof is not of the expected form")
    spine = scope.spine()
    out = {}
    for f, doc in proof["folders"].items():
        if f not in spine or not isinstance(doc, dict):
            raise _refuse("bad_proof", "the folder proof names a folder off the scope's path")
        want = {"children"} if f in scope.direct else {"entries", "count", "children"}
        if set(doc) != want or not isinstance(doc["children"], list):
            raise _refuse("bad_proof", "the folder proof has a folder of the wrong form")
        own = None
        if "count" in doc:
            c = doc["count"]
            if not (isinstance(c, int) and not isinstance(c, bool) and 0 <= c < 2**53):
                raise _refuse("bad_proof", "the folder proof has a bad count")
            own = (_hex32(doc["entries"]), c)
        pairs = []
        for pair in doc["children"]:
            if not (isinstance(pair, list) and len(pair) == 2):
                raise _refuse("bad_proof", "the folder proof has a child of the wrong form")
            pairs.append((_hex32(pair[0]), _hex32(pair[1])))
        out[f] = (own, pairs)
    return out


def verify(tree: str, scope: Scope, entries: Iterable[tuple[str, str]], proof: Any) -> None:
    """Raise ``HubUnverified`` unless ``entries`` (id, version) are exactly the live entries
    of ``scope`` in the tree whose signed root is ``tree``."""
    held = list(entries)
    outside = [eid for eid, _ in held if not scope.holds(eid)]
    if outside:
        raise _refuse("out_of_scope", "the hub sent an entry outside the scope",
                      count=len(outside))
    if len({eid for eid, _ in held}) != len(held):
        raise _refuse("bad_proof", "an entry is held twice")
    if isinstance(proof, dict) and proof.get("tree") != tree:
        raise _refuse("stale_proof", "the folder proof is for another head than the one "
                      "signed")
    given = _parse(proof, scope)
    nodes = ft.tree_of(held)  # every folder the held entries make, digests from them alone
    spine = scope.spine()
    digests = {f: n.digest for f, n in nodes.items() if scope.covered(f)}
    kids: dict[str, set[str]] = {}
    for f in spine | {t for t in scope.subtrees if t != ft.TOP}:
        if f != ft.TOP:
            kids.setdefault(ft.folder_of(f), set()).add(f)
    for f in ft.deepest_first(spine):
        own, extra = given.get(f, (None, []))
        if f in scope.direct:
            lattice = state.to_bytes(sum_lattice(held, f))
            count = sum(1 for eid, _ in held if ft.folder_of(eid) == f)
            ent = ft.entries_digest(lattice)
        else:
            ent, count = own if own is not None else (ft.EMPTY_ENTRIES, 0)
        mine = {ft.name_hash(c): c for c in kids.get(f, ())}
        if any(n in mine for n, _ in extra):
            raise _refuse("incomplete", "the folder proof lists a folder of the scope as "
                          "withheld", folder=f)
        pairs = [(n, digests[c]) for n, c in mine.items() if c in digests] + extra
        pairs.sort()
        if len({n for n, _ in pairs}) != len(pairs):
            raise _refuse("bad_proof", "the folder proof lists a child twice", folder=f)
        if f == ft.TOP or count or pairs:
            digests[f] = ft.folder_digest(ent, count, pairs)
    if digests.get(ft.TOP, b"").hex() != tree:
        raise _refuse("incomplete", "the entries of the scope do not add up to the signed "
                      "tree root: the hub left out, added or changed an entry")


def sum_lattice(entries: Iterable[tuple[str, str]], folder: str) -> int:
    """The lattice (int) of the entries directly in ``folder``."""
    acc = 0
    for eid, v in entries:
        if ft.folder_of(eid) == folder:
            acc = state.moved(acc, eid, None, v)
    return acc
