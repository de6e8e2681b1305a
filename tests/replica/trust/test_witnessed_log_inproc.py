"""The space log and its witnesses (docs/architecture.md, "The log and its witnesses";
decisions.md D140), against hubs that lie WITH their key: the real hub app behind a wrapper
(tests/kit/hostile.py), or two copies of its database served by the real app with the same
key (a fork), and the real witness app (hub/witness/app.py) in-process.

Each attack is shown refused, and shown to be what the check stops: the honest case passes.
"""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx2
import pytest

from hub.witness.app import Witness, create_app
from hub.witness.state import WitnessState
from replica.cli.entry import main as entry_main
from replica.hubclient import witness as wclient
from replica.trust import logcheck
from shared import merkle, tlog
from shared.entry import Entry
from shared.errors import QuireError
from shared.ids import new_id
from shared.signing import new_private_key, public_b64
from tests.kit.hostile import Hostile, resign_head
from tests.kit.inproc import AppTransport, InprocHub

PAGE = Entry(id="page/deploy", title="Deploy", body="ship it\n")
A_EDIT = Entry(id="page/deploy", title="Deploy", body="ship it on fork A\n")
B_NEW = Entry(id="note/b", title="B", body="written on fork B\n")


class RunningWitness:
    """The real witness app, in-process, reachable by the replicas at ``url``."""

    def __init__(self, root: Path, name: str, url: str, mp: pytest.MonkeyPatch):
        self.key = new_private_key()
        self.w = Witness(self.key, name, WitnessState(root / f"{name}.db"))
        self.transport = AppTransport(create_app(self.w))
        self.url = url
        mp.setitem(wclient.TRANSPORTS, url, self.transport)

    def entry(self) -> dict[str, str]:
        return {"name": self.w.name, "key": public_b64(self.key), "url": self.url}

    def close(self) -> None:
        self.transport.shutdown()
        self.w.state.close()


@pytest.fixture
def w1(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[RunningWitness]:
    w = RunningWitness(tmp_path, "w1", "http://w1", monkeypatch)
    yield w
    w.close()


def _policy(space: Any, quorum: int, *witnesses: dict[str, str]) -> dict[str, Any]:
    out: dict[str, Any] = space.admin.admin_post(f"/v1/spaces/{space.id}/witnesses",
                                                 {"quorum": quorum, "witnesses": list(witnesses),
                                                  "reason": "test"})
    return out


def _kept(local: Any) -> tlog.Checkpoint | None:
    kept = local.store.get_meta(logcheck.KEPT)
    return None if kept is None else tlog.parse_checkpoint(tlog.parse_note(kept["note"]).body)


def _refused(local: Any, reason: str) -> QuireError:
    before = local.store.get_meta(logcheck.KEPT)
    with pytest.raises(QuireError) as info:
        local.sync()
    assert info.value.details.get("reason") == reason, repr(info.value)
    assert local.store.get_meta(logcheck.KEPT) == before  # nothing of it was kept
    return info.value


# ---------------------------------------------------------------- the fork


def _fork(hub: InprocHub, root: Path) -> AppTransport:
    """A second copy of the hub's database served by the real app with the same key."""
    from hub.app import create_app as hub_app
    from hub.settings import load_settings

    src = hub.root / "hub"
    dst = root / "fork" / "hub"
    shutil.copytree(Path(src), dst, ignore=shutil.ignore_patterns("*.db", "*.db-*", "*.lock"))
    for db in Path(src).glob("*.db"):
        with sqlite3.connect(db) as a, sqlite3.connect(dst / db.name) as b:
            a.backup(b)
    app = hub_app(load_settings(dst))
    return AppTransport(app)


@pytest.mark.parametrize("quorum", [
    1, pytest.param(0, marks=pytest.mark.skipif(
        not os.environ.get("QUIRE_LONG_E2E"), reason="the gossip variant: QUIRE_LONG_E2E=1"))])
def test_a_fork_is_never_accepted_by_the_second_replica_and_proven_offline(
        tmp_path: Path, w1: RunningWitness, quorum: int) -> None:
    """One witness listed: with a quorum of 1 the second fork's head is never co-signed,
    so never accepted; with a quorum of 0 (gossip only) the witness's refusal still reveals
    the fork at the first sync after it. Either way the replica reports ``equivocation``
    with both hub-signed checkpoints, which ``quire verify --evidence`` checks offline."""
    hub = InprocHub(tmp_path / "h")
    fork = None
    try:
        space = hub.space()
        _policy(space, quorum, w1.entry())
        a = space.replica(tmp_path, "a")
        b = space.replica(tmp_path, "b")
        a.write(PAGE)
        a.sync()
        b.sync()
        before = _kept(b)  # the policy's leaf, a's batch: co-signed
        assert before is not None and before.size == 2
        # the hub splits: fork 2 is a copy of its database, served with the same key
        fork = _fork(hub, tmp_path)
        b.close()
        b = b.reopen(wrap=lambda _t: fork)
        a.write(A_EDIT)
        a.sync()
        a.sync()  # fork 1 grew by a's batch and the witness co-signed it
        grown = _kept(a)
        assert grown is not None and grown.size == before.size + 1
        b.write(B_NEW)
        with pytest.raises(QuireError) as info:
            b.sync()  # fork 2 takes b's batch; the next look at its log is refused
            b.sync()
        assert info.value.details.get("reason") == "equivocation", repr(info.value)
        err = _refused(b, "equivocation")  # and every sync after it
        assert _kept(b) == before  # the second fork's head was never accepted
        assert b.read(B_NEW.id) is not None  # b's own change is kept
        # the evidence verifies offline, from the error as `quire sync --json` prints it
        ev = tmp_path / "evidence.json"
        ev.write_text(json.dumps({"error": {"code": err.code, "details": err.details}}))
        assert entry_main(["verify", "--evidence", str(ev)]) == 0
        other = tmp_path / "not-evidence.json"
        pair = err.details["evidence"]["checkpoints"]
        other.write_text(json.dumps({"checkpoints": [pair[0], pair[0]]}))
        assert entry_main(["verify", "--evidence", str(other)]) == 1
        # the witness holds both hub-signed checkpoints of one size: evidence
        conflict = w1.w.state.conflict(grown.origin)
        assert conflict is not None
        kept_cp = tlog.parse_checkpoint(tlog.parse_note(conflict[0]).body)
        other_cp = tlog.parse_checkpoint(tlog.parse_note(conflict[1]).body)
        assert kept_cp.size == other_cp.size and kept_cp.root != other_cp.root
        for text in conflict:
            assert tlog.hub_signed(tlog.parse_note(text), hub.public_key)
        # a, on the line the witness co-signed, is told too: at its first look at a log
        # that moved since, the witness's refusal carries the pair it caught
        a.write(Entry(id="page/more", title="More", body="more\n"))
        a.sync()  # published on the first copy (its pull saw nothing new)
        err = _refused(a, "equivocation")
        assert sorted(err.details["evidence"]["checkpoints"]) == sorted(conflict)
        b.close()
        a.close()
    finally:
        if fork is not None:
            fork.shutdown()
        hub.close()


def test_a_fork_at_different_sizes_is_proven_by_the_longer_history(
        space: Any, tmp_path: Path, w1: RunningWitness) -> None:
    """The witness co-signed the second copy's log at 3 entries; the first copy's grows to 4
    without anyone syncing at 3. The replica on it is refused with ``equivocation``: its
    hub's own consistency proof shows its first 3 entries have another root than the 3 the
    witness holds, and that verifies offline (a proof of the other root does not)."""
    from shared.wire import Op, build_batch

    fork = None
    try:
        _policy(space, 1, w1.entry())
        a, b = (space.replica(tmp_path, n) for n in "ab")
        a.write(PAGE)
        a.sync()
        for r in (b, a):
            r.sync()
        fork = _fork(space.hub, tmp_path)
        b = b.close() or b.reopen(wrap=lambda _t: fork)
        b.write(B_NEW)
        b.sync()
        b.sync()  # the witness holds the second copy's log of 3
        dev = space.device("pub")  # two batches on the first copy, no replica looks at 3
        with dev.client() as c:
            rid = c.register_replica(space.id, "pub")
            for i in range(2):
                h = c.head(space.id)
                c.push(space.id, build_batch(
                    dev.key, batch_id=new_id(), replica_id=rid, space=space.id,
                    epoch=h["epoch"], parent_seq=h["seq"], parent_digest=h["digest"],
                    ops=[Op(Entry(id=f"page/x{i}", title="x", body="x\n"), None)]))
        err = _refused(a, "equivocation")
        ev = err.details["evidence"]
        sizes = sorted(tlog.parse_checkpoint(tlog.parse_note(n).body).size
                       for n in ev["checkpoints"])
        assert sizes == [3, 4] and "consistency" in ev
        path = tmp_path / "evidence.json"
        path.write_text(json.dumps({"error": {"code": err.code, "details": err.details}}))
        assert entry_main(["verify", "--evidence", str(path)]) == 0
        # the same pair with the witness's own root as the prefix: one history, unproven
        held = tlog.parse_checkpoint(tlog.parse_note(ev["checkpoints"][0]).body)
        forged = dict(ev, consistency=dict(ev["consistency"], root=held.root.hex()))
        path.write_text(json.dumps(forged))
        assert entry_main(["verify", "--evidence", str(path)]) == 1
        path.write_text(json.dumps({"checkpoints": ev["checkpoints"]}))  # no proof
        assert entry_main(["verify", "--evidence", str(path)]) == 1
        a.close()
        b.close()
    finally:
        if fork is not None:
            fork.shutdown()


def _published(space: Any, epochs: list[str]) -> dict[tuple[str, str], int]:
    """How many times each version of each entry was published, over the epochs' batches."""
    count: dict[tuple[str, str], int] = {}
    for epoch in epochs:
        seq = 1
        while True:
            try:
                b = space.admin.admin_get(f"/v1/spaces/{space.id}/batch",
                                          {"seq": seq, "epoch": epoch})
            except QuireError:
                break
            for op in b["ops"]:
                count[(op["id"], op["version"])] = count.get((op["id"], op["version"]), 0) + 1
            seq += 1
    return count


def test_after_a_fork_recovery_every_change_of_either_history_is_there_exactly_once(
        space: Any, tmp_path: Path, w1: RunningWitness) -> None:
    """The hub splits into two copies with one key: b publishes on the second and c pulls
    it there (the witness co-signs that line first); a publishes on the first and is
    refused (equivocation). The owner recovers on the first copy with the evidence: a new
    epoch naming it, the witness released by the signed statement. Then b and c, pointed
    at the surviving hub, republish what they held from the other history (b's change,
    held by both: published once), a republishes nothing, and all three converge."""
    from replica.app import fork_recovery
    from shared.errors import InvalidRequest

    fork = None
    try:
        _policy(space, 1, w1.entry())
        a, b, c = (space.replica(tmp_path, n) for n in "abc")
        a.write(PAGE)
        a.sync()
        for r in (b, c, a):
            r.sync()  # each holds the log with a's batch, co-signed
        fork = _fork(space.hub, tmp_path)
        b, c = (r.reopen(wrap=lambda _t: fork) for r in (b.close() or b, c.close() or c))
        b.write(B_NEW)
        b.sync()
        b.sync()  # the second history, co-signed (the witness saw it first)
        c.sync()
        assert c.read(B_NEW.id) == B_NEW  # c holds b's change too
        a.write(A_EDIT)
        a.sync()  # published on the first copy
        with pytest.raises(QuireError) as info:
            a.sync()
        assert info.value.details.get("reason") == "equivocation"
        pair = info.value.details["evidence"]["checkpoints"]
        old_epoch = space.head()["epoch"]
        # evidence that proves nothing (one checkpoint twice) recovers nothing
        with pytest.raises(InvalidRequest):
            fork_recovery.recover(space.admin, space.id, "fork", [pair[0], pair[0]])
        assert space.head()["epoch"] == old_epoch
        preview = fork_recovery.recover(space.admin, space.id, "fork", pair, dry_run=True)
        assert preview["dry_run"] and space.head()["epoch"] == old_epoch  # nothing written
        # the owner recovers on the first copy: its history survives
        res = fork_recovery.recover(space.admin, space.id, "two histories", pair)
        assert res["witnesses"] == [{"name": "w1", "released": True}]
        assert w1.w.state.conflict(_kept(a).origin) is None  # type: ignore[union-attr]
        events = space.admin.audit(space.id)
        assert any(e.get("action") == "epoch.bump" and e.get("details", {}).get("forked")
                   for e in (events.get("events") if isinstance(events, dict) else events))
        b = b.close() or b.reopen(wrap=Hostile)  # the surviving hub
        c = c.close() or c.reopen(wrap=lambda t: t)
        # a recovery cannot shed the witnesses: its checkpoint naming no policy is refused
        key = space.hub.hub.key

        def no_policy(doc: dict[str, Any]) -> dict[str, Any]:
            cp = tlog.parse_checkpoint(tlog.parse_note(doc["checkpoint"]).body)
            note = tlog.sign_note(key.private, tlog.Checkpoint(cp.origin, cp.size, cp.root,
                                                               None).body())
            return resign_head(doc, key.private, checkpoint=note)

        b.transport.on_head(no_policy)
        _refused(b, "witness_policy")
        b.transport.hooks.clear()
        republished = {r.name: r.sync().republished for r in (b, c, a)}
        assert republished == {"b": [B_NEW.id], "c": [], "a": []}
        for r in (b, c, a):
            r.sync()
        for r in (a, b, c):
            assert r.read(B_NEW.id) == B_NEW and r.read(PAGE.id) == A_EDIT
        new_epoch = space.head()["epoch"]
        count = _published(space, [old_epoch, new_epoch])
        assert count[(B_NEW.id, B_NEW.version)] == 1
        assert count[(A_EDIT.id, A_EDIT.version)] == 1
        assert count[(PAGE.id, PAGE.version)] == 1
        # the surviving line is co-signed again, and a replayed release is refused
        kept = _kept(b)
        assert kept is not None and w1.w.state.held(kept.origin) is not None
        again = fork_recovery.release_all(space.admin, space.id, new_epoch, res["statement"])
        assert again[0]["released"] is False and "409" in again[0]["error"]
        with pytest.raises(wclient.WitnessRefused) as refused:  # no proof of the leaf
            wclient.release(w1.url, {"note": space.head()["checkpoint"],
                                     "statement": res["statement"], "leaf": {}})
        assert refused.value.status == 400
        for r in (a, b, c):
            r.close()
    finally:
        if fork is not None:
            fork.shutdown()


# ---------------------------------------------------------------- attacks on the replica


@pytest.fixture
def pair(space: Any, tmp_path: Path) -> Iterator[tuple[Any, Any]]:
    a = space.replica(tmp_path, "a", wrap=Hostile)
    b = space.replica(tmp_path, "b")
    b.write(PAGE)
    b.sync()
    a.sync()
    yield a, b
    a.close()
    b.close()


def test_the_log_is_kept_and_a_smaller_another_missing_or_foreign_checkpoint_refused(
        pair: tuple[Any, Any], space: Any) -> None:
    """Each sync checks the head's checkpoint against the one kept and keeps the new one;
    a hub holding its key then shows a smaller log, another log of the same size, no
    checkpoint, or one signed by another key: each refused, nothing of it kept."""
    a, b = pair
    first = _kept(a)
    assert first is not None and first.size >= 1
    old = space.head()
    b.write(A_EDIT)
    b.sync()
    a.sync()
    now = _kept(a)
    assert now is not None and now.size == first.size + 1
    assert tlog.parse_note(space.head()["checkpoint"]).body == now.body()
    hub = space.hub.hub.key
    cp = tlog.parse_checkpoint(tlog.parse_note(space.head()["checkpoint"]).body)
    attacks = {
        "log_rollback": old["checkpoint"],  # signed before, smaller
        "log_inconsistent": tlog.sign_note(hub.private, tlog.Checkpoint(
            cp.origin, cp.size, merkle.leaf_hash(b"another history"), cp.policy).body()),
        "log_unsigned": tlog.sign_note(new_private_key(), cp.body()),  # not the hub's key
        "log_missing": None,
    }
    for reason, note in attacks.items():
        def lie(doc: dict[str, Any], note: str | None = note) -> dict[str, Any]:
            doc = {k: v for k, v in doc.items() if k != "checkpoint"}
            return resign_head(doc, hub.private, **({} if note is None
                                                    else {"checkpoint": note}))

        a.transport.hooks.clear()
        a.transport.on_head(lie)
        _refused(a, reason)
    a.transport.hooks.clear()
    a.sync()  # the honest hub again: accepted (what each lie changed is what was refused)
    assert _kept(a) == now
    # the honest checkpoint, with a consistency proof made for another root
    b.write(B_NEW)
    b.sync()

    def other_proof(request: Any, forward: Any) -> Any:
        resp = forward()
        if not request.url.path.endswith("/log/consistency"):
            return resp
        doc = resp.json()
        m, n = doc["first"], doc["second"]
        other = merkle.tree_of([merkle.leaf_hash(bytes([i])) for i in range(n)])
        doc["proof"] = [h.hex() for h in other.consistency_proof(m, n)]
        return httpx2.Response(200, json=doc, request=request)

    a.transport.intercept("other", other_proof)
    _refused(a, "log_inconsistent")
    a.transport.hooks.clear()
    a.sync()
    assert _kept(a).size == now.size + 1  # type: ignore[union-attr]


# ---------------------------------------------------------------- witness attacks


def test_co_signatures_that_are_not_the_spaces_witnesses_are_refused(
        space: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, w1: RunningWitness
        ) -> None:
    """A co-signature made for another space's checkpoint or for another hub's, or by a
    witness key not on the space's list, counts for nothing."""
    other = space.hub.space()
    b = space.replica(tmp_path, "b")
    b.write(PAGE)
    b.sync()
    a = space.replica(tmp_path, "a")
    a.sync()  # no policy yet: nothing to co-sign
    impostor = RunningWitness(tmp_path, "w2", "http://w2", monkeypatch)
    try:
        _policy(space, 1, w1.entry())
        # w1's URL answers with the impostor's signature: a key not on the list
        monkeypatch.setitem(wclient.TRANSPORTS, "http://w1", impostor.transport)
        b.write(A_EDIT)
        with pytest.raises(QuireError):
            b.sync()
        err = _refused(a, "witness_quorum")
        assert err.details["cosigned"] == []
        # w1 itself, but its co-signature of another space's checkpoint
        other_note = other.admin.head(other.id)["checkpoint"]
        line = tlog.cosign(w1.key, w1.w.name, tlog.parse_note(other_note).body, 1)

        class Replay(httpx2.BaseTransport):
            def handle_request(self, request: Any) -> Any:
                return httpx2.Response(200, text=line, request=request)

        monkeypatch.setitem(wclient.TRANSPORTS, "http://w1", Replay())
        err = _refused(a, "witness_quorum")
        assert err.details["cosigned"] == []
        # w1 itself, but its co-signature of this log's checkpoint as another hub's
        cp = tlog.parse_checkpoint(tlog.parse_note(space.head()["checkpoint"]).body)
        foreign = tlog.Checkpoint(tlog.origin_of(public_b64(new_private_key()), space.id),
                                  cp.size, cp.root, cp.policy)
        line = tlog.cosign(w1.key, w1.w.name, foreign.body(), 1)
        err = _refused(a, "witness_quorum")
        assert err.details["cosigned"] == []
        # the real w1: accepted (what the two checks above refuse is all that was wrong)
        monkeypatch.setitem(wclient.TRANSPORTS, "http://w1", w1.transport)
        a.sync()
        kept = a.store.get_meta(logcheck.KEPT)
        assert tlog.cosigned_by(tlog.parse_note(kept["note"]), w1.w.name,
                                public_b64(w1.key)) is not None
    finally:
        impostor.close()
        a.close()
        b.close()


def _witness_call(w: Witness, old: int, proof: list[bytes], note: str) -> tuple[int, str]:
    from hub.witness.state import Refusal

    body = "\n".join([f"old {old}"] + [__import__("base64").b64encode(h).decode()
                                        for h in proof]) + "\n\n" + note
    try:
        return 200, w.add_checkpoint(body.encode())
    except Refusal as r:
        return r.status, r.message


def test_the_witness_refuses_a_smaller_size_another_root_another_log_and_a_bad_signature(
        tmp_path: Path) -> None:
    hub_key = new_private_key()
    origin = tlog.origin_of(public_b64(hub_key), "01hzzzzzzzzzzzzzzzzzzzzzzz")
    leaves = [merkle.leaf_hash(bytes([i])) for i in range(9)]
    tree = merkle.tree_of(leaves)

    def note(size: int, root: bytes | None = None, key: Any = hub_key, o: str = origin
             ) -> str:
        return tlog.sign_note(key, tlog.Checkpoint(o, size, root or tree.root(size),
                                                   None).body())

    w = Witness(new_private_key(), "w", WitnessState(tmp_path / "w.db"))
    assert _witness_call(w, 0, [], note(4))[0] == 200
    assert _witness_call(w, 0, [], note(5)) == (409, "4")  # not the size it holds
    assert _witness_call(w, 4, tree.consistency_proof(4, 6), note(6))[0] == 200
    # smaller: refused
    assert _witness_call(w, 6, [], note(5))[0] == 400
    # a proof for a different root: another history of 6 leaves, extended to 8
    other = merkle.tree_of(leaves[:5] + [merkle.leaf_hash(b"x")] + leaves[6:])
    status, said = _witness_call(w, 6, other.consistency_proof(6, 8), note(8, other.root(8)))
    assert status == 422 and "proof" in said
    # the honest proof to the honest root passes (the check above is what refused)
    assert _witness_call(w, 6, tree.consistency_proof(6, 8), note(8))[0] == 200
    # another space's log: a line of its own (a co-signature there says nothing here)
    o2 = tlog.origin_of(public_b64(hub_key), "01hyyyyyyyyyyyyyyyyyyyyyyy")
    assert _witness_call(w, 0, [], note(3, o=o2))[0] == 200
    assert w.state.held(origin).size == 8  # type: ignore[union-attr]
    # not signed by the key its origin names (another hub's key): refused
    assert _witness_call(w, 8, tree.consistency_proof(8, 9), note(9, key=new_private_key())
                         )[0] == 403
    # a witness serving only other hubs does not know this one
    w2 = Witness(new_private_key(), "w2", WitnessState(tmp_path / "w2.db"),
                 frozenset({public_b64(new_private_key())}))
    assert _witness_call(w2, 0, [], note(4))[0] == 404
    # two hub-signed checkpoints of one size: evidence kept, nothing co-signed after
    assert _witness_call(w, 8, [], note(8, other.root(8)))[0] == 422
    assert w.state.conflict(origin) is not None
    assert _witness_call(w, 8, tree.consistency_proof(8, 9), note(9))[0] == 409


def test_changes_past_the_witnessed_head_wait_for_a_full_sync() -> None:
    """The watcher's fast path applies changes a head event carried without asking for a
    fresh head: where the space has witnesses, nothing past the head whose log they
    co-signed goes in that way (the full sync that follows checks the log first)."""
    kept = {"head": {"epoch": "e1", "seq": 3},
            "policy": {"witnesses": [{"name": "w1", "key": "k", "url": "http://w1"}]}}
    logcheck.check_witnessed(kept, "e1", 3)  # up to the witnessed head: fine
    with pytest.raises(logcheck.Unwitnessed):
        logcheck.check_witnessed(kept, "e1", 4)
    with pytest.raises(logcheck.Unwitnessed):
        logcheck.check_witnessed(kept, "e2", 1)
    logcheck.check_witnessed(dict(kept, policy=None), "e1", 9)  # no witnesses: as before
    logcheck.check_witnessed(None, "e1", 9)


def test_a_pull_stops_at_the_witnessed_head_when_more_was_published_meanwhile(
        space: Any, tmp_path: Path, w1: RunningWitness) -> None:
    """Where the space has witnesses, a batch published between the head a sync checked
    and its pull of the changes waits for the next sync (which checks the log first)."""
    _policy(space, 1, w1.entry())
    a = space.replica(tmp_path, "a", wrap=Hostile)
    b = space.replica(tmp_path, "b")
    try:
        a.sync()
        b.write(PAGE)
        b.sync()
        witnessed = space.head()["seq"]

        def publish_first(request: Any, forward: Any) -> Any:
            b.write(B_NEW)
            b.sync()  # lands after a's head was checked, before its changes are read
            return forward()

        a.transport.intercept("changes", publish_first, times=1)
        a.sync()
        assert a.store.head().seq == witnessed and a.read(B_NEW.id) is None
        a.sync()
        assert a.read(B_NEW.id) is not None and _kept(a).size == 3  # type: ignore[union-attr]
    finally:
        a.close()
        b.close()
