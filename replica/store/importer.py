"""The store's record of imported files (``imported``: path in the import's folder, SHA-256
of its bytes, the entry, when), written once the entry is published: what a resumed
``quire import`` skips (replica/app/importer.py)."""

from __future__ import annotations

import time
from collections.abc import Iterable
from typing import Protocol

from replica.store import store as st
from replica.store.db import Conn


class Imported(Protocol):  # replica/app/importer.py ``Item``
    @property
    def path(self) -> str: ...
    @property
    def id(self) -> str: ...
    @property
    def sha256(self) -> str: ...


def imported_txn(conn: Conn) -> set[tuple[str, str]]:
    """Every (path, sha256) recorded."""
    return {(r[0], r[1]) for r in conn.execute("SELECT path, sha256 FROM imported")}


def record_txn(conn: Conn, items: Iterable[Imported]) -> list[str]:
    """Record the items whose entry the hub now has as this file (synced, nothing local
    pending, the vault file those bytes); their ids. The others are not recorded."""
    now = int(time.time() * 1000)
    done = []
    for item in items:
        s = st.get_state_txn(conn, item.id)
        if (s.synced is None or s.synced.deleted or s.dirty or s.held
                or s.file_hash != item.sha256):
            continue
        conn.execute("INSERT OR IGNORE INTO imported (path, sha256, entry_id, at)"
                     " VALUES (?, ?, ?, ?)", (item.path, item.sha256, item.id, now))
        done.append(item.id)
    return done
