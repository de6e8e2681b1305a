"""Whether a reader may have a blob's bytes: read rules reach an attachment's bytes as they
reach its entry (docs/security.md, "Read rules"; decisions.md D151).

    may_fetch_txn(conn, p, space, role, sha256)
      the reader's scope (hub/scope.py scope_txn, in the answer's own transaction)
      hides nothing?                        ─► yes: every blob the space holds
      else: the entries any stored version of which names sha256 (current rows, batches:
            hub/store/blobs_sql.py namers_txn), judged at this head (visible_txn: a
            deleted one by its last live version)
            one of them readable?           ─► yes, else no

Who asks: hub/blobs.py. ``GET …/blobs/H`` answers a "no" exactly as an absent blob
(``not_found``): a hash names content, and whether the space holds it is itself a fact
about hidden entries. An upload by a caller told "no" is answered as if the space did not
hold the bytes (``stored: true``, the quota checked as for new bytes, nothing written
twice), and its upload status as if nothing were held: the caller learns nothing beyond
the bytes it sent.
"""

from __future__ import annotations

from typing import Any

from hub.scope import scope_txn, visible_txn
from hub.store.blobs_sql import namers_txn


def may_fetch_txn(conn: Any, p: Any, space: Any, role: str | None, sha256: str) -> bool:
    """May ``p`` (role ``role`` in ``space``) have the bytes of blob ``sha256`` (module
    docstring)? Says nothing of whether the space holds them."""
    scope = scope_txn(conn, p, space, role)
    if scope.unrestricted:
        return True
    names = namers_txn(conn, space.id, sha256)
    return bool(names) and bool(visible_txn(conn, space.id, scope, names))
