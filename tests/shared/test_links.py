"""The link parser and resolver (shared/links.py, docs/decisions.md D139): every form people
write in Obsidian and plain Markdown, links in code left alone, resolution by exact path,
next to the source, then the shortest path ending with the name (case and Unicode
normalization ignored)."""

from __future__ import annotations

import unicodedata

import pytest

from shared.links import MARKDOWN, WIKILINK, Link, Names, dangling, parse, resolve_wikilink, targets

BODY = """# Plan
See [[Release Plan]], [[Release Plan|the plan]], [[Release Plan#Dates]] and
[[Meeting Notes/Kickoff#Agenda|kickoff]], ![[diagram]], [[#Local heading]].
Also [notes](../Archive/Old%20Notes.md#top) and [x](<Release Plan.md>) and
[web](https://example.com/a.md) and [mail](mailto:a@b.md).
`[[not a link]]` and
```
[[nor this]] [y](no.md)
```
~~~~
[[nor]]
~~~~
[[café]]
"""


def test_every_form_is_parsed_and_code_is_not() -> None:
    assert parse(BODY) == [
        Link("Release Plan"), Link("Release Plan", None, "the plan"),
        Link("Release Plan", "Dates"), Link("Meeting Notes/Kickoff", "Agenda", "kickoff"),
        Link("diagram"), Link("", "Local heading"),
        Link("../Archive/Old Notes.md", "top", None, MARKDOWN),
        Link("Release Plan.md", None, None, MARKDOWN),
        Link("café"),
    ]


IDS = {"Projects/Release Plan", "Meeting Notes/Kickoff", "Archive/Old Notes",
       "Projects/Sub/Release Plan", "page/b", "page/ops/c", "Café", "diagram",
       "Other/Meeting Notes/Kickoff"}


@pytest.mark.parametrize("source,name,want", [
    ("Projects/Status", "Release Plan", "Projects/Release Plan"),  # next to the source
    ("Home", "release plan", "Projects/Release Plan"),  # shortest path, any case
    ("Home", "Sub/Release Plan", "Projects/Sub/Release Plan"),  # a path tail
    ("Home", "Meeting Notes/Kickoff", "Meeting Notes/Kickoff"),  # exact beats a tail
    ("page/a", "b", "page/b"),  # the first layout: next to it
    ("page/a", "c", "page/ops/c"),
    ("page/a", "ops/c.md", "page/ops/c"),
    ("Home", unicodedata.normalize("NFD", "café"), "Café"),  # NFD typed, NFC stored
    ("Home", "../x", None), ("Home", "gone", None), ("Home", "", None),
])
def test_wikilinks_resolve_as_obsidian_does(source: str, name: str, want: str | None) -> None:
    assert resolve_wikilink(source, name, Names(IDS)) == want


def test_targets_once_each_and_dangling_links() -> None:
    src = "Projects/Status"
    names = Names(IDS | {src})
    assert targets(src, BODY, names) == [
        ("Projects/Release Plan", WIKILINK), ("Meeting Notes/Kickoff", WIKILINK),
        ("diagram", WIKILINK), ("Archive/Old Notes", MARKDOWN), ("Café", WIKILINK)]
    assert dangling(src, BODY, names) == []
    assert [link.target for link in dangling("Home", BODY + "[[gone]]", names)] == [
        "../Archive/Old Notes.md", "Release Plan.md", "gone"]  # out of the vault, no entry
    assert targets(src, "[[Status]] and [[Projects/Status]]", names) == []  # itself
    assert parse("no links here") == []

