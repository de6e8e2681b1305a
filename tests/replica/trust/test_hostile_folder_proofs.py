"""The hostile hub suite for partial replicas (replica/trust/completeness.py,
shared/folderproof.py; decisions.md D143): the REAL hub behind a lying wrapper
(tests/kit/hostile.py). A reader scoped to ``projects/alpha/*`` plus ``guardrail/*`` (read
rules: the hub sends it nothing else) receives a snapshot and the folder proof; the wrapper
rewrites what is not signed, and every attack is refused with the reason it names:

- a guardrail of the scope omitted (its element moved into the withheld sums, so the state
  root alone still adds up: the attack D142's lattices cannot see);
- an extra entry in the scope;
- an entry from outside the scope;
- a stale proof (built at an earlier head, served with the fresh one);
- a proof for a different root (another space's, relabelled with this tree).

The honest answer verifies. The wrapper holds no hub key: the signed head (and its
``tree``) is the hub's own, over this replica's nonce.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from replica.trust import completeness
from replica.trust.verify import new_nonce
from shared.canonical import canonical_str
from shared.entry import Entry, make_entry
from shared.errors import HubUnverified
from tests.kit.hostile import Hostile
from tests.kit.inproc import Local, Space

ONLY = ["projects/alpha/*", "guardrail/*"]
ENTRIES = [Entry(id="projects/alpha/plan", title="Plan", body="the plan\n"),
           Entry(id="projects/alpha/deep/notes", title="Notes", body="notes\n"),
           Entry(id="guardrail/no-force-push", title="No force push", body="never\n",
                 meta={"severity": "block"}),
           Entry(id="guardrail/keep-tests", title="Keep tests", body="always\n"),
           Entry(id="projects/beta/secret", title="Secret", body="beta\n"),
           Entry(id="hr/salaries", title="Salaries", body="pay\n"),
           Entry(id="README", title="Readme", body="hello\n")]


def _rule(space: Space, who: str, effect: str, entries: str) -> None:
    space.admin.admin_post(f"/v1/spaces/{space.id}/rules", {
        "effect": effect, "who": who, "actions": ["read"], "entries": entries})


@pytest.fixture(scope="module")
def world(inproc_hub, tmp_path_factory):
    """``a``: a member whose read rules give it exactly ``ONLY`` (behind the wrapper);
    ``b``: an honest member who publishes everything. One space for the module: each
    attack only rewrites answers (and the stale one publishes one more guardrail)."""
    space = inproc_hub.space()
    root = tmp_path_factory.mktemp("folder-proofs")
    b = space.replica(root, "b")
    for e in ENTRIES:
        b.write(e)
    b.sync()
    a = space.replica(root, "a", wrap=Hostile)
    _rule(space, a.device.user_id, "deny", "*")
    for glob in ONLY:
        _rule(space, a.device.user_id, "allow", glob)
    yield a, b, a.transport
    a.close()
    b.close()
    space.close()


@pytest.fixture
def scoped(world):
    yield world
    world[2].hooks.clear()  # the next attack starts from an honest hub


def _receive(a: Local) -> tuple[Any, list[tuple[str, str]], Any]:
    """What the partial replica receives: the snapshot's entries and the proof with its
    signed head (over a nonce of its own)."""
    lines = a.client.snapshot(a.space.id)
    next(lines)
    held = [(e.id, e.version) for e, _seq in lines]  # type: ignore[misc]
    signed, proof = a.client.folder_proof(a.space.id, ONLY, new_nonce())
    return signed, held, proof


def _check(a: Local) -> None:
    signed, held, proof = _receive(a)
    completeness.check(signed, ONLY, held, proof, "clone")


def _refused(a: Local, reason: str) -> None:
    with pytest.raises(HubUnverified) as info:
        _check(a)
    assert info.value.details.get("reason") == reason, repr(info.value)


def _entry_line(e: Entry, seq: int) -> dict[str, Any]:
    made = make_entry({"id": e.id, "title": e.title, "body": e.body, "tags": list(e.tags),
                       "links": list(e.links), "meta": e.meta})
    return {"entry": made.to_dict(), "version": made.version, "seq": seq}


def _lines(fn: Callable[[list[dict[str, Any]]], list[dict[str, Any]]]
           ) -> Callable[[list[dict[str, Any]]], list[Any]]:
    def rewrite(lines: list[dict[str, Any]]) -> list[Any]:
        head, entries, end = lines[0], lines[1:-1], lines[-1]
        out = fn(entries)
        return [head, *out, dict(end, end=dict(end["end"], count=len(out)))]
    return rewrite


def test_the_honest_answer_verifies(scoped) -> None:
    a, _b, _hostile = scoped
    signed, held, proof = _receive(a)
    ids = {i for i, _ in held}
    assert ids >= {"projects/alpha/plan", "projects/alpha/deep/notes",
                   "guardrail/no-force-push", "guardrail/keep-tests"}
    assert all(i.startswith(("projects/alpha/", "guardrail/")) for i in ids)
    completeness.check(signed, ONLY, held, proof, "clone")
    text = canonical_str(proof)
    for hidden in ("beta", "secret", "hr", "salaries", "README"):
        assert hidden not in text


def test_an_omitted_guardrail_in_scope_is_refused(scoped) -> None:
    a, _b, hostile = scoped
    hostile.on_lines("snapshot", _lines(lambda es: [
        x for x in es if x["entry"]["id"] != "guardrail/no-force-push"]))
    _refused(a, "incomplete")


def test_an_extra_entry_in_scope_is_refused(scoped) -> None:
    a, _b, hostile = scoped
    extra = Entry(id="guardrail/planted", title="Planted", body="obey me\n")
    hostile.on_lines("snapshot", _lines(lambda es: [*es, _entry_line(extra, 1)]))
    _refused(a, "incomplete")


def test_an_altered_entry_in_scope_is_refused(scoped) -> None:
    a, _b, hostile = scoped
    softer = Entry(id="guardrail/no-force-push", title="No force push",
                   body="unless in a hurry\n", meta={"severity": "info"})
    hostile.on_lines("snapshot", _lines(lambda es: [
        _entry_line(softer, x["seq"]) if x["entry"]["id"] == softer.id else x for x in es]))
    _refused(a, "incomplete")


def test_an_entry_from_outside_the_scope_is_refused(scoped) -> None:
    a, _b, hostile = scoped
    outside = next(e for e in ENTRIES if e.id == "hr/salaries")
    hostile.on_lines("snapshot", _lines(lambda es: [*es, _entry_line(outside, 1)]))
    _refused(a, "out_of_scope")


def test_a_stale_proof_is_refused(scoped) -> None:
    a, b, hostile = scoped
    old = _receive(a)[2]
    b.write(Entry(id="guardrail/new-rule", title="New rule", body="new\n"))
    b.sync()
    assert _receive(a)[2] != old
    # the fresh head, with the proof of the head before: and the entries of before
    hostile.on_json("proof", lambda doc: dict(doc, proof=old))
    hostile.on_lines("snapshot", _lines(lambda es: [
        x for x in es if x["entry"]["id"] != "guardrail/new-rule"]))
    _refused(a, "stale_proof")
    hostile.hooks.clear()  # the same, relabelled with the fresh tree: it proves the old set
    hostile.on_json("proof", lambda doc: dict(doc, proof=dict(old, tree=doc["head"]["tree"])))
    hostile.on_lines("snapshot", _lines(lambda es: [
        x for x in es if x["entry"]["id"] != "guardrail/new-rule"]))
    _refused(a, "incomplete")


def test_a_proof_for_a_different_root_is_refused(scoped, inproc_hub, tmp_path) -> None:
    a, _b, hostile = scoped
    other = inproc_hub.space()
    try:
        c = other.replica(tmp_path, "c")
        for e in ENTRIES[:4]:
            c.write(e)
        c.sync()
        foreign = c.client.folder_proof(other.id, ONLY, new_nonce())[1]
        c.close()
    finally:
        other.close()
    # another space's proof, relabelled with this head's tree: it proves another set
    hostile.on_json("proof", lambda doc: dict(doc, proof=dict(foreign,
                                                              tree=doc["head"]["tree"])))
    hostile.on_lines("snapshot", _lines(lambda es: [
        x for x in es if x["entry"]["id"] != "guardrail/keep-tests"]))
    _refused(a, "incomplete")


def test_a_head_without_a_tree_or_no_proof_is_refused(scoped) -> None:
    a, _b, hostile = scoped
    hostile.on_json("proof", lambda doc: dict(doc, proof=None))
    _refused(a, "incomplete")
