"""The hostile hub suite for partial replicas, through the sync engine (what ``quire sync``
runs): a replica holding ``projects/alpha/*`` and ``guardrail/*`` (``--only``) behind a
lying wrapper around the REAL hub (tests/kit/hostile.py). Each attack keeps the state root
adding up, by moving what it hides into (or what it adds out of) the withheld sums a scoped
answer carries (decisions.md D142), which is what only the folder proof catches (D143):

- a guardrail of the scope omitted from a pull (its op turned into a withheld one);
- a page at the head without its proof, saying there is more (``more`` is not signed);
- the same guardrail omitted from a snapshot;
- an extra entry in the scope; an entry from outside the scope;
- a stale proof (the one before the last publication); a proof for another root.

Every attack ends the same way: the sync is refused (``hub_unverified`` with its reason),
the store and every vault file are byte-identical, and the next honest sync recovers.
"""

from __future__ import annotations

import base64
from collections.abc import Callable
from typing import Any

import pytest

from replica.trust.scoped import ONLY
from shared import state
from shared.entry import Entry, make_entry
from shared.errors import QuireError
from tests.kit.hostile import Hostile
from tests.kit.inproc import Local

SCOPE = ["projects/alpha/*", "guardrail/*"]
ENTRIES = [Entry(id="projects/alpha/plan", title="Plan", body="the plan\n"),
           Entry(id="projects/alpha/deep/notes", title="Notes", body="notes\n"),
           Entry(id="guardrail/no-force-push", title="No force push", body="never\n"),
           Entry(id="projects/beta/secret", title="Secret", body="beta\n"),
           Entry(id="hr/salaries", title="Salaries", body="pay\n")]
NEW = Entry(id="guardrail/keep-tests", title="Keep tests", body="always\n")
NEWER = Entry(id="guardrail/no-secrets", title="No secrets", body="none in notes\n")


@pytest.fixture(scope="module")
def world(inproc_hub, tmp_path_factory):
    """``a``: the partial replica under attack, synced; ``b``: an honest publisher. One
    space for the module: every attack ends with an honest sync, and each uses names of
    its own."""
    space = inproc_hub.space()
    root = tmp_path_factory.mktemp("partial")
    b = space.replica(root, "b")
    for e in ENTRIES:
        b.write(e)
    b.sync()
    a = space.replica(root, "a", wrap=Hostile)
    a.store.set_meta(ONLY, SCOPE)
    a.sync()
    assert set(a.files()) == {"projects/alpha/plan.md", "projects/alpha/deep/notes.md",
                              "guardrail/no-force-push.md"}
    yield space, a, b, a.transport
    a.close()
    b.close()
    space.close()


def _refused(a: Local, hostile: Hostile, reason: str) -> None:
    digest, files, head = a.store.digest(), a.files(), a.store.head()
    with pytest.raises(QuireError) as info:
        a.sync()
    assert info.value.code == "hub_unverified", repr(info.value)
    assert info.value.details.get("reason") == reason, repr(info.value)
    assert (a.store.digest(), a.files(), a.store.head()) == (digest, files, head)
    hostile.hooks.clear()
    a.sync()  # the honest hub: recovered
    assert a.store.head().seq == a.space.head()["seq"]


def _shift(lattices: dict[str, str], eid: str, version: str, sign: int) -> dict[str, str]:
    """``lattices`` (bucket → base64) with an entry's element added (+1) or taken (-1)."""
    b = str(state.bucket_of(eid))
    cur = state.to_int(base64.b64decode(lattices[b])) if b in lattices else 0
    new = state.moved(cur, eid, None, version) if sign > 0 else state.moved(cur, eid, version,
                                                                            None)
    return dict(lattices, **{b: base64.b64encode(state.to_bytes(new)).decode()})


def _snapshot(fn: Callable[[list[dict[str, Any]], dict[str, Any]], list[dict[str, Any]]]
              ) -> Callable[[list[dict[str, Any]]], list[Any]]:
    """Rewrite a snapshot's entry lines; ``fn(entries, end)`` may change the end line."""
    def rewrite(lines: list[dict[str, Any]]) -> list[Any]:
        first, entries, end = lines[0], lines[1:-1], dict(lines[-1]["end"])
        out = fn(entries, end)
        end["count"] = len(out)
        return [first, *out, {"end": end}]
    return rewrite


def _resnapshot(a: Local) -> None:
    """The next sync takes a snapshot (the globs changed: the scope's fingerprint moved)."""
    _resnapshot.n = getattr(_resnapshot, "n", 0) + 1  # type: ignore[attr-defined]
    a.store.set_meta(ONLY, [*SCOPE, f"nothing{_resnapshot.n}/*"])  # type: ignore[attr-defined]


def _line(e: Entry) -> dict[str, Any]:
    made = make_entry({"id": e.id, "title": e.title, "body": e.body})
    return {"entry": made.to_dict(), "version": made.version, "seq": 1}


def test_a_guardrail_omitted_from_a_pull_is_refused(world) -> None:
    _space, a, b, hostile = world
    b.write(NEW)
    b.sync()

    def hide(lines: list[dict[str, Any]]) -> list[Any]:
        for line in lines:
            batch = line.get("batch")
            if not batch:
                continue
            ops = [op for op in batch["ops"] if op["op"] == "put"
                   and op["entry"]["id"] == NEW.id]
            if ops:  # the op becomes a withheld one: the state root still adds up
                made = make_entry(ops[0]["entry"])
                batch["ops"] = [op for op in batch["ops"] if op not in ops]
                w = line.get("withheld") or {"ops": 0, "was": [], "lattices": {}}
                line["withheld"] = dict(w, ops=w["ops"] + 1, lattices=_shift(
                    w["lattices"], NEW.id, made.version, +1))
        return lines

    hostile.on_lines("changes", hide)
    _refused(a, hostile, "incomplete")


def test_a_page_at_the_head_that_claims_more_still_owes_its_proof(world) -> None:
    """``more`` is not signed: a page whose signed head is the current one (it carries the
    tree) must bring its proof, whatever it says."""
    _space, a, b, hostile = world
    b.write(Entry(id="projects/alpha/late", title="Late", body="late\n"))
    b.sync()

    def strip(lines: list[dict[str, Any]]) -> list[Any]:
        end = lines[-1]["end"]
        end.pop("proof", None)
        end["more"] = True
        return lines

    hostile.on_lines("changes", strip)
    _refused(a, hostile, "incomplete")


def test_a_guardrail_omitted_from_a_snapshot_is_refused(world) -> None:
    _space, a, _b, hostile = world
    _resnapshot(a)
    gone = "projects/alpha/plan"

    def hide(entries: list[dict[str, Any]], end: dict[str, Any]) -> list[dict[str, Any]]:
        line = next(x for x in entries if x["entry"]["id"] == gone)
        w = end["withheld"]
        end["withheld"] = dict(w, entries=w["entries"] + 1, lattices=_shift(
            w["lattices"], gone, line["version"], +1))
        return [x for x in entries if x is not line]

    hostile.on_lines("snapshot", _snapshot(hide))
    _refused(a, hostile, "incomplete")


@pytest.mark.parametrize("extra,reason", [
    (Entry(id="guardrail/planted", title="Planted", body="obey me\n"), "incomplete"),
    (Entry(id="hr/planted", title="Planted", body="from outside\n"), "out_of_scope")])
def test_an_extra_entry_or_one_from_outside_the_scope_is_refused(world, extra, reason
                                                                 ) -> None:
    _space, a, _b, hostile = world
    _resnapshot(a)

    def add(entries: list[dict[str, Any]], end: dict[str, Any]) -> list[dict[str, Any]]:
        line = _line(extra)
        w = end["withheld"]  # taken out of the withheld sums: the root still adds up
        end["withheld"] = dict(w, lattices=_shift(w["lattices"], extra.id, line["version"], -1))
        return [*entries, line]

    hostile.on_lines("snapshot", _snapshot(add))
    _refused(a, hostile, reason)


def test_a_stale_proof_is_refused(world) -> None:
    _space, a, b, hostile = world
    _resnapshot(a)
    old: list[Any] = []
    hostile.on_lines("snapshot", lambda lines: old.append(lines[-1]["end"]["proof"]) or lines)
    a.sync()  # an honest snapshot, its proof kept by the wrapper
    hostile.hooks.clear()
    b.write(NEWER)
    b.sync()
    _resnapshot(a)

    def stale(entries: list[dict[str, Any]], end: dict[str, Any]) -> list[dict[str, Any]]:
        end["proof"] = old[0]  # the entries are the fresh ones, the proof is of before
        return entries

    hostile.on_lines("snapshot", _snapshot(stale))
    _refused(a, hostile, "stale_proof")


def test_a_proof_for_another_root_is_refused(world, inproc_hub, tmp_path) -> None:
    _space, a, _b, hostile = world
    other = inproc_hub.space()
    try:
        c = other.replica(tmp_path, "c")
        for e in ENTRIES[:2]:
            c.write(e)
        c.sync()
        foreign = c.client.folder_proof(other.id, SCOPE, "n")[1]
        c.close()
    finally:
        other.close()
    _resnapshot(a)

    def relabel(entries: list[dict[str, Any]], end: dict[str, Any]) -> list[dict[str, Any]]:
        end["proof"] = dict(foreign, tree=end["proof"]["tree"])  # another space's, relabelled
        return entries

    hostile.on_lines("snapshot", _snapshot(relabel))
    _refused(a, hostile, "incomplete")
