"""Three-way merge rules (DESIGN §7), as tables: no I/O."""

from __future__ import annotations

import pytest

from replica.engine.merge import merge_entry, merge_sets, merge_text
from shared.entry import Entry, tombstone


def page(body: str = "a\nb\nc\nd\ne\n", **kw: object) -> Entry:
    fields: dict = {"id": "page/p", "title": "T", "body": body}
    fields.update(kw)
    return Entry(**fields)


def guard(sev: str, body: str = "x\n") -> Entry:
    return Entry(id="guardrail/g", title="G", body=body, meta={"severity": sev})


BASE = page()


@pytest.mark.parametrize("base,ours,theirs,expect", [
    # one side unchanged: take the other
    (BASE, BASE, page(title="New"), page(title="New")),
    (BASE, page(title="New"), BASE, page(title="New")),
    # both sides made the same change
    (BASE, page(title="X"), page(title="X"), page(title="X")),
    # non-overlapping body edits merge by lines
    (BASE, page("A\nb\nc\nd\ne\n"), page("a\nb\nc\nd\nE\n"), page("A\nb\nc\nd\nE\n")),
    # title on one side, body on the other
    (BASE, page(title="N"), page("a\nb\nc\nd\nE\n"), page("a\nb\nc\nd\nE\n", title="N")),
    # deleted on both sides
    (BASE, None, tombstone("page/p"), None),
    # created on one side only
    (None, page(), None, page()),
    # created on both sides with the same content
    (None, page(), page(), page()),
])
def test_clean_merges_take_every_side_change(base, ours, theirs, expect):
    r = merge_entry(base, ours, theirs)
    assert r.clean, r.conflicts
    if expect is None:
        assert r.entry is None
    else:
        assert r.entry is not None and r.entry.version == expect.version


def test_tags_and_links_merge_as_sets_keeping_adds_and_removes_of_both_sides():
    base = page(tags=("a", "b"), links=("page/x",))
    ours = page(tags=("b", "c"), links=("page/x", "page/y"))  # drop a, add c, add link y
    theirs = page(tags=("a", "b", "d"), links=())  # add d, drop link x
    r = merge_entry(base, ours, theirs)
    assert r.clean
    assert r.entry.tags == ("b", "c", "d")
    assert r.entry.links == ("page/y",)


@pytest.mark.parametrize("base,ours,theirs,expect", [
    ("warn", "block", "info", "block"),
    ("info", "warn", "block", "block"),
    ("warn", "info", "warn", "info"),  # one side's own edit is not a merge
    ("block", "info", "warn", "warn"),
])
def test_guardrail_severity_merge_never_weakens_below_both_sides(base, ours, theirs, expect):
    r = merge_entry(guard(base), guard(ours), guard(theirs))
    assert r.clean
    assert r.entry.meta["severity"] == expect


def test_guardrail_severity_raised_while_body_edited_elsewhere_keeps_both():
    r = merge_entry(guard("warn", "x\n"), guard("block", "x\n"), guard("warn", "y\n"))
    assert r.clean
    assert r.entry.meta["severity"] == "block" and r.entry.body == "y\n"


@pytest.mark.parametrize("base,ours,theirs,fields", [
    (BASE, page("Z\nb\nc\nd\ne\n"), page("Y\nb\nc\nd\ne\n"), ("body",)),
    (BASE, page(title="O"), page(title="T2"), ("title",)),
    (BASE, page(meta={"k": "1"}), page(meta={"k": "2"}), ("meta.k",)),
    (BASE, page(title="O"), None, ("delete",)),
    (BASE, tombstone("page/p"), page(title="O"), ("delete",)),
    (None, page(title="O"), page(title="P"), ("create",)),
])
def test_conflicting_changes_are_reported_not_merged(base, ours, theirs, fields):
    r = merge_entry(base, ours, theirs)
    assert not r.clean
    assert r.conflicts == fields
    assert r.entry is None


def test_overlapping_body_hunks_give_a_body_with_markers_for_the_packet():
    r = merge_entry(BASE, page("Z\nb\nc\nd\ne\n"), page("Y\nb\nc\nd\ne\n"))
    assert r.body_with_markers is not None
    assert "<<<<<<< ours" in r.body_with_markers and ">>>>>>> theirs" in r.body_with_markers


def test_set_merge_keeps_what_either_side_added_and_drops_what_either_removed():
    assert merge_sets((), ("a",), ("b",)) == ("a", "b")
    assert merge_sets(("a",), (), ("a",)) == ()
    assert merge_sets(("a",), ("a",), ("a", "b")) == ("a", "b")


def test_line_merge_without_a_final_newline_keeps_both_sides_edits():
    merged, _ = merge_text("a\nb\nc\nd", "A\nb\nc\nd", "a\nb\nc\nD")
    assert merged == "A\nb\nc\nD"
