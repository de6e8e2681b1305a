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
  regions count as overlapping, as in diff3);
- when any side carries its file's text (``raw``), the files are merged instead: body lines
  and front matter lines, a front matter conflict retried field by field with the same
  rules, written in the order and style of ours (replica/engine/merge_files.py).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from replica.engine.merge_files import merge_files
from replica.engine.merge_parts import (
    BASE_MARKER,
    END_MARKER,
    MID_MARKER,
    START_MARKER,
    merge_meta,
    merge_scalar,
    merge_sets,
    merge_text,
)
from shared.entry import Entry

__all__ = ["BASE_MARKER", "END_MARKER", "MID_MARKER", "START_MARKER", "MergeResult", "live",
           "merge_entry", "merge_sets", "merge_text", "same"]


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
    if ours.raw is not None or theirs.raw is not None or base.raw is not None:
        entry, found, marked = merge_files(base, ours, theirs)
        return MergeResult(entry, tuple(found), body_with_markers=marked)
    conflicts: list[str] = []
    ok, title = merge_scalar(base.title, ours.title, theirs.title)
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
