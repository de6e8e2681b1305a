"""Portable names: what makes an entry id a file name every member's system can hold, a name
to suggest when it is not, and names that are one file on macOS and Windows (docs/decisions.md
D132 part 1, D139). Pure; the replica checks before publishing (replica/engine/push.py) and the
hub in the guard (hub/admission.py), with the same functions.

    entry id --shared.ids.entry_id_problem-->  not an id at all     invalid_entry_id
             --shared.ids.portability_problem--> not on every system  non_portable_id
             --collisions(new, live)-->          one file on macOS/Windows  name_collision

``fold`` is the name as a case-insensitive, normalization-insensitive file system sees it:
``casefold`` of the canonical decomposition, recomposed (Unicode's canonical caseless
match), so ``Notes/Café``, ``notes/café`` and ``notes/cafe\u0301`` fold alike.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable
from dataclasses import dataclass

from shared.ids import (
    _RESERVED,
    MAX_ID,
    MAX_SEGMENT_BYTES,
    entry_id_problem,
    portability_problem,
)

INVALID = "invalid_entry_id"
NON_PORTABLE = "non_portable_id"
COLLISION = "name_collision"
_BAD_CHARS = re.compile(r'[\x00-\x1f\x7f\\<>:"|?*]+')


def fold(entry_id: str) -> str:
    """The id as macOS and Windows compare file names (case and normalization ignored)."""
    if entry_id.isascii():
        return entry_id.lower()
    return unicodedata.normalize("NFC", unicodedata.normalize("NFD", entry_id).casefold())


def _segment(part: str) -> str:
    part = _BAD_CHARS.sub("-", part).lstrip(".").rstrip(". ") or "_"
    stem, dot, rest = part.partition(".")
    if stem.lower() in _RESERVED:
        part = f"{stem}_{dot}{rest}"
    if part.endswith((".md", ".tmp")):
        part += "_"
    while len(part.encode("utf-8")) > MAX_SEGMENT_BYTES - 3:
        part = part[:-1].rstrip(". ") or "_"
    return part


def portable_name(entry_id: str) -> str:
    """A name close to ``entry_id`` that is a valid, portable id: NFC, characters Windows
    refuses replaced by '-', trailing dots and spaces dropped, device names suffixed with
    '_', segments and the whole cut to their limits."""
    try:
        entry_id.encode("utf-8")
        text = entry_id
    except UnicodeEncodeError:  # a file name in another encoding: most often Windows-1252
        raw = entry_id.encode("utf-8", "surrogateescape")
        try:
            text = raw.decode("cp1252")
        except UnicodeDecodeError:
            text = raw.decode("latin-1")
    text = unicodedata.normalize("NFC", text.encode("utf-8", "replace").decode("utf-8"))
    parts = [p for p in text.split("/") if p not in ("", ".", "..")] or ["_"]
    out = "/".join(_segment(p) for p in parts)
    if len(out) > MAX_ID:
        out = out[:MAX_ID].rstrip("/. ") or "_"
    return out


def suggestion(entry_id: str) -> str:
    """``"; rename it to 'X.md'"`` for a refused name, or "" when none would do better."""
    better = portable_name(entry_id)
    if better == entry_id or entry_id_problem(better) or portability_problem(better):
        return ""
    return f"; rename it to '{better}.md'"


@dataclass(frozen=True)
class NameProblem:
    code: str  # INVALID, NON_PORTABLE or COLLISION
    reason: str
    suggested: str | None  # a portable id to rename the file to, when one is found
    other: str | None = None  # COLLISION: the entry it collides with

    def to_json(self) -> dict[str, str]:
        out = {"code": self.code, "reason": self.reason}
        if self.suggested is not None:
            out["suggested"] = self.suggested
        if self.other is not None:
            out["of"] = self.other
        return out


def name_problem(entry_id: str) -> NameProblem | None:
    """What is wrong with ``entry_id`` as the name of a new entry, on its own."""
    why = entry_id_problem(entry_id)
    code = INVALID
    if why is None:
        why, code = portability_problem(entry_id), NON_PORTABLE
    if why is None:
        return None
    better = portable_name(entry_id)
    ok = better != entry_id and not entry_id_problem(better) and not portability_problem(better)
    return NameProblem(code, why, better if ok else None)


def _free(name: str, taken: set[str]) -> str:
    """``name``, or ``name 2``, ``name 3``… until its fold is not ``taken``."""
    if fold(name) not in taken:
        return name
    n = 2
    while fold(f"{name} {n}") in taken:
        n += 1
    return f"{name} {n}"


def _folders(eid: str) -> list[str]:
    """The folders on the way to ``eid``: ``a/b/c`` -> ``a``, ``a/b``."""
    parts = eid.split("/")
    return ["/".join(parts[:i]) for i in range(1, len(parts))]


def collisions(new: Iterable[str], live: Iterable[str]) -> dict[str, NameProblem]:
    """The ids of ``new`` (entries about to be created) that are one file with another
    entry on a case-insensitive or normalization-insensitive file system: with a ``live``
    entry (the space's, after the batch: deletes in it excluded by the caller), or with an
    earlier id of ``new`` (in sorted order). Whole ids and each folder on the way: a new
    ``notes/b`` beside a live ``Notes/a`` would be written into ``Notes/`` on macOS and read
    back as another id. Each is mapped to its problem, naming the other entry.

    One pass over ``live``, and only the ids in a first folder a new id shares (folded)
    are folded whole: a sync that creates one page in a space of 100,000 pays a split and
    a lower-casing a page."""
    todo = sorted(set(new))
    if not todo:
        return {}
    firsts = {fold(n.partition("/")[0]) for n in todo}
    wanted = {fold(n) for n in todo}
    prefixes = {fold(f): f.count("/") + 1 for n in todo for f in _folders(n)}
    lengths = {len(w) for w in wanted}
    by_fold: dict[str, str] = {}
    folders: dict[str, str] = {}
    pending = dict(prefixes)  # the new ids' folders no live id has shown yet
    for eid in live:
        first = eid.partition("/")[0]
        if (first.lower() if first.isascii() else fold(first)) not in firsts:
            continue
        ascii_id = eid.isascii()
        if not ascii_id or len(eid) in lengths:  # an ASCII fold keeps the length
            low = fold(eid)
            if low in wanted:
                by_fold.setdefault(low, eid)
        if pending:
            low = "" if ascii_id else fold(eid)
            for p, depth in list(pending.items()):
                if (eid[:len(p) + 1].lower() == p + "/") if ascii_id \
                        else low.startswith(p + "/"):
                    folders[p] = "/".join(eid.split("/")[:depth])
                    del pending[p]

    out: dict[str, NameProblem] = {}
    for eid in todo:
        other = by_fold.get(fold(eid))
        why = None
        if other is not None and other != eid:
            why = f"'{eid}' and '{other}' differ only in case or accents' encoding"
        else:
            for f in _folders(eid):
                have = folders.get(fold(f))
                if have is not None and have != f:
                    other, why = have, (f"folder '{f}' and folder '{have}' differ only in "
                                        "case or accents' encoding")
                    break
        if why is None:  # it stands: later new ids are judged against it
            by_fold.setdefault(fold(eid), eid)
            for f in _folders(eid):
                folders.setdefault(fold(f), f)
            continue
        assert other is not None
        if fold(other) == fold(eid):  # the same name: another one, in the other's folder
            folder = other.rpartition("/")[0]
            name = eid.rpartition("/")[2]
            taken = set(by_fold) | {fold(x) for x in todo}
            suggested = _free(f"{folder}/{name}" if folder else name, taken)
        else:  # a folder spelled another way: the live spelling
            suggested = other + eid[len(other):]
        out[eid] = NameProblem(COLLISION, why + ", one file on macOS and Windows", suggested,
                               other)
    return out
