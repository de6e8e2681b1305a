"""The folder tree root and its completeness proofs (shared/foldertree.py,
shared/folderproof.py): random trees and random folder scopes verify; any single change to
the entries held or to the proof is refused."""

from __future__ import annotations

import copy
import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from shared import folderproof as fp
from shared import foldertree as ft
from shared.errors import HubUnverified

FOLDERS = ["", "a", "a/b", "a/b/c", "a/d", "e", "e/f", "guardrail", "guardrail/old"]
NAMES = ["x", "y", "z", "w"]


def _proof(entries: dict[str, str], scope: fp.Scope) -> tuple[str, dict]:
    nodes = ft.tree_of(entries.items())
    root = nodes[ft.TOP].digest.hex()
    return root, fp.build(nodes, scope, root)


def _held(entries: dict[str, str], scope: fp.Scope) -> list[tuple[str, str]]:
    return [(k, v) for k, v in entries.items() if scope.holds(k)]


entry_sets = st.dictionaries(
    st.tuples(st.sampled_from(FOLDERS), st.sampled_from(NAMES)).map(
        lambda t: f"{t[0]}/{t[1]}" if t[0] else t[1]),
    st.sampled_from(["v1", "v2", "v3"]), max_size=14)
# folders held whole (what a glob names) and folders whose direct entries are held
scopes = st.tuples(st.lists(st.sampled_from(FOLDERS), max_size=2),
                   st.lists(st.sampled_from(FOLDERS), max_size=2)).filter(
    lambda t: bool(t[0] or t[1])).map(lambda t: fp.scope_of(*t))


def test_incremental_root_equals_the_root_from_scratch() -> None:
    rng = random.Random(7)
    live: dict[str, str] = {}
    nodes: dict[str, ft.Node] = {}
    for _ in range(300):
        eid = f"{rng.choice(FOLDERS)}/{rng.choice(NAMES)}".lstrip("/")
        new = None if rng.random() < 0.3 else rng.choice(["v1", "v2"])
        old = live.get(eid)
        write, gone, root = ft.advance(nodes, [(eid, old, new)])
        nodes.update(write)
        for g in gone:
            del nodes[g]
        if new is None:
            live.pop(eid, None)
        else:
            live[eid] = new
        assert root.hex() == ft.root_of_entries(live.items())
        assert nodes == ft.tree_of(live.items())  # empty folders leave the tree


@settings(max_examples=80, deadline=None)
@given(entry_sets, scopes)
def test_random_trees_and_scopes_verify(entries: dict[str, str], scope: fp.Scope) -> None:
    root, proof = _proof(entries, scope)
    fp.verify(root, scope, _held(entries, scope), proof)


def _mutations(entries: dict[str, str], scope: fp.Scope, proof: dict):
    held = _held(entries, scope)
    for i in range(len(held)):  # an entry omitted
        yield "omit", held[:i] + held[i + 1:], proof
        eid, v = held[i]  # an entry altered
        yield "alter", held[:i] + [(eid, v + "x")] + held[i + 1:], proof
    for f in sorted(scope.direct | scope.subtrees):  # an entry added in scope
        extra = f"{f}/added" if f else "added"
        if extra not in entries:
            yield "add", held + [(extra, "v1")], proof
    outside = [(k, v) for k, v in entries.items() if not scope.holds(k)]
    if outside:  # an entry from outside the scope
        yield "outside", held + outside[:1], proof
    for f, doc in proof["folders"].items():
        for j, (n, d) in enumerate(doc["children"]):
            p = copy.deepcopy(proof)  # a child's digest changed, or the child dropped
            p["folders"][f]["children"][j] = [n, ("0" if d[0] != "0" else "1") + d[1:]]
            yield "child digest", held, p
            p = copy.deepcopy(proof)
            del p["folders"][f]["children"][j]
            yield "child dropped", held, p
        if "count" in doc:
            p = copy.deepcopy(proof)
            p["folders"][f]["count"] += 1
            yield "count", held, p
            p = copy.deepcopy(proof)
            p["folders"][f]["entries"] = ft.EMPTY_ENTRIES.hex() \
                if doc["entries"] != ft.EMPTY_ENTRIES.hex() else "00" * 32
            yield "entries digest", held, p


@settings(max_examples=80, deadline=None)
@given(entry_sets, scopes)
def test_any_single_mutation_is_refused(entries: dict[str, str], scope: fp.Scope) -> None:
    root, proof = _proof(entries, scope)
    for what, held, p in _mutations(entries, scope, proof):
        with pytest.raises(HubUnverified):
            fp.verify(root, scope, held, p)
            pytest.fail(f"accepted a mutation: {what}")


def _space() -> dict[str, str]:
    return {"projects/alpha/plan": "v1", "projects/alpha/deep/notes": "v1",
            "projects/beta/secret": "v1", "guardrail/no-force-push": "v1",
            "guardrail/archived/retired": "v1", "hr/salaries": "v1", "README": "v1"}


def test_a_withheld_entry_moved_into_a_sibling_folder_is_refused() -> None:
    """A hub that hides an in-scope guardrail by listing a second ``guardrail`` child (the
    same name hash) holding it: the name hashes must be unique."""
    space = _space()
    scope = fp.scope_of(["projects/alpha"], ["guardrail"])
    root, proof = _proof(space, scope)
    held = [h for h in _held(space, scope) if h[0] != "guardrail/no-force-push"]
    forged = dict(space)
    del forged["guardrail/no-force-push"]
    _, p = _proof(forged, scope)
    hidden = ft.tree_of({"guardrail/no-force-push": "v1"}.items())["guardrail"]
    p["folders"][""]["children"].append([ft.name_hash("guardrail").hex(),
                                         hidden.digest.hex()])
    p["tree"] = root
    with pytest.raises(HubUnverified) as e:
        fp.verify(root, scope, held, p)
    assert e.value.details["reason"] == "incomplete"


def test_a_proof_reveals_no_name_outside_the_scope() -> None:
    space = _space()
    scope = fp.scope_of(["projects/alpha"], ["guardrail"])  # guardrail/archived: out
    _, proof = _proof(space, scope)
    text = repr(proof)
    for hidden in ("beta", "secret", "hr", "salaries", "archived", "retired", "README"):
        assert hidden not in text
    assert set(proof["folders"]) == {"", "projects", "guardrail"}
    assert proof["folders"][""]["count"] == 1  # README: counted, not named


@pytest.mark.parametrize("pats", [["projects/*.md"], ["kind:guardrail"], ["a/b"], [],
                                  ["a/**/b/*"], ["../**"]])
def test_what_is_not_a_folder_scope_cannot_be_proved(pats: list[str]) -> None:
    assert fp.parse_scope(pats) is None


def test_folder_globs_are_read_as_fnmatch_reads_them() -> None:
    """``*`` crosses folders in read rules and ``--only``: ``guardrail/*`` is the folder and
    all under it, so the proof's scope is the set the replica holds."""
    assert fp.parse_scope(["guardrail/*"]) == fp.scope_of(["guardrail"], [])
    assert fp.parse_scope(["a/**", "a/b/*"]) == fp.scope_of(["a"], [])
    assert fp.parse_scope(["*"]) == fp.scope_of([""], [])
    scope = fp.parse_scope(["guardrail/*"])
    assert scope is not None and scope.holds("guardrail/archived/retired")


def test_empty_tree_root() -> None:
    assert ft.root_of_entries([]) == ft.EMPTY_ROOT


def test_a_partial_replicas_other_globs_are_served_not_proved() -> None:
    """``projects/alpha/*`` with ``page/guide``: the folder is proved, the single entry is
    left out of the check; an entry matching no glob is still refused."""
    from replica.trust import completeness
    from shared.signed import SignedHead

    space = _space() | {"page/guide": "v1"}
    scope, rest = fp.provable_part(["projects/alpha/*", "page/guide"])
    assert scope == fp.scope_of(["projects/alpha"], []) and rest == ("page/guide",)
    root, proof = _proof(space, scope)
    head = SignedHead("s", "e", 1, "0" * 64, "0" * 64, 0, None, {}, tree=root)
    held = [(k, v) for k, v in space.items() if k.startswith("projects/alpha/")]
    completeness.check(head, ["projects/alpha/*", "page/guide"], held + [("page/guide", "v1")],
                       proof, "pull")
    with pytest.raises(HubUnverified):
        completeness.check(head, ["projects/alpha/*", "page/guide"], held[1:], proof, "pull")
    with pytest.raises(HubUnverified):
        completeness.check(head, ["projects/alpha/*", "page/guide"],
                           held + [("hr/salaries", "v1")], proof, "pull")
    assert fp.provable_part(["page/guide"]) == (None, ("page/guide",))
