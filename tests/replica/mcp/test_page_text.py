"""replica/app/page_text.py as tables: partial edits (line ranges, a unique text, under a
heading), the links a page makes, and the search query language. Each refusal is an
``invalid_request`` that names the problem and changes nothing."""

from __future__ import annotations

import pytest

from replica.app import page_text as t
from shared.entry import make_entry
from shared.errors import InvalidRequest

BODY = "# Title\nintro\n\n## Steps\none\ntwo\n\n## Notes\nn1\n"


@pytest.mark.parametrize(("kw", "want"), [
    ({"replace_lines": {"start": 5, "end": 5, "text": "ONE"}},
     "# Title\nintro\n\n## Steps\nONE\ntwo\n\n## Notes\nn1\n"),
    ({"replace_lines": {"start": 5, "end": 6, "text": ""}},
     "# Title\nintro\n\n## Steps\n\n## Notes\nn1\n"),
    ({"replace_lines": {"start": 5, "end": 4, "text": "zero\n"}},  # insert before line 5
     "# Title\nintro\n\n## Steps\nzero\none\ntwo\n\n## Notes\nn1\n"),
    ({"replace_lines": {"start": 10, "end": 9, "text": "tail"}},  # append at the end
     BODY + "tail\n"),
    ({"replace_text": {"old": "two", "new": "2"}},
     "# Title\nintro\n\n## Steps\none\n2\n\n## Notes\nn1\n"),
    ({"append_under": {"heading": "Steps", "text": "three"}},
     "# Title\nintro\n\n## Steps\none\ntwo\nthree\n\n## Notes\nn1\n"),
    ({"append_under": {"heading": "## Notes", "text": "n2\n"}}, BODY + "n2\n"),
    ({"append_under": {"heading": "Title", "text": "end of all"}},  # level 1: to the end
     BODY + "end of all\n"),
])
def test_partial_edits(kw: dict, want: str) -> None:
    assert t.edit_body(BODY, **kw).body == want


def test_a_last_line_without_a_line_end_keeps_its_shape() -> None:
    assert t.edit_body("a\nb", replace_lines={"start": 2, "end": 2, "text": "B"}).body == "a\nB"
    assert t.edit_body("a\nb", replace_text={"old": "b", "new": "c"}).body == "a\nc"
    assert t.edit_body("# h\nb", append_under={"heading": "h", "text": "c"}).body == \
        "# h\nb\nc\n"


@pytest.mark.parametrize(("kw", "problem"), [
    ({}, "exactly one"),
    ({"replace_text": {"old": "o", "new": "x"}}, "occurs 4 times"),
    ({"replace_text": {"old": "absent", "new": "x"}}, "occurs 0 times"),
    ({"replace_text": {"old": "", "new": "x"}}, "must not be empty"),
    ({"replace_lines": {"start": 0, "end": 1, "text": "x"}}, "outside the body"),
    ({"replace_lines": {"start": 3, "end": 99, "text": "x"}}, "outside the body"),
    ({"replace_lines": {"start": "1", "end": 1, "text": "x"}}, "integers"),
    ({"append_under": {"heading": "Nope", "text": "x"}}, "no heading"),
    ({"replace_text": {"old": "one", "new": "x"},
      "append_under": {"heading": "Steps", "text": "x"}}, "exactly one"),
])
def test_bad_edits_are_refused_by_name(kw: dict, problem: str) -> None:
    with pytest.raises(InvalidRequest) as e:
        t.edit_body(BODY, **kw)
    assert problem in e.value.message


def test_a_missing_heading_lists_the_headings() -> None:
    with pytest.raises(InvalidRequest) as e:
        t.edit_body(BODY, append_under={"heading": "Nope", "text": "x"})
    assert e.value.details["headings"] == ["Title", "Steps", "Notes"]


def test_links_from_the_field_wikilinks_and_relative_markdown() -> None:
    known = {"page/a", "page/b", "skill/deploy", "page/ops/c", "page/src"}
    e = make_entry({"id": "page/src", "title": "s", "links": ["page/a"],
                    "body": "see [[b]], [[skill/deploy|how]], [[c#part]], [[gone]],\n"
                            "[x](ops/c.md) [y](../skill/deploy.md) [z](https://e.com/a.md)\n"
                            "[up](../../etc.md) [[src]]\n"})
    assert t.links_of(e, known) == [
        {"id": "page/a", "via": "links"}, {"id": "page/b", "via": "wikilink"},
        {"id": "skill/deploy", "via": "wikilink"}, {"id": "page/ops/c", "via": "wikilink"}]


@pytest.mark.parametrize(("q", "groups"), [
    ("deploy Blue", (("deploy", "blue"),)),
    ('"Blue  Button" deploy', (("blue button", "deploy"),)),
    ("a OR b c", (("a",), ("b", "c"))),
    ('"or" OR x', (("or",), ("x",))),
])
def test_queries_parse(q: str, groups: tuple) -> None:
    assert t.parse_query(q).groups == groups


@pytest.mark.parametrize("q", ['"open', "OR a", "a OR", " ".join(["w"] * 17)])
def test_bad_queries_are_refused(q: str) -> None:
    with pytest.raises(InvalidRequest):
        t.parse_query(q)


def test_phrase_and_or_scoring() -> None:
    q = t.parse_query('"blue button" OR rollback')
    assert t.score(q, "page/x", "Deploy", [], "press the blue\nbutton") > 0
    assert t.score(q, "page/x", "Deploy", [], "blue and a button") == 0
    assert t.score(q, "page/x", "Rollback", [], "") > 0
