"""The parts of a three-way merge, pure (replica/engine/merge.py draws the rules): sets,
scalars, ``meta`` keys (a guardrail's severity takes the stricter side) and lines of text
(``merge3``; touching regions conflict, as in diff3)."""

from __future__ import annotations

from typing import Any

from shared.entry import SEVERITIES

ABSENT = object()
START_MARKER = "<<<<<<< ours"
MID_MARKER = "======="
END_MARKER = ">>>>>>> theirs"
BASE_MARKER = "||||||| base"


def merge_sets(base: tuple[str, ...], ours: tuple[str, ...], theirs: tuple[str, ...]
               ) -> tuple[str, ...]:
    """Keep what both kept, add what either added, drop what either dropped."""
    b, o, t = set(base), set(ours), set(theirs)
    return tuple(sorted((o & t) | (o - b) | (t - b)))


def _rank(severity: Any) -> int:
    return SEVERITIES.index(severity) if severity in SEVERITIES else -1


def stricter(ours: Any, theirs: Any) -> Any:
    """The stricter of two guardrail severities (absent ranks below info), ours on a tie."""
    return ours if _rank(ours) >= _rank(theirs) else theirs


def merge_scalar(base: Any, ours: Any, theirs: Any) -> tuple[bool, Any]:
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
        b, o, t = base.get(key, ABSENT), ours.get(key, ABSENT), theirs.get(key, ABSENT)
        if kind == "guardrail" and key == "severity" and o != t and o != b and t != b:
            # both sides changed it: the stricter one wins (absent ranks below info)
            value = stricter(o, t)
            ok = True
        else:
            ok, value = merge_scalar(b, o, t)
        if not ok:
            conflicts.append(f"meta.{key}")
        elif value is not ABSENT:
            merged[key] = value
    return merged, conflicts


def merge_text(base: str, ours: str, theirs: str) -> tuple[str | None, str]:
    """Line merge: (merged text or None on overlap, text with conflict markers)."""
    if ours == theirs or theirs == base:
        return ours, ours
    if ours == base:
        return theirs, theirs
    import merge3  # at the first line merge: a sync with nothing to merge never loads it

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


