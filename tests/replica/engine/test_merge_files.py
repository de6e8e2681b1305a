"""Three-way merge of files as their authors wrote them (replica/engine/merge_files.py,
docs/decisions.md D150): bodies by lines with the file's own line ends, front matter by
lines and, when lines overlap, field by field in the order and style of ours. A table,
no I/O."""

from __future__ import annotations

from replica.engine.merge import merge_entry
from shared.entry import Entry, make_entry


def raw(text: str, eid: str = "Notes/plan") -> Entry:
    return make_entry({"id": eid, "raw": text})


def test_two_body_edits_of_a_crlf_file_merge_and_keep_crlf() -> None:
    base = raw("---\r\ntitle: Plan\r\n---\r\none\r\ntwo\r\nthree\r\nfour\r\n")
    ours = raw("---\r\ntitle: Plan\r\n---\r\nONE\r\ntwo\r\nthree\r\nfour\r\n")
    theirs = raw("---\r\ntitle: Plan\r\n---\r\none\r\ntwo\r\nthree\r\nFOUR\r\n")
    m = merge_entry(base, ours, theirs)
    assert m.clean and m.entry is not None
    assert m.entry.raw == "---\r\ntitle: Plan\r\n---\r\nONE\r\ntwo\r\nthree\r\nFOUR\r\n"
    assert m.entry.body == "ONE\r\ntwo\r\nthree\r\nFOUR\r\n"


def test_a_bom_and_no_final_newline_survive_a_merge() -> None:
    base = raw("\ufeff# Plan\n\nA\nB\nC")
    m = merge_entry(base, raw("\ufeff# Plan!\n\nA\nB\nC"), raw("\ufeff# Plan\n\nA\nB\nC."))
    assert m.entry is not None and m.entry.raw == "\ufeff# Plan!\n\nA\nB\nC."


FRONT = ("---\nowner: 'ann'\nstatus: draft\ntags: [a, b]\ntitle: \"Plan\"\n---\nbody\n")


def test_a_front_matter_conflict_on_different_keys_merges_field_by_field() -> None:
    base = raw(FRONT)
    # adjacent lines: a line merge overlaps; the keys differ, so the fields merge
    ours = raw(FRONT.replace("owner: 'ann'", "owner: 'bob'")
               .replace("tags: [a, b]", "tags: [a, b, c]"))
    theirs = raw("---\ntitle: Plan\nowner: ann\nstatus: done\ntags:\n- a\n- b\n- d\nsize: 3\n"
                 "---\nbody\n")
    m = merge_entry(base, ours, theirs)
    assert m.clean, m.conflicts
    assert m.entry is not None
    # ours' order and style (quotes, the flow list); theirs' new key after, in its style
    assert m.entry.raw == ("---\nowner: 'bob'\nstatus: done\ntags: [a, b, c, d]\n"
                           "title: \"Plan\"\nsize: 3\n---\nbody\n")
    assert m.entry.meta == {"owner": "bob", "status": "done", "size": 3}
    assert m.entry.tags == ("a", "b", "c", "d")


def test_the_same_key_changed_both_ways_is_held() -> None:
    base = raw(FRONT)
    m = merge_entry(base, raw(FRONT.replace("draft", "review")),
                    raw(FRONT.replace("draft", "done")))
    assert m.conflicts == ("meta.status",) and m.entry is None


def test_a_guardrails_severity_changed_both_ways_takes_the_stricter_side() -> None:
    text = "---\nkind: guardrail\nseverity: warn\ntitle: freeze\n---\nno deploys\n"
    base = raw(text, "Rules/freeze")
    m = merge_entry(base, raw(text.replace("warn", "info"), "Rules/freeze"),
                    raw(text.replace("warn", "block"), "Rules/freeze"))
    assert m.entry is not None and m.entry.meta["severity"] == "block"
    assert m.entry.raw == text.replace("warn", "block")


def test_a_canonical_side_merges_with_a_raw_side_and_body_conflicts_are_marked() -> None:
    base = make_entry({"id": "page/x", "title": "x", "body": "a\nb\nc\n"})
    ours = raw("---\ntitle: x\n---\na\nb\nc\n# mine\n", "page/x")  # canonical file +1 line
    assert ours.raw is not None
    theirs = make_entry({"id": "page/x", "title": "x", "body": "A\nb\nc\n"})
    m = merge_entry(base, ours, theirs)
    assert m.entry is not None and m.entry.body == "A\nb\nc\n# mine\n"
    m = merge_entry(base, raw("---\ntitle: x\n---\nZ\nb\nc\n", "page/x"), theirs)
    assert m.conflicts == ("body",) and m.body_with_markers is not None


def test_a_held_raw_file_keeps_its_bytes_under_the_conflict_marker() -> None:
    """A held entry's ``quire:`` marker goes into the file's front matter (one is added
    when it has none) and reading the file takes it out again: the text published is the
    author's, never the marker."""
    from replica.vault.markdown import read_entry, render

    marker = {"conflict": {"theirs": "v2", "fields": ["body"]}}
    for text in ("\ufeff---\r\ntitle: 'Plan'\r\ntags: [a]\r\n---\r\nbody\r\n",
                 "# no front matter\n\ntext", ""):
        e = raw(text)
        shown = render(e, marker)
        assert b"quire:" in shown
        back, local = read_entry(None, e.id, shown)  # type: ignore[arg-type]
        assert local == marker and back.raw == text and back.version == e.version


def test_an_edit_of_the_body_keeps_the_front_matter_as_written() -> None:
    from shared.entry import edited

    e = raw("---\r\ntags: [b, a]   # kept\r\ntitle: \"Plan\"\r\n---\r\nold\r\n")
    assert edited(e, body="new\r\n").raw == ("---\r\ntags: [b, a]   # kept\r\n"
                                             "title: \"Plan\"\r\n---\r\nnew\r\n")
    retitled = edited(e, title="Other")  # another field: the canonical form
    assert retitled.raw is None and retitled.title == "Other" and retitled.tags == ("a", "b")
