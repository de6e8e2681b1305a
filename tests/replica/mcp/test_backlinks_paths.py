"""Backlinks of a page named as people name files (docs/decisions.md D139): the MCP
``links`` tool's cheap filter (replica/app/page_text.py ``may_link_to``) must let through
every entry whose links resolve to the page (shared/links.py), or its backlinks go
missing: ``[[release plan]]`` in lower case, a Markdown link with ``%20``."""

from __future__ import annotations

IDS = {"Projects/Release Plan", "Meeting Notes/Kickoff"}


def test_backlink_prefilter_sees_links_in_any_case_and_encoding() -> None:
    from replica.app.page_text import links_of, may_link_to
    from shared.entry import make_entry

    target = "Projects/Release Plan"
    for body in ("see [[release plan]]\n", "see [x](../Projects/Release%20Plan.md)\n"):
        e = make_entry({"id": "Home/x", "body": body})
        assert may_link_to(e, target), body
        assert [t["id"] for t in links_of(e, IDS)] == [target], body
    assert not may_link_to(make_entry({"id": "Home/y", "body": "release plan\n"}), "a/zzz")
