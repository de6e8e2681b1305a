"""Tables for the pure parts of "any Markdown path is an entry" (docs/decisions.md D132,
D139): the effective kind (shared/kinds.py), the typed rules judged on it
(shared/policy.py ``change_of``), and portable names (shared/ids.py, shared/names.py)."""

from __future__ import annotations

import unicodedata

import pytest

from shared import policy
from shared.entry import make_entry
from shared.ids import MAX_ID, entry_id_problem, portability_problem
from shared.kinds import effective_kind, folder_kind
from shared.names import (
    COLLISION,
    INVALID,
    NON_PORTABLE,
    collisions,
    fold,
    name_problem,
    portable_name,
)

KINDS = [
    # (id, meta, folders, kind)
    ("guardrail/prod", {}, None, "guardrail"),  # the first layout: unchanged
    ("skill/k8s/rollback", {}, None, "skill"),
    ("note/2024.01.02", {}, None, "note"),
    ("page/deploy", {}, None, "page"),
    ("README", {}, None, "page"),  # a root file
    ("Meeting Notes/Release Plan", {}, None, "page"),  # not a kind word
    ("Skills/deploy", {}, None, "page"),  # capitalised: not a kind word
    ("Skills/deploy", {}, {"Skills": "skill"}, "skill"),  # the space's mapping
    ("Team/Ops/Rules/x", {}, {"Team/Ops": "page", "Team/Ops/Rules": "guardrail"}, "guardrail"),
    ("Policies/no-force-push", {"kind": "guardrail"}, None, "guardrail"),  # front matter
    ("Policies/no-force-push", {"kind": "Guardrail "}, None, "guardrail"),  # any case
    ("guardrail/x", {"kind": "page"}, None, "page"),  # front matter wins over the folder
    ("guardrail/x", {"kind": "Meeting note"}, None, "guardrail"),  # not a kind word: folder
    ("guardrail/x", {"kind": 3}, None, "guardrail"),
]


@pytest.mark.parametrize("eid,meta,folders,kind", KINDS)
def test_the_effective_kind(eid: str, meta: dict, folders: dict | None, kind: str) -> None:
    assert effective_kind(eid, meta, folders) == kind
    if not meta:
        assert folder_kind(eid, folders) == kind
    assert make_entry({"id": eid, "meta": meta}).kind == effective_kind(eid, meta)


def _e(eid: str, body: str = "x\n", **meta: object) -> object:
    return make_entry({"id": eid, "title": "t", "body": body, "meta": meta})


G = "guardrail"
# (before, after, current deleted?, weakens, kind judged)
CHANGES = [
    # a guardrail by front matter, anywhere: additive
    (_e("Rules/a", kind=G, severity="warn"), _e("Rules/a", kind=G, severity="block"), False,
     False, G),
    (_e("Rules/a", kind=G, severity="warn"), _e("Rules/a", kind=G, severity="info"), False,
     True, G),
    (_e("Rules/a", kind=G), _e("Rules/a", "other\n", kind=G), False, True, G),
    # the kind line removed or changed: a change of a guardrail, weakening it
    (_e("Rules/a", kind=G), _e("Rules/a"), False, True, G),
    (_e("guardrail/a"), _e("guardrail/a", kind="page"), False, True, G),
    (_e("guardrail/a"), _e("guardrail/a", kind="skill"), False, True, G),
    # a kind line saying what the folder says: nothing changes
    (_e("guardrail/a", severity="warn"), _e("guardrail/a", kind="Guardrail", severity="warn"),
     False, False, G),
    # a page made a guardrail: a guardrail added
    (_e("Notes/a"), _e("Notes/a", kind=G), False, False, G),
    # a guardrail re-created where a tombstone stands: weakens (the deleted text is unknown)
    (None, _e("Rules/a", kind=G), True, True, G),
    # pages stay pages, judged with their kind for the rules' globs
    (_e("Notes/a"), _e("Notes/a", "y\n"), False, False, "page"),
    (_e("Skills/a", kind="skill"), _e("Skills/a", "y\n", kind="skill"), False, False, "skill"),
]


@pytest.mark.parametrize("before,after,tomb,weakens,kind", CHANGES)
def test_changes_are_judged_on_the_kind_of_both_versions(before, after, tomb, weakens,
                                                         kind) -> None:
    current = ("0" * 64, True) if tomb else (before.version, False)
    c = policy.change_of(after.id, after, current, before)
    assert c is not None and c.weakens is weakens and c.kind == kind, c


def test_deleting_a_guardrail_kept_by_front_matter_weakens_it() -> None:
    from shared.entry import tombstone

    g = _e("Rules/a", kind=G, severity="block")
    c = policy.change_of("Rules/a", tombstone("Rules/a"), (g.version, False), g)
    assert c is not None and c.weakens and c.action == "delete" and c.kind == G


def test_a_kind_glob_covers_that_kind_in_any_folder() -> None:
    rule = policy.Rule("r", "deny", "editor", ("update",), "guardrail/*")
    assert policy.matches(rule, policy.Change("Rules/a", "update", kind=G))
    assert policy.matches(rule, policy.Change("guardrail/a", "update", kind=G))
    assert not policy.matches(rule, policy.Change("Rules/a", "update", kind="page"))
    assert not policy.matches(rule, policy.Change("Rules/a", "update"))  # kind not known
    default = policy.DEFAULT_RULES[0]
    assert policy.matches(default, policy.Change("Rules/a", "update", True, kind=G))


def test_guardrail_keys_keep_the_slug_in_guardrail_and_the_id_elsewhere() -> None:
    assert policy.guardrail_key(_e("guardrail/prod")) == "prod"
    assert policy.guardrail_key(_e("Rules/prod", kind=G)) == "Rules/prod"
    assert policy.guardrail_key(_e("Rules/prod", kind=G, key="prod")) == "prod"
    assert policy.guardrail_key(_e("guardrail/prod", kind="page")) is None


VALID = ["page/deploy", "README", "Meeting Notes/Release Plan", "café-notes", "Page/X",
         "日本語/メモ", "a/b.c/d", "x" * MAX_ID]
INVALID_IDS = ["", "/abs", "a/", "a//b", "../x", "a/./b", ".obsidian/x", "a/.hidden",
               "a\\b", "a\x00b", "tab\there", "x.md", "a/b.tmp", "x" * (MAX_ID + 1),
               unicodedata.normalize("NFD", "café"), "bad\udcffname"]


@pytest.mark.parametrize("eid", VALID)
def test_paths_people_use_are_ids(eid: str) -> None:
    assert entry_id_problem(eid) is None and portability_problem(eid) is None
    assert name_problem(eid) is None


@pytest.mark.parametrize("eid", INVALID_IDS)
def test_what_cannot_be_an_id_is_refused_with_a_name_that_would_do(eid: str) -> None:
    p = name_problem(eid)
    assert p is not None and p.code == INVALID
    if eid.strip("/.") and "\x00" not in eid:
        assert p.suggested is not None and name_problem(p.suggested) is None, p


@pytest.mark.parametrize("eid,suggested", [
    ("Notes/CON", "Notes/CON_"), ("Notes/nul.txt", "Notes/nul_.txt"), ("Com1/x", "Com1_/x"),
    ("Notes/plan.", "Notes/plan"), ("Notes/plan ", "Notes/plan"), ("Notes/a:b?", "Notes/a-b-"),
    ('Q&A/"why"', "Q&A/-why-"), ("Notes/" + "é" * 130, "Notes/" + "é" * 126),
])
def test_names_windows_refuses_get_a_portable_suggestion(eid: str, suggested: str) -> None:
    p = name_problem(eid)
    assert p is not None and p.code == NON_PORTABLE, p
    assert p.suggested == suggested == portable_name(eid)


def test_fold_is_case_and_normalization_blind() -> None:
    assert fold("Notes/Café") == fold("notes/café") == fold(
        unicodedata.normalize("NFD", "notes/CAFÉ"))
    assert fold("Straße") == fold("STRASSE")
    assert fold("page/a") == "page/a"


def test_collisions_by_case_normalization_and_folder() -> None:
    live = ["Notes/Plan", "Projects/x", "page/deploy"]
    hit = collisions(["notes/plan", "projects/y", "page/other", "Page/deploy2", "NOTES/PLAN"],
                     live)
    assert set(hit) == {"notes/plan", "NOTES/PLAN", "projects/y", "Page/deploy2"}
    assert all(p.code == COLLISION for p in hit.values())
    assert hit["notes/plan"].other == "Notes/Plan"
    assert hit["projects/y"].other == "Projects" and hit["projects/y"].suggested == "Projects/y"
    assert hit["notes/plan"].suggested == "Notes/plan 2"
    # among new names: the first (sorted) stands, the second is refused
    hit = collisions(["b/Café", "b/cafe\u0301"], [])
    assert list(hit) == ["b/cafe\u0301"] and hit["b/cafe\u0301"].other == "b/Café"
    # a rename by case alone: the old name is not live any more (the caller leaves it out)
    assert collisions(["Notes/plan"], ["Projects/x"]) == {}


def test_collisions_with_accents_and_folds_that_change_length() -> None:
    hit = collisions(["NOTES/CAFÉ", "Straße/x", "ok/new"], ["Notes/café", "STRASSE/y", "ok/a"])
    assert {k: p.other for k, p in hit.items()} == {"NOTES/CAFÉ": "Notes/café",
                                                    "Straße/x": "STRASSE"}


def test_a_name_in_another_encoding_gets_its_likely_utf8_name() -> None:
    latin1 = b"page/caf\xe9".decode("utf-8", "surrogateescape")  # as os.listdir gives it
    p = name_problem(latin1)
    assert p is not None and p.code == INVALID and "UTF-8" in p.reason
    assert p.suggested == "page/café"
