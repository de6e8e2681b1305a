"""Read rules, by table (shared/readscope.py): who a read rule reaches, which entries it
matches (glob, kind, tag), and which rule decides."""

from __future__ import annotations

from typing import Any

import pytest

from shared.policy import Actor
from shared.readscope import may_read, read_scope, tags_matter, withheld_mark


def rule(effect: str, who: str, entries: str, **kw: Any) -> dict[str, Any]:
    return {"id": f"r-{effect}-{who}-{entries}-{sorted(kw.items())}", "effect": effect,
            "who": who, "actions": ["read"], "entries": entries, **kw}


ALICE = Actor("u-alice", "editor")
VIEWER = Actor("u-vic", "viewer")
SCOUT = Actor("u-alice", "editor", agent="scout")
OTHER_AGENT = Actor("u-alice", "editor", agent="helper")

CASES = [
    # (rules, actor, entry id, tags, may read)
    ([], ALICE, "page/hr/pay", [], True),  # no read rule: members read everything
    ([rule("deny", "viewer", "page/hr/*")], VIEWER, "page/hr/pay", [], False),
    ([rule("deny", "viewer", "page/hr/*")], ALICE, "page/hr/pay", [], True),  # other role
    ([rule("deny", "u-alice", "*", tags=["hr"])], ALICE, "note/x", ["hr", "ops"], False),
    ([rule("deny", "u-alice", "*", tags=["hr"])], ALICE, "note/x", ["ops"], True),
    ([rule("deny", "editor", "*", kinds=["note"])], ALICE, "note/x", [], False),
    ([rule("deny", "editor", "*", kinds=["note"])], ALICE, "page/x", [], True),
    # an agent's scope: deny everything, allow its folder
    ([rule("deny", "agent:scout", "*"), rule("allow", "agent:scout", "projects/alpha/*")],
     SCOUT, "projects/alpha/plan", [], True),
    ([rule("deny", "agent:scout", "*"), rule("allow", "agent:scout", "projects/alpha/*")],
     SCOUT, "projects/beta/plan", [], False),
    ([rule("deny", "agent:scout", "*")], OTHER_AGENT, "projects/beta/plan", [], True),
    ([rule("deny", "agents", "page/*")], SCOUT, "page/a", [], False),
    ([rule("deny", "agents", "page/*")], ALICE, "page/a", [], True),  # not an agent
    # a member's deny reaches their agents; their allow does not
    ([rule("deny", "u-alice", "page/hr/*")], SCOUT, "page/hr/a", [], False),
    ([rule("deny", "agents", "page/*"), rule("allow", "u-alice", "page/a")],
     SCOUT, "page/a", [], False),
    # the most specific glob decides; then more conditions; then deny
    ([rule("deny", "editor", "page/*"), rule("allow", "editor", "page/hr/*")], ALICE,
     "page/hr/a", [], True),
    ([rule("allow", "editor", "page/*"), rule("deny", "editor", "page/*", tags=["hr"])],
     ALICE, "page/a", ["hr"], False),
    ([rule("allow", "editor", "page/*"), rule("deny", "editor", "page/*")], ALICE,
     "page/a", [], False),
    ([rule("deny", "editor", "page/*"), rule("allow", "editor", "page/exact")], ALICE,
     "page/exact", [], True),
]


@pytest.mark.parametrize(("rules", "actor", "entry", "tags", "want"), CASES)
def test_read_rules_decide_as_the_table_says(rules: list[dict[str, Any]], actor: Actor,
                                             entry: str, tags: list[str], want: bool) -> None:
    assert may_read(read_scope(rules, actor), entry, tags) is want


def test_write_rules_are_not_read_rules() -> None:
    write = {"id": "w", "effect": "deny", "who": "editor", "actions": ["update"],
             "entries": "*"}
    scope = read_scope([write], ALICE)
    assert scope.unrestricted and may_read(scope, "page/a")


def test_an_allow_alone_restricts_nothing_and_fingerprints_differ() -> None:
    assert read_scope([rule("allow", "editor", "page/*")], ALICE).unrestricted
    a = read_scope([rule("deny", "editor", "page/*")], ALICE)
    b = read_scope([rule("deny", "editor", "note/*")], ALICE)
    assert not a.unrestricted and a.fingerprint != b.fingerprint != ""


def test_tags_matter_only_where_a_tag_rule_could_match() -> None:
    scope = read_scope([rule("deny", "editor", "page/*", tags=["hr"])], ALICE)
    assert tags_matter(scope, "page/a") and not tags_matter(scope, "note/a")


def test_a_withheld_mark_names_neither_id_nor_version() -> None:
    mark = withheld_mark("page/hr/pay", "v" * 64)
    assert "page" not in mark and len(mark) == 64
    assert mark != withheld_mark("page/hr/pay", "w" * 64)


def test_a_kind_declared_in_front_matter_is_the_kind_a_rule_judges() -> None:
    from shared.readscope import content_matters, may_read_entry

    scope = read_scope([rule("deny", "editor", "*", kinds=["guardrail"])], ALICE)
    # a guardrail kept in a notes folder is a guardrail (shared/kinds.py)
    assert not may_read_entry(scope, "notes/ci", {"meta": {"kind": "guardrail"}})
    assert may_read_entry(scope, "notes/ci", {"meta": {}})
    assert not may_read_entry(scope, "guardrail/x", {})
    assert content_matters(scope, "notes/ci")


def test_kinds_are_judged_under_the_folder_mapping_and_it_counts_in_the_fingerprint() -> None:
    from shared.readscope import may_read_entry, scope_of_head

    hr = [rule("deny", "viewer", "*", kinds=["hr"])]
    mapped = read_scope(hr, VIEWER, {"HR": "hr"})
    assert not may_read(mapped, "HR/salary") and may_read(read_scope(hr, VIEWER), "HR/salary")
    assert not may_read(mapped, "HR/2026/bands")  # the longest mapped folder holds it
    assert may_read_entry(mapped, "HR/open", {"meta": {"kind": "page"}})  # front matter wins
    assert mapped.narrowed(["HR/*"]).mapping == {"HR": "hr"}
    # a remap changes the fingerprint only where a rule names kinds (no needless snapshot)
    assert mapped.fingerprint != read_scope(hr, VIEWER).fingerprint
    head_rules = [r.to_dict() for r in mapped.rules]  # as the head carries them
    assert mapped.fingerprint == scope_of_head(head_rules, (), {"HR": "hr"}).fingerprint
    plain = [rule("deny", "viewer", "page/hr/*")]
    assert (read_scope(plain, VIEWER, {"HR": "hr"}).fingerprint
            == read_scope(plain, VIEWER).fingerprint)
