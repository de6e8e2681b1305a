"""Three-way merge of one entry against its last synced version (docs/replica.md, "Merge").
Pure: no I/O.

``merge_entry(base, ours, theirs)`` takes three states of one entry, where ``None`` (or a
tombstone) means "absent", and returns either a merged entry or the list of fields that
conflict. The rules:

- identical sides, or one side unchanged from the base: take the other side;
- both created (no base) with different content: conflict ``create``;
- one side deleted, the other edited: conflict ``delete``;
- otherwise field by field: tags and links merge as sets; ``title`` and each ``meta`` key are
  scalars (a conflict when both sides changed them differently), except a guardrail's
  ``meta.severity``, which takes the stricter side so a merge never weakens a guardrail;
  bodies merge by lines with ``merge3`` when the changed regions do not overlap (touching
  regions count as overlapping, as in diff3).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import merge3

from shared.entry import SEVERITIES, Entry

_ABSENT = object()
START_MARKER = "<<<<<<< ours"
MID_MARKER = "======="
END_MARKER = ">>>>>>> theirs"
BASE_MARKER = "||||||| base"


@dataclass(frozen=True)
class MergeResult:
    """``entry`` is the merged state (``None`` = absent) when ``conflicts`` is empty."""

    entry: Entry | None
    conflicts: tuple[str, ...] = ()
    body_with_markers: str | None = None  # for conflict packets when the body conflicts
    details: dict[str, Any] = field(default_factory=dict)

    @property
    def clean(self) -> bool:
        return not self.conflicts


def live(e: Entry | None) -> Entry | None:
    """Normalize a tombstone to ``None``: for merging, deleted and absent are the same."""
    return None if e is None or e.deleted else e


def same(a: Entry | None, b: Entry | None) -> bool:
    a, b = live(a), live(b)
    if a is None or b is None:
        return a is b
    return a.version == b.version


def merge_sets(base: tuple[str, ...], ours: tuple[str, ...], theirs: tuple[str, ...]
               ) -> tuple[str, ...]:
    """Keep what both kept, add what either added, drop what either dropped."""
    b, o, t = set(base), set(ours), set(theirs)
    return tuple(sorted((o & t) | (o - b) | (t - b)))


def _rank(severity: Any) -> int:
    return SEVERITIES.index(severity) if severity in SEVERITIES else -1


def _merge_scalar(base: Any, ours: Any, theirs: Any) -> tuple[bool, Any]:
    """(ok, value) for a plain three-way scalar merge."""
    if ours == theirs:
        return True, ours
    if ours == base:
        return True, theirs
    if theirs == base:
        return True, ours
    return False, ours


def merge_meta(kind: str, base: dict[str, Any], ours: dict[str, Any], theirs: dict[str, Any]
               ) -> tuple[dict[str, Any], list[str]]:
    merged: dict[str, Any] = {}
    conflicts: list[str] = []
    for key in sorted(set(base) | set(ours) | set(theirs)):
        b, o, t = base.get(key, _ABSENT), ours.get(key, _ABSENT), theirs.get(key, _ABSENT)
        if kind == "guardrail" and key == "severity" and o != t and o != b and t != b:
            # both sides changed it: the stricter one wins (absent ranks below info)
            value = o if _rank(o) >= _rank(t) else t
            ok = True
        else:
            ok, value = _merge_scalar(b, o, t)
        if not ok:
            conflicts.append(f"meta.{key}")
        elif value is not _ABSENT:
            merged[key] = value
    return merged, conflicts


def merge_text(base: str, ours: str, theirs: str) -> tuple[str | None, str]:
    """Line merge: (merged text or None on overlap, text with conflict markers)."""
    if ours == theirs or theirs == base:
        return ours, ours
    if ours == base:
        return theirs, theirs
    m = merge3.Merge3(base.splitlines(keepends=True), ours.splitlines(keepends=True),
                      theirs.splitlines(keepends=True))
    regions = list(m.merge_regions())
    marked = "".join(_ensure_newlines(m.merge_lines(
        start_marker=START_MARKER, mid_marker=MID_MARKER, end_marker=END_MARKER,
        base_marker=BASE_MARKER)))
    if any(r[0] == "conflict" for r in regions):
        return None, marked
    return marked, marked


def _ensure_newlines(lines: Any) -> list[str]:
    # merge3 writes markers with "\n"; a last line without newline before a marker would
    # glue onto it, so give every line but the very last its newline
    out = list(lines)
    for i in range(len(out) - 1):
        if not out[i].endswith("\n"):
            out[i] += "\n"
    return out


def merge_entry(base: Entry | None, ours: Entry | None, theirs: Entry | None) -> MergeResult:
    """Merge one entry; see the module docstring for the rules."""
    base, ours, theirs = live(base), live(ours), live(theirs)
    if same(ours, theirs):
        return MergeResult(ours)
    if same(ours, base):
        return MergeResult(theirs)
    if same(theirs, base):
        return MergeResult(ours)
    if base is None:
        return MergeResult(None, ("create",))
    if ours is None or theirs is None:
        return MergeResult(None, ("delete",), details={"deleted_by": "ours" if ours is None
                                                        else "theirs"})
    conflicts: list[str] = []
    ok, title = _merge_scalar(base.title, ours.title, theirs.title)
    if not ok:
        conflicts.append("title")
    tags = merge_sets(base.tags, ours.tags, theirs.tags)
    links = merge_sets(base.links, ours.links, theirs.links)
    meta, meta_conflicts = merge_meta(ours.kind, base.meta, ours.meta, theirs.meta)
    conflicts.extend(meta_conflicts)
    body, marked = merge_text(base.body, ours.body, theirs.body)
    if body is None:
        conflicts.append("body")
    if conflicts:
        return MergeResult(None, tuple(conflicts),
                           body_with_markers=marked if body is None else None)
    return MergeResult(Entry(id=ours.id, title=title, body=body or "", tags=tags, links=links,
                             meta=meta))
