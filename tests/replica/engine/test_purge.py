"""Purge, the pure parts and the replica's store step (hub/purge.py, hub/store/purge_sql.py,
replica/engine/purge.py, shared/signed.py): what is cut from a stored batch, which ids a signed
epoch path purges, and what a replica keeps of a purged entry (a local edit, held) and drops
(everything else). End to end: tests/replica/engine/test_purge_e2e.py."""

from __future__ import annotations

from pathlib import Path

import pytest

from hub.store.purge_sql import scrub_body
from replica.engine.purge import PURGED, compact_store, drop_purged_txn, purged_by
from replica.engine.report import SyncReport
from replica.store import store as st
from replica.store.store import EntryState, Store
from shared.entry import make_entry
from shared.errors import HubUnverified
from shared.ids import new_id
from shared.signed import EPOCH_DOMAIN, epoch_body, parse_epoch_statement, sign_statement
from shared.signing import new_private_key, public_b64
from shared.wire import op_entry_id

SECRET = "purge-canary-unit"


def _put(eid: str, body: str = "x\n") -> dict[str, object]:
    return {"op": "put", "entry": make_entry({"id": eid, "title": eid, "body": body})
            .to_dict(), "base": None}


@pytest.mark.parametrize(("op", "want"), [
    (_put("page/a"), "page/a"),
    ({"op": "delete", "id": "page/b", "base": "0" * 64}, "page/b"),
    ({"op": "put"}, None),
    ("not an op", None),
])
def test_op_entry_id_reads_both_op_kinds(op: object, want: str | None) -> None:
    assert op_entry_id(op) == want


def test_scrub_cuts_only_the_purged_ops_and_names_them() -> None:
    body = {"batch_id": "b", "ops": [_put("page/leak", SECRET), _put("page/keep"),
                                     {"op": "delete", "id": "page/gone", "base": "0" * 64}]}
    out = scrub_body(body, {"page/leak", "page/gone"})
    assert [op_entry_id(o) for o in out["ops"]] == ["page/keep"]
    assert out["purged"] == ["page/gone", "page/leak"]
    assert SECRET not in repr(out)
    assert scrub_body(out, {"page/other"})["purged"] == ["page/gone", "page/leak"]


def _statement(key, purged: list[str] | None, space: str, prev: str):  # type: ignore[no-untyped-def]
    return sign_statement(key, EPOCH_DOMAIN, epoch_body(
        space=space, epoch=new_id(), previous=prev, previous_seq=3,
        previous_digest="a" * 64, reason="leak", at=1, purged=purged))


def test_a_signed_purge_statement_names_its_ids_and_a_bump_none() -> None:
    key, space, prev = new_private_key(), new_id(), new_id()
    pub = public_b64(key)
    purge = parse_epoch_statement(pub, _statement(key, ["page/b", "page/a"], space, prev),
                                  space=space)
    bump = parse_epoch_statement(pub, _statement(key, None, space, prev), space=space)
    assert purge.purged == ("page/a", "page/b") and bump.purged == ()
    assert purged_by([bump, purge]) == {"page/a": "leak", "page/b": "leak"}


def test_a_purge_list_that_was_not_signed_or_is_malformed_is_refused() -> None:
    key, space, prev = new_private_key(), new_id(), new_id()
    st_ = _statement(key, ["page/a"], space, prev)
    with pytest.raises(HubUnverified):  # a proxy adding (or removing) ids breaks the signature
        parse_epoch_statement(public_b64(key), dict(st_, purged=["page/a", "page/b"]),
                              space=space)
    bad = _statement(key, ["../etc/passwd"], space, prev)
    with pytest.raises(HubUnverified):
        parse_epoch_statement(public_b64(key), bad, space=space)


def test_replica_keeps_a_local_edit_held_and_drops_every_other_copy(tmp_path: Path) -> None:
    store = Store(tmp_path / "store.sqlite", durable=False)
    hubs = make_entry({"id": "page/leak", "title": "t", "body": SECRET + "\n"})
    mine = make_entry({"id": "page/edited", "title": "t", "body": SECRET + " mine\n"})
    hubs2 = make_entry({"id": "page/edited", "title": "t", "body": SECRET + "\n"})
    with store.tx() as conn:
        st.put_state_txn(conn, EntryState("page/leak", hubs, hubs, file_base=hubs))
        st.put_state_txn(conn, EntryState("page/edited", hubs2, mine, file_base=mine))
        st.add_outbox_txn(conn, "b1", {"ops": [_put("page/edited", SECRET + " mine\n")]}, 1)
    report = SyncReport()
    written: list[str] = []
    with store.tx() as conn:
        drop_purged_txn(conn, {"page/leak": "r", "page/edited": "r"}, report,
                        lambda _c, s: written.append(s.id), 5)
    states = store.states()
    assert "page/leak" not in states  # no content, no file: the row is gone
    kept = states["page/edited"]
    assert kept.held and kept.synced is None and kept.local == mine
    (c,) = store.conflicts()
    assert c.fields == [PURGED] and c.base is None and c.theirs is None and c.ours == mine
    assert store.outbox() == []
    assert report.held == ["page/edited"]
    assert report.purged == [{"id": "page/edited", "reason": "r", "held": True},
                             {"id": "page/leak", "reason": "r", "held": False}]
    compact_store(store.path)
    data = b"".join(p.read_bytes() for p in tmp_path.iterdir() if p.is_file())
    # what is left is this replica's own edit (local, and ours in the conflict); the hub's
    # versions and the outbox batch are in neither file (VACUUM, WAL truncated)
    assert data.count(SECRET.encode()) == data.count((SECRET + " mine").encode()) == 2
    store.close()
