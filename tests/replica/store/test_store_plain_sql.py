"""The store's hot-path statements (plain SQL on the transaction's connection): the row
encoding (``SAME`` for a repeated state), the digest-cache triggers, the vault journal's
kept ``prev_hash``, meta overwrites, and the outbox drop of our own applied batch."""

from __future__ import annotations

from pathlib import Path

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from replica.engine.sync import Replica, SyncReport
from replica.hubclient.client import Change
from replica.store import store as st
from replica.store.store import SAME, EntryState, Head, Store
from shared.entry import make_entry, tombstone
from shared.wire import Op, build_batch

EPOCH = "E" * 26


def _e(i: str, body: str = "b\n"):
    return make_entry({"id": i, "title": "t", "body": body, "tags": ["x"], "links": [],
                       "meta": {}})


def _raw(store: Store, entry_id: str) -> tuple:
    with store.engine.connect() as conn:
        return conn.exec_driver_sql(
            "SELECT synced, synced_version, local, local_version, held, file_base,"
            " synced_deleted, local_deleted FROM entries WHERE id = ?", (entry_id,)).first()


def test_put_and_get_state_keep_the_row_encoding(tmp_path: Path) -> None:
    store = Store(tmp_path / "s.db", durable=False)
    a, b = _e("page/a"), _e("page/a", "other\n")
    with store.tx() as conn:
        assert st.get_state_txn(conn, "page/a") == EntryState("page/a", None, None)
        st.put_state_txn(conn, EntryState("page/a", a, a, "h", 3, 4, False, a))  # insert
    r = _raw(store, "page/a")
    assert (r[2], r[5], bool(r[4]), bool(r[6]), bool(r[7])) == (SAME, SAME, False, False,
                                                                False)
    assert r[1] == a.version and r[3] == a.version
    with store.tx() as conn:
        s = st.get_state_txn(conn, "page/a")
        assert (s.synced.version, s.local.version, s.file_base.version) == (a.version,) * 3
        assert (s.file_hash, s.file_size, s.file_mtime_ns, s.held) == ("h", 3, 4, False)
        s.local, s.held, s.file_base = b, True, a  # update: three different states
        st.put_state_txn(conn, s)
    r = _raw(store, "page/a")
    assert r[2] not in (None, SAME) and r[5] not in (None, SAME) and r[4] == 1
    with store.tx() as conn:
        s = st.get_state_txn(conn, "page/a")
        assert (s.local.version, s.file_base.version, s.held) == (b.version, a.version, True)
        s.synced, s.local = tombstone("page/a"), None
        st.put_state_txn(conn, s)
    r = _raw(store, "page/a")
    assert (r[2], r[3], bool(r[6]), r[7]) == (None, None, True, None)
    with store.tx() as conn:
        st.put_state_txn(conn, EntryState("page/a", None, None))  # nothing left: deleted
        assert st.get_state_txn(conn, "page/a") == EntryState("page/a", None, None)
    assert _raw(store, "page/a") is None
    store.close()


def test_digest_cache_is_dropped_by_a_synced_change_only(tmp_path: Path) -> None:
    store = Store(tmp_path / "s.db", durable=False)
    a = _e("page/a")
    with store.tx() as conn:
        st.set_head_txn(conn, Head(EPOCH, 0, "0" * 64))
        st.put_state_txn(conn, EntryState("page/a", a, a))
    store.digest()
    assert store.get_meta(st.DIGEST_KEY) is not None
    with store.tx() as conn:  # a file stat changes: the cache stays
        s = st.get_state_txn(conn, "page/a")
        s.file_hash, s.file_size = "h", 1
        st.put_state_txn(conn, s)
    assert store.get_meta(st.DIGEST_KEY) is not None
    with store.tx() as conn:  # the synced version changes: dropped in the same transaction
        s = st.get_state_txn(conn, "page/a")
        s.synced = s.local = _e("page/a", "new\n")
        st.put_state_txn(conn, s)
        assert st.get_meta_txn(conn, st.DIGEST_KEY) is None
    store.close()


def test_vault_journal_keeps_the_first_prev_hash_and_meta_overwrites(tmp_path: Path) -> None:
    store = Store(tmp_path / "s.db", durable=False)
    with store.tx() as conn:
        st.add_vault_write_txn(conn, "page/a", "one", "h0")
        st.add_vault_write_txn(conn, "page/a", "two", "h1")  # the file still holds h0
        st.add_vault_write_txn(conn, "page/b", None, None)
        assert st.get_meta_txn(conn, "k", "dflt") == "dflt"
        st.set_meta_txn(conn, "k", {"v": 1})
        st.set_meta_txn(conn, "k", {"v": 2})
        assert st.get_meta_txn(conn, "k") == {"v": 2}
    assert store.pending_vault_writes() == [("page/a", "two", "h0"), ("page/b", None, None)]
    with store.tx() as conn:
        st.done_vault_write_txn(conn, "page/a")
    assert store.pending_vault_writes() == [("page/b", None, None)]
    store.close()


def test_applying_our_own_batch_drops_it_from_the_outbox_only(tmp_path: Path) -> None:
    store = Store(tmp_path / "s.db", durable=False)
    (tmp_path / "v").mkdir()
    key = Ed25519PrivateKey.generate()
    me, other = "M" * 26, "O" * 26
    rep = Replica(space_id="sp", replica_id=me, vault=tmp_path / "v", store=store,
                  client=None, key=key)  # type: ignore[arg-type]

    def change(replica_id: str, batch_id: str, seq: int, e) -> Change:
        b = build_batch(key, batch_id=batch_id, replica_id=replica_id, space="sp",
                        epoch=EPOCH, parent_seq=seq - 1, parent_digest="0" * 64,
                        ops=[Op(e, None)])
        return Change(b, seq, f"{seq:064x}", 1, {"user": "u"})

    with store.tx() as conn:
        st.set_head_txn(conn, Head(EPOCH, 0, "0" * 64))
        st.add_outbox_txn(conn, "B" * 26, {"x": 1}, 1)
        st.add_outbox_txn(conn, "C" * 26, {"x": 2}, 2)
    with store.tx() as conn:  # another replica's batch: our outbox stays as it is
        rep.puller._apply_change_txn(conn, change(other, "B" * 26, 1, _e("page/a")), SyncReport())
    assert [r["batch_id"] for r in store.outbox()] == ["B" * 26, "C" * 26]
    with store.tx() as conn:
        rep.puller._apply_change_txn(conn, change(me, "B" * 26, 2, _e("page/b")), SyncReport())
    assert [r["batch_id"] for r in store.outbox()] == ["C" * 26]
    assert store.head() == Head(EPOCH, 2, f"{2:064x}")
    h = store.history()
    assert [(r["seq"], r["batch_id"], r["replica_id"], r["kind"]) for r in h] == [
        (1, "B" * 26, other, "batch"), (2, "B" * 26, me, "batch")]
    assert h[1]["entries"] == '["page/b"]' and h[1]["author"] == '{"user": "u"}'
    rep.flush_vault()
    assert store.pending_vault_writes() == []
    assert {i: s.local.version for i, s in store.states().items()} == {
        "page/a": _e("page/a").version, "page/b": _e("page/b").version}
    assert all(s.file_hash and s.file_base.version == s.local.version
               for s in store.states().values())
    store.close()
