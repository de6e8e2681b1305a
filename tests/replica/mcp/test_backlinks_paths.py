"""Links of a page named as people name files (docs/decisions.md D139): ``links_of``
(replica/app/page_text.py) finds every link that resolves to the page (shared/links.py):
``[[release plan]]`` in lower case, a Markdown link with ``%20``. Backlinks come from the
store's links index (tests/replica/links/)."""

from __future__ import annotations

IDS = {"Projects/Release Plan", "Meeting Notes/Kickoff"}


def test_links_of_sees_links_in_any_case_and_encoding() -> None:
    from replica.app.page_text import links_of
    from shared.entry import make_entry

    target = "Projects/Release Plan"
    for body in ("see [[release plan]]\n", "see [x](../Projects/Release%20Plan.md)\n"):
        e = make_entry({"id": "Home/x", "body": body})
        assert [t["id"] for t in links_of(e, IDS)] == [target], body
