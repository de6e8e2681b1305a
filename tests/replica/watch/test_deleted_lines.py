"""The watcher's activity lines name deleted pages from the covering index
(replica/watch/syncer.py ``_deleted_txn``, D141): the same answer as decoding each entry's
synced state (``live_version(...) is None``), for live, tombstoned, local-only and unknown
entries."""

from __future__ import annotations

from pathlib import Path

from replica.store import store as st
from replica.store.records import live_version
from replica.store.store import EntryState, Store
from replica.watch.syncer import _deleted_txn
from shared.entry import make_entry, tombstone


def _e(i: str) -> object:
    return make_entry({"id": i, "title": "t", "body": "b\n"})


def test_deleted_pages_from_the_index_match_the_decoded_states(tmp_path: Path) -> None:
    store = Store(tmp_path / "s.db", durable=False)
    live, gone, local_only = _e("page/live"), tombstone("page/gone"), _e("page/mine")
    with store.tx() as conn:
        st.put_state_txn(conn, EntryState("page/live", live, live))
        st.put_state_txn(conn, EntryState("page/gone", gone, gone))
        st.put_state_txn(conn, EntryState("page/mine", None, local_only))
    ids = {"page/live", "page/gone", "page/mine", "page/unknown"}
    with store.tx() as conn:
        decoded = sorted(e for e in ids
                         if live_version(st.get_state_txn(conn, e).synced) is None)
        assert _deleted_txn(conn, ids) == decoded == ["page/gone", "page/mine",
                                                      "page/unknown"]
        assert _deleted_txn(conn, set()) == []
