"""The ``tree`` root: the space's live entries as a tree of folders, signed into the head
beside ``state`` so a replica holding only some folders can prove it holds all of them
(shared/folderproof.py; docs/architecture.md, "The state root"; decisions.md D143).

    entry (id, version)                 live entries only; its folder is the id's dirname
      └─ folder F (""  is the top)      exists while some live entry is in or under it
           entries(F) = SHA-256(domain ‖ Σ element(id, version) of the entries directly in F)
                                        (the LtHash16 lattice of shared/state.py)
           digest(F)  = SHA-256(domain ‖ entries(F) ‖ count(F) ‖ n
                                ‖ sorted[(H(child name), digest(child))])
                └─ tree root = digest("")

Why this shape:

- **O(depth) per op on the hub.** A folder's direct entries are a lattice sum, so an op
  moves one folder's lattice without reading its other entries; the digests of that folder
  and its ancestors are then rehashed from their children's kept digests (``advance``).
- **Proofs reveal hashes and counts, never names.** A child is listed by the SHA-256 of its
  name, sorted and unique, so a proof for ``projects/alpha`` shows, of a sibling, a hash of
  its name (guessable from a dictionary of names, not otherwise), its digest and, of an
  ancestor, how many entries it holds directly. Uniqueness of the name hashes is what stops
  a hub from listing a second ``alpha`` that holds what it withheld.
- **Not ordered by id**, unlike the 256 buckets: a folder is a subtree here, which is what
  a partial replica's scope names.

Pure functions, no I/O. Digests travel as 32 bytes here, hex on the wire.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping
from typing import NamedTuple

from shared import state

FOLDER_DOMAIN = b"quire-folder-v1\x00"
NAME_DOMAIN = b"quire-folder-name-v1\x00"
ENTRIES_DOMAIN = b"quire-folder-entries-v1\x00"
TOP = ""  # the top folder: entries with no "/" in their id (``README``)


def folder_of(entry_id: str) -> str:
    """The folder an entry (or a folder) is directly in: ``projects/alpha/x`` →
    ``projects/alpha``, ``README`` → ``""``."""
    return entry_id.rpartition("/")[0]


def ancestors(folder: str) -> list[str]:
    """``folder`` and every folder above it, deepest first, ending with ``""``."""
    out = [folder]
    while folder != TOP:
        folder = folder_of(folder)
        out.append(folder)
    return out


def name_hash(folder: str) -> bytes:
    """The hash a folder is listed by in its parent: of its last segment only."""
    return hashlib.sha256(NAME_DOMAIN + folder.rpartition("/")[2].encode("utf-8")).digest()


def entries_digest(lattice: bytes) -> bytes:
    return hashlib.sha256(ENTRIES_DOMAIN + lattice).digest()


EMPTY_ENTRIES = entries_digest(state.ZERO)


def folder_digest(entries: bytes, count: int, children: Iterable[tuple[bytes, bytes]]) -> bytes:
    """A folder's digest over its direct entries (digest and count) and its children
    ``(name hash, digest)``, which must be sorted by name hash with no hash twice."""
    kids = list(children)
    names = [n for n, _ in kids]
    if names != sorted(set(names)):
        raise ValueError("a folder's children are sorted by name hash, each once")
    if count < 0 or len(entries) != 32 or any(len(n) != 32 or len(d) != 32 for n, d in kids):
        raise ValueError("a folder is a 32-byte entries digest, a count and 32-byte pairs")
    return hashlib.sha256(FOLDER_DOMAIN + entries + count.to_bytes(8, "big")
                          + len(kids).to_bytes(4, "big")
                          + b"".join(n + d for n, d in kids)).digest()


class Node(NamedTuple):
    """What the hub keeps per folder: its direct entries' lattice and count, its digest."""

    lattice: bytes
    size: int  # entries directly in the folder
    digest: bytes


def children_of(folders: Iterable[str]) -> dict[str, list[str]]:
    """Each folder's children among ``folders``."""
    kids: dict[str, list[str]] = {}
    for f in folders:
        if f != TOP:
            kids.setdefault(folder_of(f), []).append(f)
    return kids


def deepest_first(folders: Iterable[str]) -> list[str]:
    """Children before their parents."""
    return sorted(folders, key=lambda x: (-x.count("/") - (x != TOP), x))


def _rehash(nodes: dict[str, Node], dirty: set[str]) -> set[str]:
    """Recompute the digests of ``dirty`` folders deepest first (children before parents;
    ``nodes`` holds every child of each), dropping folders left empty; the dropped ones."""
    kids = children_of(nodes)
    gone: set[str] = set()
    for f in deepest_first(dirty):
        n = nodes.get(f)
        if n is None:
            continue
        pairs = sorted((name_hash(c), nodes[c].digest) for c in kids.get(f, ())
                       if c in nodes)
        if f != TOP and n.size == 0 and not pairs:
            del nodes[f]
            gone.add(f)
            continue
        nodes[f] = n._replace(digest=folder_digest(entries_digest(n.lattice), n.size, pairs))
    return gone


def advance(nodes: Mapping[str, Node], changes: Iterable[state.Change]
            ) -> tuple[dict[str, Node], set[str], bytes]:
    """Apply ``(id, old live version, new live version)`` changes. ``nodes`` holds the kept
    folders ``needed`` names (every folder the changes touch, their ancestors and all their
    children); missing ones are new. Returns the folders to write, those to delete (left
    empty) and the new root digest."""
    work = dict(nodes)
    dirty: set[str] = set()
    acc: dict[str, tuple[int, int]] = {}
    for entry_id, old, new in changes:
        if old == new:
            continue
        f = folder_of(entry_id)
        if f not in acc:
            n = work.get(f)
            acc[f] = (0, 0) if n is None else (state.to_int(n.lattice), n.size)
        lat, count = acc[f]
        acc[f] = (state.moved(lat, entry_id, old, new),
                  count + (new is not None) - (old is not None))
        dirty.update(ancestors(f))
    for f, (lat, count) in acc.items():
        work[f] = Node(state.to_bytes(lat), count, b"")
    for f in dirty:
        work.setdefault(f, Node(state.ZERO, 0, b""))
    if TOP not in work:
        work[TOP] = Node(state.ZERO, 0, b"")
        dirty.add(TOP)
    gone = _rehash(work, dirty)
    return {f: work[f] for f in dirty if f in work}, gone, work[TOP].digest


def needed(entry_ids: Iterable[str]) -> list[str]:
    """The folders whose kept nodes ``advance`` needs for changes of ``entry_ids``: those
    folders and their ancestors (the store adds their children)."""
    out: set[str] = set()
    for eid in entry_ids:
        out.update(ancestors(folder_of(eid)))
    return sorted(out)


def tree_of(entries: Iterable[tuple[str, str]]) -> dict[str, Node]:
    """Every folder of a live entry set, from scratch (a rebuild, replicas, tests)."""
    out, _, _ = advance({}, ((eid, None, v) for eid, v in entries))
    return out


def root_of_entries(entries: Iterable[tuple[str, str]]) -> str:
    """The tree root (hex) of a live entry set."""
    return tree_of(entries)[TOP].digest.hex()


EMPTY_ROOT = folder_digest(EMPTY_ENTRIES, 0, ()).hex()
