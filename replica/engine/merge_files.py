"""Three-way merge of entries that carry their file's text (``raw``; docs/decisions.md
D150), pure. An entry without raw takes part as its canonical vault form.

    merge_files(base, ours, theirs)
      ├─ the body: lines of the three bodies (``merge_text``), line ends as written
      └─ the front matter: lines first; when they overlap, field by field:
           each side's front matter parsed, cut into its top-level keys' blocks of lines,
           merged per key (tags and links as sets, ``meta`` per key, a guardrail's
           severity the stricter side, any other key a scalar), and written back in the
           order and style of ours: a key whose merged value is ours' keeps ours' lines,
           theirs' keeps theirs', any other value is written as YAML; keys only theirs
           has follow, in their order
    the merged text is read as a vault file (``entry_of_text``): raw unless canonical

A key that both sides changed differently is a conflict, named as the field merge names
it (``title``, ``meta.KEY``); so is a merged front matter that no longer parses
(``front matter``).
"""

from __future__ import annotations

from typing import Any

from replica.engine.merge_parts import (
    ABSENT,
    merge_meta,
    merge_scalar,
    merge_sets,
    merge_text,
    stricter,
)
from replica.vault.markdown import entry_of_text
from shared.entry import (
    FRONT_KEYS,
    Entry,
    EntryError,
    Split,
    dump_front,
    load_front,
    split_text,
    to_markdown,
)
from shared.kinds import GUARDRAIL


def merge_files(base: Entry, ours: Entry, theirs: Entry
                ) -> tuple[Entry | None, list[str], str | None]:
    """(merged entry or None, conflicts, body with conflict markers when the body
    conflicts) for three live versions of one entry."""
    b, o, t = (split_text(to_markdown(e)) for e in (base, ours, theirs))
    body, marked = merge_text(b.body, o.body, t.body)
    conflicts = [] if body is not None else ["body"]
    front, front_conflicts = _merge_front(ours.kind, b, o, t)
    conflicts += front_conflicts
    if conflicts or front is None or body is None:
        return None, conflicts, marked if body is None else None
    fences = o if o.front else t
    first, *_, last = fences.front.splitlines(keepends=True) or ["", ""]
    text = o.bom + (first + front + last if front or o.front else "") + body
    try:
        return entry_of_text(ours.id, text)[0], [], None
    except EntryError:
        return None, ["front matter"], None


def _merge_front(kind: str, b: Split, o: Split, t: Split) -> tuple[str | None, list[str]]:
    """(merged front matter lines, conflicts)."""
    merged, _ = merge_text("".join(b.lines), "".join(o.lines), "".join(t.lines))
    if merged is not None and _parses(merged):
        return merged, []
    blocks = [_blocks(s.lines) for s in (b, o, t)]
    if any(x is None for x in blocks):
        return None, ["front matter"]
    bb, ob, tb = (x or {} for x in blocks)
    out: list[str] = []
    conflicts: list[str] = []
    for key in [*ob, *(k for k in tb if k not in ob)]:
        bv, ov, tv = (x[key][0] if key in x else ABSENT for x in (bb, ob, tb))
        value, wrong = _merge_key(kind, key, bv, ov, tv)
        conflicts += wrong
        if wrong or value is ABSENT:
            continue
        if key in ob and value == ov:
            out.append(ob[key][1])
        elif key in tb and value == tv:
            out.append(tb[key][1])
        else:
            flow = key in ob and ob[key][1].split(":", 1)[1].lstrip()[:1] in ("[", "{")
            out.append(dump_front({key: value}, flow=flow).replace("\n", o.newline))
    return (None if conflicts else "".join(out)), conflicts


def _merge_key(kind: str, key: str, b: Any, o: Any, t: Any) -> tuple[Any, list[str]]:
    if key in ("tags", "links") and all(isinstance(v, list) or v is ABSENT or v is None
                                        for v in (b, o, t)):
        sets = [tuple(v) if isinstance(v, list) else () for v in (b, o, t)]
        merged = list(merge_sets(*sets))
        same_o = isinstance(o, list) and set(merged) == set(o)
        same_t = isinstance(t, list) and set(merged) == set(t)
        return (o if same_o else t if same_t else merged), []
    if key == "meta" and all(isinstance(v, dict) or v is ABSENT or v is None
                             for v in (b, o, t)):
        meta, wrong = merge_meta(kind, *(v if isinstance(v, dict) else {} for v in (b, o, t)))
        return (o if meta == o else t if meta == t else meta), wrong
    if kind == GUARDRAIL and key == "severity" and o != t and o != b and t != b:
        return stricter(o, t), []
    ok, value = merge_scalar(b, o, t)
    return value, [] if ok else [key if key in FRONT_KEYS else f"meta.{key}"]


def _parses(front: str) -> bool:
    try:
        return isinstance(load_front(front) or {}, dict)
    except EntryError:
        return False


def _blocks(lines: tuple[str, ...]) -> dict[str, tuple[Any, str]] | None:
    """Front matter lines cut into top-level keys: key -> (value, its lines, as written;
    comments and blank lines go with the key above them). None when the lines do not cut
    so (a comment before the first key, a document that is not a mapping)."""
    cut: list[list[str]] = []
    for line in lines:
        top = line[:1] not in ("", " ", "\t", "#", "-", "\r", "\n")
        if top:
            cut.append([line])
        elif cut:
            cut[-1].append(line)
        else:
            return None
    out: dict[str, tuple[Any, str]] = {}
    for block in cut:
        text = "".join(block)
        try:
            loaded = load_front(text)
        except EntryError:
            return None
        if not isinstance(loaded, dict) or len(loaded) != 1:
            return None
        ((key, value),) = loaded.items()
        if not isinstance(key, str) or key in out:
            return None
        out[key] = (value, text)
    return out
